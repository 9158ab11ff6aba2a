package stacktest

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
)

// HoldJob queues an async job of actionType with its input stored, as its
// route would, but due only in an hour: it waits until ReleaseJob lets it
// run. The permanent-deletion tests hold a job so as to erase a customer
// its input names before it runs.
func (a API) HoldJob(actionType string, params any, input []byte) string {
	return a.HoldJobMadeBy(func(ctx context.Context, tx pgx.Tx) (async.Action, error) {
		return async.StartJobWithInput(ctx, tx, a.P.ID, actionType, params, input)
	})
}

// HoldJobMadeBy is HoldJob for a job that start makes in tx (a CSV import
// streams its input, say).
func (a API) HoldJobMadeBy(start func(ctx context.Context, tx pgx.Tx) (async.Action, error)) string {
	a.T.Helper()
	ctx := context.Background()
	var id string
	err := db.InTx(ctx, a.E.Stack.Regional[a.P.Cluster].Pool(), func(tx pgx.Tx) error {
		act, err := start(ctx, tx)
		if err != nil {
			return err
		}
		id = act.ID
		_, err = tx.Exec(ctx, `UPDATE outbox SET run_after = now() + INTERVAL '1 hour' WHERE project_id = $1 AND payload->>'action_id' = $2`,
			a.P.ID, id)
		return err
	})
	if err != nil {
		a.T.Fatal(err)
	}
	return id
}

// ReleaseJob lets a held job run now.
func (a API) ReleaseJob(actionID string) {
	a.T.Helper()
	if _, err := a.E.Stack.Regional[a.P.Cluster].Pool().Exec(context.Background(), `UPDATE outbox SET run_after = now()
		WHERE project_id = $1 AND payload->>'action_id' = $2 AND status = 'pending'`, a.P.ID, actionID); err != nil {
		a.T.Fatal(err)
	}
}

// WaitErasures waits, at most 20 s, until the project's erasure tasks (the
// asynchronous tail of its permanent deletions) are done.
func (a API) WaitErasures() {
	a.T.Helper()
	Eventually(a.T, 20*time.Second, "the erasure task done", func() bool {
		var n int
		if err := a.E.Stack.Regional[a.P.Cluster].Pool().QueryRow(context.Background(), `SELECT count(*) FROM outbox
			WHERE project_id = $1 AND kind = $2 AND status <> 'done'`, a.P.ID, async.ErasureKind).Scan(&n); err != nil {
			a.T.Fatal(err)
		}
		return n == 0
	})
}
