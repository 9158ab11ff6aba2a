package exports

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
)

// An export's chunk buffers do not grow with its size: the reader writes a
// file of hundreds of chunks into the same chunkBuffers buffers, which the
// writer gives back once each chunk is stored, and the file comes out
// whole, in order, each part opening with the header.
func TestAnExportsChunksReuseAFewBuffers(t *testing.T) {
	const limit, rows, partRows = 4 << 10, 40_000, 15_000
	header := []byte("Id,Reason\n")
	row := func(b []byte, i int) []byte { // without fmt, which allocates its arguments
		b = strconv.AppendInt(append(b, "lt_"...), int64(i), 10)
		return append(strconv.AppendInt(append(b, ",bench entry "...), int64(i), 10), '\n')
	}
	var want [3]bytes.Buffer
	for i := range rows {
		if i%partRows == 0 {
			want[i/partRows].Write(header)
		}
		want[i/partRows].Write(row(nil, i))
	}

	// What the reader allocates itself: the rows' bytes are appended from
	// one reused slice, as encode appends its cells'.
	var got [3]bytes.Buffer // the file as stored, grown beforehand
	for i := range got {
		got[i].Grow(want[i].Len())
	}
	write := func() (*chunker, error) {
		out, stop := make(chan chunk, chunkBuffers-1), make(chan struct{})
		pool := newChunkPool(limit)
		done := make(chan struct{})
		go func() { // the writer
			defer close(done)
			for c := range out {
				if int64(got[c.part].Len()) != c.offset {
					t.Errorf("part %d: a chunk at %d after %d bytes", c.part, c.offset, got[c.part].Len())
				}
				got[c.part].Write(c.data)
				pool.put(c.data)
			}
		}()
		w := newChunker(pool, limit, header, out, stop)
		err := w.startPart()
		line := make([]byte, 0, 64)
		for i := 0; i < rows && err == nil; i++ {
			if w.partRows() == partRows {
				if err = w.startPart(); err != nil {
					break
				}
			}
			line = row(line[:0], i)
			w.buf = append(w.buf, line...)
			err = w.endRow()
		}
		if err == nil {
			err = w.flush()
		}
		close(out)
		<-done
		return w, err
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w, err := write()
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if !bytes.Equal(got[i].Bytes(), want[i].Bytes()) {
			t.Fatalf("part %d: %d bytes, want %d", i+1, got[i].Len(), want[i].Len())
		}
		if w.parts[i].Rows != int64(min(partRows, rows-i*partRows)) || w.parts[i].Bytes != int64(want[i].Len()) {
			t.Fatalf("part %d: %+v", i+1, w.parts[i])
		}
	}
	chunks := (want[0].Len() + want[1].Len() + want[2].Len()) / limit
	if w.pool.made > chunkBuffers || chunks < 100 {
		t.Fatalf("%d buffers made for %d chunks", w.pool.made, chunks)
	}
	// A few buffers and the goroutine's: a new buffer a chunk would be
	// twenty times that.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*limit+64<<10 {
		t.Fatalf("%d bytes allocated besides the file for %d chunks of %d", alloc, chunks, limit)
	}
}
