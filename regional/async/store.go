package async

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
)

// NewTask is work to enqueue.
type NewTask struct {
	Kind     string
	Payload  any
	RunAfter time.Time // zero: now
	// Policy overrides the kind's registered policy for this row's limits.
	MaxAttempts int
	MaxAge      time.Duration
}

// Enqueue writes a task in tx, the transaction of the change that causes
// it, with the trace context of ctx so that the task's span links back to the
// request. It returns the task id.
func Enqueue(ctx context.Context, tx db.Querier, projectID string, t NewTask) (string, error) {
	b := &pgx.Batch{}
	id, err := Queue(ctx, b, projectID, t)
	if err != nil {
		return "", err
	}
	return id, tx.SendBatch(ctx, b).Close()
}

// Queue is Enqueue for a transaction sent in batches (db.InPipe): the task's
// row is queued on b, and written when b is sent.
func Queue(ctx context.Context, b *pgx.Batch, projectID string, t NewTask) (string, error) {
	payload, err := json.Marshal(t.Payload)
	if err != nil {
		return "", fmt.Errorf("async: payload of %s: %w", t.Kind, err)
	}
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	now := time.Now().UTC()
	runAfter := t.RunAfter
	if runAfter.IsZero() {
		runAfter = now
	}
	maxAttempts := t.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = 10
	}
	var deadline *time.Time
	if t.MaxAge > 0 {
		d := now.Add(t.MaxAge)
		deadline = &d
	}
	id := ids.New("tsk_")
	noteQueued(ctx)
	b.Queue(`INSERT INTO outbox (project_id, id, kind, payload, trace_parent, max_attempts, deadline, run_after, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		projectID, id, t.Kind, payload, carrier.Get("traceparent"), maxAttempts, deadline, runAfter, now)
	return id, nil
}

// claimSQL leases the due tasks, from the partial index of pending ones
// (outbox_pending), which holds no finished task.
const claimSQL = `
		UPDATE outbox SET run_after = now() + $2::INT8 * INTERVAL '1 millisecond', lease_owner = $1, attempts = attempts + 1
		WHERE (project_id, id) IN (
			SELECT project_id, id FROM outbox WHERE status = 'pending' AND run_after <= now()
			ORDER BY run_after LIMIT $3 FOR UPDATE SKIP LOCKED)
		RETURNING project_id, id, kind, payload, trace_parent, attempts, max_attempts, deadline, created_at`

// claim leases up to n due tasks to owner for lease.
func claim(ctx context.Context, q db.Querier, owner string, n int, lease time.Duration) ([]Task, error) {
	rows, err := q.Query(ctx, claimSQL, owner, lease.Milliseconds(), n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Task, error) {
		t := Task{owner: owner}
		err := r.Scan(&t.ProjectID, &t.ID, &t.Kind, &t.Payload, &t.TraceParent, &t.Attempt, &t.MaxAttempts, &t.Deadline, &t.CreatedAt)
		return t, err
	})
}

// extendLease pushes a running task's lease out again.
func extendLease(ctx context.Context, q db.Querier, t Task, lease time.Duration) error {
	_, err := q.Exec(ctx, extendSQL,
		t.ProjectID, t.ID, t.owner, t.Attempt, lease.Milliseconds())
	return err
}

// errLeaseLost: another worker took the task after this one's lease lapsed.
var errLeaseLost = errors.New("async: lease lost")

// finish marks a task done if this worker still holds it.
func finish(ctx context.Context, q db.Querier, t Task) error {
	held, err := finishMany(ctx, q, []Task{t})
	if err != nil {
		return err
	}
	if !held[t.key()] {
		return errLeaseLost
	}
	return nil
}

// finishMany marks tasks done, and returns those this worker still held:
// the others' leases lapsed and another worker has them. The statements go
// in one pipelined batch: one round trip, and each an index lookup (a
// set-based UPDATE … FROM unnest(…) tempts the planner into scanning the
// whole outbox).
func finishMany(ctx context.Context, q db.Querier, ts []Task) (map[taskKey]bool, error) {
	b := &pgx.Batch{}
	for _, t := range ts {
		queueFinish(b, t)
	}
	return heldOf(ctx, q, b, ts)
}

// leaseHeld is the guard of every update a worker makes to a task it
// claimed: the row by its key, still leased to this worker for this attempt
// and not finished. It says "not finished" as status NOT IN ('done',
// 'parked') rather than status = 'pending' (the same, by the table's CHECK)
// so that only the primary key can serve it. With status = 'pending' as an
// index condition, PostgreSQL's planner, working from statistics taken while
// few rows were pending, chose the queue's index over the key and
// read every pending row for each update: 36-58 ms a finish under a 40,000
// task backlog, which held deliveries to ~200/s until autovacuum analyzed the
// table again (full bench runs: 676-887/s against 2,000-3,500/s alone).
const leaseHeld = `project_id = $1 AND id = $2 AND lease_owner = $3 AND attempts = $4 AND status NOT IN ('done', 'parked')`

// The updates guarded by leaseHeld: $1-$4 are the task's key, owner and attempt.
const (
	extendSQL = `UPDATE outbox SET run_after = now() + $5::INT8 * INTERVAL '1 millisecond' WHERE ` + leaseHeld
	finishSQL = `UPDATE outbox SET status = 'done', finished_at = now(), last_error = NULL WHERE ` + leaseHeld
	retrySQL  = `UPDATE outbox SET status = $5, run_after = $6, last_error = $7,
		finished_at = CASE WHEN $5 = 'parked' THEN now() ELSE NULL END WHERE ` + leaseHeld
)

func queueFinish(b *pgx.Batch, t Task) {
	b.Queue(finishSQL, t.ProjectID, t.ID, t.owner, t.Attempt)
}

// heldOf sends a batch of one guarded update per task and returns the tasks
// whose update found the row still leased to this worker.
func heldOf(ctx context.Context, q db.Querier, b *pgx.Batch, ts []Task) (map[taskKey]bool, error) {
	held := make(map[taskKey]bool, len(ts))
	if len(ts) == 0 {
		return held, nil
	}
	br := q.SendBatch(ctx, b)
	for _, t := range ts {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return nil, err
		}
		if tag.RowsAffected() == 1 {
			held[t.key()] = true
		}
	}
	return held, br.Close()
}

// retry schedules another try, or parks the task when it is out of tries or time.
func retry(ctx context.Context, q db.Querier, t Task, p Policy, cause error, jitter float64) (parked bool, err error) {
	b := &pgx.Batch{}
	parked = queueRetry(b, t, p, cause, jitter)
	held, err := heldOf(ctx, q, b, []Task{t})
	if err != nil {
		return false, err
	}
	if !held[t.key()] {
		return false, errLeaseLost
	}
	return parked, nil
}

func queueRetry(b *pgx.Batch, t Task, p Policy, cause error, jitter float64) (parked bool) {
	msg := cause.Error()
	if len(msg) > 2000 {
		msg = msg[:2000]
	}
	next := time.Now().Add(p.delay(t.Attempt, jitter))
	parked = t.Attempt >= t.MaxAttempts || (t.Deadline != nil && next.After(*t.Deadline))
	status := "pending"
	if parked {
		status = "parked"
	}
	b.Queue(retrySQL,
		t.ProjectID, t.ID, t.owner, t.Attempt, status, next, msg)
	return parked
}

// Row is an outbox row as an operator sees it.
type Row struct {
	ProjectID  string     `json:"project_id"`
	ID         string     `json:"id"`
	Kind       string     `json:"kind"`
	Status     string     `json:"status"`
	Attempts   int        `json:"attempts"`
	LastError  *string    `json:"last_error"`
	Payload    any        `json:"payload"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// listParkedSQL reads parked tasks from their partial index (outbox_parked).
const listParkedSQL = `SELECT project_id, id, kind, status, attempts, last_error, payload, created_at, finished_at
		FROM outbox WHERE status = 'parked' AND (project_id, id) > ($1, $2) ORDER BY project_id, id LIMIT $3`

// ListParked returns parked tasks after the cursor (by project, id), for operators.
func ListParked(ctx context.Context, q db.Querier, afterProject, afterID string, limit int) ([]Row, error) {
	rows, err := q.Query(ctx, listParkedSQL, afterProject, afterID, limit)
	if err != nil {
		return nil, err
	}
	var payloads [][]byte
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var x Row
		var payload []byte
		err := r.Scan(&x.ProjectID, &x.ID, &x.Kind, &x.Status, &x.Attempts, &x.LastError, &payload, &x.CreatedAt, &x.FinishedAt)
		payloads = append(payloads, payload)
		return x, err
	})
	if err != nil {
		return nil, err
	}
	// While an erasure is unfinished, what it has still to take is not shown.
	if err := redactParked(ctx, q, out, payloads); err != nil {
		return nil, err
	}
	for i := range out {
		_ = json.Unmarshal(payloads[i], &out[i].Payload)
	}
	return out, nil
}

