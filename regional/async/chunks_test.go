package async_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
)

// A chunked job over an input stored as it was read: a run that dies after
// its second chunk leaves two chunks committed, with their failure, and the
// run after it reads the input back as a stream and does the other two.
func TestChunkedJobOverAStreamedInputGoesOnAfterACrash(t *testing.T) {
	url := database(t)
	p := open(t, url)
	input := bytes.Repeat([]byte("0123456789"), 120_000) // 1.2 MB: three parts
	reg := async.NewRegistry()
	var runs atomic.Int32
	type failure struct{ Item, Run int32 }
	var written [4]atomic.Int32 // the run that wrote each item (a transaction tried again writes it again)
	reg.HandleJob("CUSTOMERS.IMPORT_CSV", func(ctx context.Context, job *async.Job) (any, error) {
		run := runs.Add(1)
		r, size, err := job.InputReader(ctx)
		if err != nil {
			return nil, err
		}
		if in, err := io.ReadAll(r); err != nil || size != int64(len(input)) || !bytes.Equal(in, input) {
			return nil, fmt.Errorf("input: %d bytes of %d, %v", len(in), size, err)
		}
		var st async.Chunked[failure]
		if _, err := job.Resume(ctx, &st); err != nil {
			return nil, err
		}
		for st.Next < 4 {
			if run == 1 && st.Next == 2 {
				panic("the worker dies here") // retried, as any failure
			}
			from := st.Next
			err := async.CommitChunk(ctx, job, &st, from+1, (from+1)*25, func(_ context.Context, _ pgx.Tx, st *async.Chunked[failure]) error {
				if from == 1 {
					st.Fail(failure{int32(from), run})
					return nil
				}
				written[from].Store(run)
				st.DoneCount++
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		return st, nil
	})
	act := started(t, p, func(ctx context.Context, tx pgx.Tx) (async.Action, error) {
		act, _, err := async.StartJobFrom(ctx, tx, "proj_a", "CUSTOMERS.IMPORT_CSV", nil, bytes.NewReader(input), int64(len(input)))
		return act, err
	})
	get := func() async.Action { return action(t, p, act.ID) }
	runWorker(t, url, reg)
	// The retry comes after its backoff (a second); the lease is left alone,
	// so no two runs overlap.
	waitFor(t, 20*time.Second, func() bool { return get().Status == async.Done })
	a := get()
	var st async.Chunked[failure]
	if err := json.Unmarshal(a.Result, &st); err != nil {
		t.Fatal(err)
	}
	if st.Next != 4 || st.DoneCount != 3 || st.FailedCount != 1 || len(st.Failed) != 1 || st.Failed[0] != (failure{1, 1}) {
		t.Fatalf("result: %s", a.Result)
	}
	// Items 0 and 1 were the first run's, 2 and 3 a later one's; DoneCount
	// above says none was done twice.
	if written[0].Load() != 1 || written[2].Load() < 2 || written[3].Load() < 2 {
		t.Fatalf("runs by item: %d %d %d", written[0].Load(), written[2].Load(), written[3].Load())
	}
}

// An input past its limit is refused while it is read, and nothing of it
// is kept.
func TestStartJobFromRefusesAnInputPastItsLimit(t *testing.T) {
	p := open(t, database(t))
	ctx := context.Background()
	err := db.InTx(ctx, p, func(tx pgx.Tx) error {
		_, _, err := async.StartJobFrom(ctx, tx, "proj_a", "CUSTOMERS.IMPORT_CSV", nil, bytes.NewReader(make([]byte, 600<<10)), 550<<10)
		return err
	})
	if !errors.Is(err, async.ErrInputTooLarge) {
		t.Fatalf("err = %v", err)
	}
	var n int
	if err := p.QueryRow(ctx, `SELECT (SELECT count(*) FROM async_inputs) + (SELECT count(*) FROM async_actions)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("left behind: %d rows, %v", n, err)
	}
}
