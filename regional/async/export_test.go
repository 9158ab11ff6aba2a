package async

import "context"

// Claim claims up to n due tasks for w, as its Run loop does.
func (w *Worker) Claim(ctx context.Context, n int) ([]Task, error) {
	ts, err := claim(ctx, w.pool, w.id, n, w.o.Lease)
	for i, t := range ts {
		k, _ := w.kind(t.Kind)
		ts[i] = withOrder(k, t)
	}
	return ts, err
}

// RunTxBatch runs claimed database-effect tasks as one batch, as Run does
// with the tasks of one claim.
func (w *Worker) RunTxBatch(ctx context.Context, ts []Task) { w.runTxBatch(ctx, ts) }

// GuardedUpdates are the statements a worker runs on a task it holds, with
// example arguments beyond the first four.
var GuardedUpdates = map[string][]any{
	extendSQL: {30000},
	finishSQL: nil,
	retrySQL:  {"pending", "2026-01-01T00:00:00Z", "boom"},
}

// The queue's reads, for their plans.
const ClaimSQL, ListParkedSQL = claimSQL, listParkedSQL

// Seal ends registration, as a worker's Run does when it starts.
func (r *Registry) Seal() { r.seal() }
