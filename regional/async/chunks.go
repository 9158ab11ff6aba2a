package async

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async/concerns"
)

// The jobs that write many items (imports, bulk updates) write them in
// chunks, one transaction a chunk that ends with the job's checkpoint, so a
// job run again after its worker died goes on after the last committed
// chunk; items that fail are counted and the first MaxReported of them
// listed in the result. The products, vouchers and customers jobs share
// this, each with its own failure record (F).

// MaxReported is how many failures a chunked job's checkpoint (and result)
// lists; FailedCount counts them all.
const MaxReported = 1000

// Chunked is a chunked job's checkpoint: the items committed so far (Next,
// the first item not yet committed) and what they left.
type Chunked[F any] struct {
	Next        int `json:"next"`
	DoneCount   int `json:"done_count"`
	FailedCount int `json:"failed_count"`
	Failed      []F `json:"failed"`
	// FailedItems are Failed's items in the input (FailItem; -1 unknown),
	// which a permanent deletion marks (EraseCustomer). Checkpoint only.
	FailedItems []int `json:"failed_items,omitempty"`
	// ReportBytes is the size of the job's report so far, for a job that
	// writes one (its next lines go after them).
	ReportBytes int64 `json:"report_bytes,omitempty"`
	// subjects are the customers the failures listed since the last
	// commit concern (FailItemOf), recorded with the chunk.
	subjects []concerns.Failure
}

// chunkedList is the key of Chunked's failures, in its checkpoint and in
// the jobs' results (which list Failed in its order, under the same key).
const chunkedList = "failed"

// Fail counts a failed item, listing it while fewer than MaxReported are.
func (c *Chunked[F]) Fail(f F) { c.FailItem(-1, f) }

// FailItem is Fail for the input's item (its index in the JSON input's
// array, or its data row in a CSV file counted from 0), which a permanent
// deletion may mark as hers.
func (c *Chunked[F]) FailItem(item int, f F) { c.FailItemOf(item, nil, f) }

// FailItemOf is FailItem for an item that named customers (their ids or
// source_ids, as it gave them): recorded with the chunk as the customers
// the failure concerns (concerns.Record), so that a permanent deletion of
// one of them finds it once the job is done, though it names nothing of
// hers. A failure whose reason is ErasedItem needs none.
func (c *Chunked[F]) FailItemOf(item int, customers []string, f F) {
	c.FailedCount++
	if len(c.Failed) >= MaxReported {
		return
	}
	if item >= 0 || c.FailedItems != nil {
		for len(c.FailedItems) < len(c.Failed) {
			c.FailedItems = append(c.FailedItems, -1)
		}
		c.FailedItems = append(c.FailedItems, item)
	}
	if len(customers) > 0 {
		c.subjects = append(c.subjects, concerns.Failure{At: len(c.Failed), Refs: customers})
	}
	c.Failed = append(c.Failed, f)
}

// Listed is Failed, never nil: a result shows [] when nothing failed.
func (c *Chunked[F]) Listed() []F {
	if c.Failed == nil {
		return []F{}
	}
	return c.Failed
}

// CommitChunk runs do in one transaction on a copy of st, then records the
// copy, with Next set to next, as the job's checkpoint at pct percent; st
// takes the copy only once it commits, so a transaction tried again starts
// from what the last commit left. The failures listed before the chunk
// are the stored checkpoint's, read under lock in the chunk's transaction,
// when a permanent deletion's erasure has redacted it since the run last
// saw it (EraseCustomer): the run's own copy, which still holds what the
// erasure took, is not written back.
func CommitChunk[F any](ctx context.Context, job *Job, st *Chunked[F], next, pct int,
	do func(ctx context.Context, tx pgx.Tx, st *Chunked[F]) error) error {
	var out Chunked[F]
	seen := job.seen
	err := db.InTx(ctx, job.w.pool, func(tx pgx.Tx) error {
		out = *st
		out.Failed, out.FailedItems, out.subjects = slices.Clone(st.Failed), slices.Clone(st.FailedItems), nil
		if err := do(ctx, tx, &out); err != nil {
			return err
		}
		if err := takeStoredFailures(ctx, tx, job, seen, st, &out); err != nil {
			return err
		}
		if err := recordChunkFailures(ctx, tx, job, &out); err != nil {
			return err
		}
		out.Next = next
		return job.Checkpoint(ctx, tx, out, pct)
	})
	if err != nil {
		job.seen = seen // the checkpoint written in the rolled back transaction is not
		return err
	}
	*st = out
	return nil
}

// recordChunkFailures records the customers that the failures a chunk
// listed concern, those still listed (takeStoredFailures may have cut
// some past MaxReported), and forgets them in c.
func recordChunkFailures[F any](ctx context.Context, tx pgx.Tx, job *Job, c *Chunked[F]) error {
	fs := slices.DeleteFunc(c.subjects, func(f concerns.Failure) bool { return f.At >= len(c.Failed) })
	c.subjects = nil
	return concerns.Record(ctx, tx, concerns.List{ProjectID: job.ProjectID, ActionID: job.ActionID, Name: chunkedList}, fs)
}

