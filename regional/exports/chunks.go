package exports

import "errors"

// chunkBuffers is how many buffers one export's chunks pass through: the
// one the reader fills, one queued for the writer and the one the writer
// is storing. The reader waits for the writer to give one back rather than
// make another, so what an export holds does not grow with its size, and
// a file of gigabytes leaves no garbage of its chunks to collect.
const chunkBuffers = 3

// errWriterStopped is the reader's when the chunk writer stopped first.
var errWriterStopped = errors.New("exports: the chunk writer stopped")

// chunkPool is one export's chunk buffers.
type chunkPool struct {
	free chan []byte
	size int // a new buffer's capacity
	made int // buffers made so far (by the reader alone)
}

// newChunkPool is the buffers of chunks of limit bytes: a chunk is sent
// once it reaches limit, so a buffer holds limit and most of a row more.
func newChunkPool(limit int) *chunkPool {
	return &chunkPool{free: make(chan []byte, chunkBuffers), size: limit + limit/8}
}

// get is an empty buffer: one the writer gave back, a new one while fewer
// than chunkBuffers were made, else the next one the writer gives back.
// It fails once stop is closed.
func (p *chunkPool) get(stop <-chan struct{}) ([]byte, error) {
	select {
	case b := <-p.free:
		return b[:0], nil
	default:
	}
	if p.made < chunkBuffers {
		p.made++
		return make([]byte, 0, p.size), nil
	}
	select {
	case b := <-p.free:
		return b[:0], nil
	case <-stop:
		return nil, errWriterStopped
	}
}

// put gives back a buffer whose chunk is stored (the writer's).
func (p *chunkPool) put(b []byte) {
	select {
	case p.free <- b:
	default: // not one of the pool's
	}
}

// chunker cuts the CSV the reader writes into chunks of parts: each part
// starts with the header row, and each chunk goes to out once it holds
// limit bytes (or its part or the file ends).
type chunker struct {
	pool   *chunkPool
	out    chan<- chunk
	stop   <-chan struct{}
	limit  int
	header []byte

	parts       []Part
	buf         []byte // the chunk being written: append a row, then call endRow
	offset, all int64  // the chunk's offset in its part; rows written, all parts
}

func newChunker(pool *chunkPool, limit int, header []byte, out chan<- chunk, stop <-chan struct{}) *chunker {
	return &chunker{pool: pool, out: out, stop: stop, limit: limit, header: header}
}

// partRows is how many rows the current part holds.
func (w *chunker) partRows() int64 { return w.parts[len(w.parts)-1].Rows }

// startPart sends what the previous part left and starts the next part.
func (w *chunker) startPart() error {
	if err := w.flush(); err != nil {
		return err
	}
	w.parts = append(w.parts, Part{})
	w.offset = 0
	if err := w.ready(); err != nil {
		return err
	}
	w.buf = append(w.buf, w.header...)
	return nil
}

// ready takes a buffer for the chunk when it has none.
func (w *chunker) ready() error {
	if w.buf != nil {
		return nil
	}
	b, err := w.pool.get(w.stop)
	w.buf = b
	return err
}

// endRow counts the row appended to buf, and sends the chunk once full.
func (w *chunker) endRow() error {
	w.parts[len(w.parts)-1].Rows++
	w.all++
	if len(w.buf) < w.limit {
		return nil
	}
	if err := w.flush(); err != nil {
		return err
	}
	return w.ready()
}

// flush sends the chunk being written, if it holds anything.
func (w *chunker) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	c := chunk{part: len(w.parts) - 1, offset: w.offset, data: w.buf, rows: w.all}
	select {
	case w.out <- c:
	case <-w.stop:
		return errWriterStopped
	}
	w.parts[len(w.parts)-1].Bytes += int64(len(w.buf))
	w.offset += int64(len(w.buf))
	w.buf = nil
	return nil
}