// Requeue makes a parked task due again with fresh tries.
func Requeue(ctx context.Context, q db.Querier, projectID, id string) error {
	tag, err := q.Exec(ctx, `UPDATE outbox SET status = 'pending', attempts = 0, run_after = now(), finished_at = NULL,
		deadline = CASE WHEN deadline IS NULL THEN NULL ELSE now() + (deadline - created_at) END
		WHERE project_id = $1 AND id = $2 AND status = 'parked'`, projectID, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return db.ErrNotFound
	}
	return nil
}

// purgeDone deletes the tasks finished more than keep ago, at most batch
// (db.SweepBatch when 0) in each statement (db.Sweep, in the order of the
// partial index outbox_finished); run it on a pool.
func purgeDone(ctx context.Context, q db.Querier, keep time.Duration, batch int) (db.Swept, error) {
	return db.Sweep{Table: "outbox",
		Where: `status = 'done' AND finished_at < now() - $1::INT8 * INTERVAL '1 second'`, Args: []any{int64(keep.Seconds())},
		Order: []string{"finished_at", "project_id", "id"}, Key: []string{"project_id", "id"}, Batch: batch}.Run(ctx, q)
}

// Claim is the workers' claim (for the bench): up to n due tasks leased to
// owner for lease.
func Claim(ctx context.Context, q db.Querier, owner string, n int, lease time.Duration) ([]Task, error) {
	return claim(ctx, q, owner, n, lease)
}

// TaskState is how far the outbox has got with one task.
type TaskState struct {
	Status     string // pending, done or parked
	FinishedAt *time.Time
}

// QueueTaskStates queues onto b the lookup of the tasks ids of a project,
// filling into when b's results are read: another package asks the outbox
// this way instead of joining its table, and gains no round trip.
func QueueTaskStates(b *pgx.Batch, projectID string, ids []string, into map[string]TaskState) {
	b.Queue(`SELECT id, status, finished_at FROM outbox WHERE project_id = $1 AND id = ANY($2)`, projectID, ids).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				var s TaskState
				if err := rows.Scan(&id, &s.Status, &s.FinishedAt); err != nil {
					return err
				}
				into[id] = s
			}
			return rows.Err()
		})
}