// takeStoredFailures locks the job's checkpoint and, when it is no longer
// what the run last saw (seen) though at the same item (st.Next: no
// other run moved it on), puts its failures in place of st's at the head
// of out's, before those the chunk added. Another run's checkpoint (at
// another item) is left to the overwrite, as before.
func takeStoredFailures[F any](ctx context.Context, tx pgx.Tx, job *Job, seen []byte, st, out *Chunked[F]) error {
	var stored []byte
	if err := tx.QueryRow(ctx, `SELECT CASE WHEN checkpoint IS DISTINCT FROM $3::JSONB AND checkpoint->>'next' = $4
		THEN checkpoint->'failed' END FROM async_actions WHERE project_id = $1 AND id = $2 FOR UPDATE`,
		job.ProjectID, job.ActionID, seen, strconv.Itoa(st.Next)).Scan(&stored); err != nil {
		return err
	}
	if stored == nil || len(out.Failed) < len(st.Failed) {
		return nil
	}
	var failed []F
	if err := json.Unmarshal(stored, &failed); err != nil {
		return fmt.Errorf("async: the stored checkpoint's failures: %w", err)
	}
	added := out.Failed[len(st.Failed):]
	out.Failed = append(failed, added[:min(len(added), max(0, MaxReported-len(failed)))]...)
	for i := range out.subjects { // the chunk's failures follow the stored ones
		out.subjects[i].At += len(failed) - len(st.Failed)
	}
	// The erasure rewrites the failures' texts, never their places: the
	// run's items stand for the stored ones.
	out.FailedItems = out.FailedItems[:min(len(out.FailedItems), len(out.Failed))]
	return nil
}

// RunChunks runs items [st.Next, n) in chunks of size, each committed with
// CommitChunk.
func RunChunks[F any](ctx context.Context, job *Job, st *Chunked[F], n, size int,
	do func(ctx context.Context, tx pgx.Tx, st *Chunked[F], from, to int) error) error {
	for st.Next < n {
		from, to := st.Next, min(n, st.Next+size)
		if err := CommitChunk(ctx, job, st, to, to*100/n, func(ctx context.Context, tx pgx.Tx, st *Chunked[F]) error {
			return do(ctx, tx, st, from, to)
		}); err != nil {
			return err
		}
	}
	return nil
}

// ErrInputTooLarge is an input longer than StoreInput's limit.
var ErrInputTooLarge = errors.New("async: the input is longer than its limit")

// StartJobFrom is StartJobWithInput for an input read from r (an uploaded
// file as it arrives): it is stored part by part as it is read, never held
// whole, and is ErrInputTooLarge past limit bytes. n is its length.
func StartJobFrom(ctx context.Context, tx db.Querier, projectID, actionType string, params any, r io.Reader, limit int64) (
	a Action, n int64, err error) {
	if a, err = StartJob(ctx, tx, projectID, actionType, params); err != nil {
		return Action{}, 0, err
	}
	buf := make([]byte, inputPart)
	for part := 0; ; part++ {
		k, err := io.ReadFull(r, buf)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return Action{}, n, err
		}
		if k == 0 && part > 0 {
			return a, n, nil
		}
		if n += int64(k); n > limit {
			return Action{}, n, ErrInputTooLarge
		}
		if _, err := tx.Exec(ctx, `INSERT INTO async_inputs (project_id, action_id, part, data) VALUES ($1, $2, $3, $4)`,
			projectID, a.ID, part, buf[:k]); err != nil {
			return Action{}, n, err
		}
		if k < len(buf) {
			return a, n, nil
		}
	}
}

// InputReader reads the job's input a stored part at a time (a file is
// never held whole); size is its length in bytes.
func (j *Job) InputReader(ctx context.Context) (r io.Reader, size int64, err error) {
	var parts int
	if err := j.w.pool.QueryRow(ctx, `SELECT count(*), COALESCE(sum(length(data)), 0) FROM async_inputs
		WHERE project_id = $1 AND action_id = $2`, j.ProjectID, j.ActionID).Scan(&parts, &size); err != nil {
		return nil, 0, err
	}
	if parts == 0 {
		return nil, 0, errors.New("async: the job's input is gone")
	}
	return bufio.NewReaderSize(&partReader{ctx: ctx, j: j, parts: parts}, 64<<10), size, nil
}

type partReader struct {
	ctx   context.Context
	j     *Job
	parts int
	next  int
	cur   []byte
}

func (p *partReader) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.next == p.parts {
			return 0, io.EOF
		}
		if err := p.j.w.pool.QueryRow(p.ctx, `SELECT data FROM async_inputs WHERE project_id = $1 AND action_id = $2 AND part = $3`,
			p.j.ProjectID, p.j.ActionID, p.next).Scan(&p.cur); err != nil {
			return 0, err
		}
		p.next++
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}
