package async

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/internal/telemetry"
)

// Async action statuses, as the interface names them.
const (
	Enqueued   = "ENQUEUED"
	InProgress = "IN_PROGRESS"
	Done       = "DONE"
	Failed     = "FAILED"
)

// Action is a long-running job as GET /v1/async-actions shows it.
type Action struct {
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	Status          string          `json:"status"`
	OperationStatus *string         `json:"operation_status"`
	Result          json.RawMessage `json:"result"`
	CreatedAt       jsonx.Time      `json:"created_at"`
	UpdatedAt       *jsonx.Time     `json:"updated_at"`
	RequestID       *string         `json:"request_id"`
	ProcessingTime  *int            `json:"processing_time"`
	Progress        int             `json:"progress"`
	Object          string          `json:"object"`
}

// Job is a running job's handle on its action.
type Job struct {
	ProjectID string
	ActionID  string
	Params    json.RawMessage
	w         *Worker
	t         Task
	lastSave  time.Time
	// seen is the checkpoint as this run last read (Resume) or wrote it,
	// nil before either: the job's result is recorded only while the
	// stored one is still that (see runJob), and a chunk takes the stored
	// failures when it is not (CommitChunk).
	seen []byte
}

// JobFunc does a job's work and returns its result (rendered as the
// action's `result`). A JobFunc runs again from the start if its worker dies,
// so it must be safe to repeat. An error fails the action; it is not retried.
type JobFunc func(ctx context.Context, job *Job) (result any, err error)

type jobPayload struct {
	ActionID string          `json:"action_id"`
	Params   json.RawMessage `json:"params"`
}

// HandleJob registers the job behind an async action type (for example
// CAMPAIGN.VOUCHERS_GENERATE).
func (r *Registry) HandleJob(actionType string, fn JobFunc) {
	r.open(actionType)
	r.jobs[actionType] = fn
}

// StartJob records an ENQUEUED async action and the task that runs it, in
// tx: the job starts once the request's transaction commits.
func StartJob(ctx context.Context, tx db.Querier, projectID, actionType string, params any) (Action, error) {
	return StartJobAfter(ctx, tx, projectID, actionType, params, time.Time{})
}

// StartJobAfter is StartJob for a job that must not begin before runAfter.
func StartJobAfter(ctx context.Context, tx db.Querier, projectID, actionType string, params any, runAfter time.Time) (Action, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return Action{}, err
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := Action{ID: ids.New("aa_"), Type: actionType, Status: Enqueued, CreatedAt: jsonx.Time{Time: now}, Object: "async_action"}
	if rid := telemetry.RequestID(ctx); rid != "" {
		a.RequestID = &rid
	}
	if _, err := tx.Exec(ctx, `INSERT INTO async_actions (project_id, id, type, status, request_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, projectID, a.ID, a.Type, a.Status, a.RequestID, now); err != nil {
		return Action{}, err
	}
	_, err = Enqueue(ctx, tx, projectID, NewTask{Kind: jobKind(actionType), Payload: jobPayload{ActionID: a.ID, Params: p},
		MaxAttempts: 5, RunAfter: runAfter})
	return a, err
}

func jobKind(actionType string) string { return "job:" + actionType }

// inputPart is the largest part an input is stored in.
const inputPart = 512 << 10

// StartJobWithInput is StartJob for a job with a large input (an imported
// file, the items of a bulk update): the input is stored beside the action,
// in tx, and the job reads it with Input.
func StartJobWithInput(ctx context.Context, tx db.Querier, projectID, actionType string, params any, input []byte) (Action, error) {
	a, err := StartJob(ctx, tx, projectID, actionType, params)
	if err != nil {
		return Action{}, err
	}
	b := &pgx.Batch{}
	for part := 0; part == 0 || part*inputPart < len(input); part++ {
		chunk := input[part*inputPart : min(len(input), (part+1)*inputPart)]
		b.Queue(`INSERT INTO async_inputs (project_id, action_id, part, data) VALUES ($1, $2, $3, $4)`,
			projectID, a.ID, part, chunk)
	}
	return a, tx.SendBatch(ctx, b).Close()
}

// Input returns the input the job was started with (StartJobWithInput).
func (j *Job) Input(ctx context.Context) ([]byte, error) {
	rows, err := j.w.pool.Query(ctx, `SELECT data FROM async_inputs WHERE project_id = $1 AND action_id = $2 ORDER BY part`,
		j.ProjectID, j.ActionID)
	if err != nil {
		return nil, err
	}
	parts, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, errors.New("async: the job's input is gone")
	}
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, nil
}

// Checkpoint records, in tx (the transaction of the work it describes), how
// far the job has come and how far that is in percent. A job run again
// after its worker died reads it back with Resume and goes on from there,
// so work committed once is not done twice.
func (j *Job) Checkpoint(ctx context.Context, tx db.Querier, state any, pct int) error {
	b, err := json.Marshal(state)
	if err != nil {
		return err
	}
	return j.checkpoint(ctx, tx, b, pct)
}

func (j *Job) checkpoint(ctx context.Context, tx db.Querier, b []byte, pct int) error {
	if _, err := tx.Exec(ctx, `UPDATE async_actions SET checkpoint = $3, progress = $4, updated_at = now()
		WHERE project_id = $1 AND id = $2`, j.ProjectID, j.ActionID, b, max(0, min(pct, 99))); err != nil {
		return err
	}
	j.seen = b
	return nil
}

// ErrSuperseded is a job's run that found its checkpoint moved by another
// run of the same job (its lease lapsed and another worker took it over):
// it must stop, leaving the work to the other.
var ErrSuperseded = errors.New("async: another run of this job has moved its checkpoint")

// errCheckpointRedacted is a job's result not recorded because its
// checkpoint changed after the run last saw it (a permanent deletion's
// erasure redacted it): the task is tried again, and the job's next run
// goes on from the checkpoint as it is now.
var errCheckpointRedacted = errors.New("async: the job's checkpoint changed since its run last saw it (a permanent deletion redacted it); the job runs again")

// RedactedError is Advance finding the checkpoint it moves from
// redacted under the run by a permanent deletion's erasure (and by
// nothing else: EraseCustomer marks the checkpoint it rewrites with a
// digest of the one it found, erasedFrom): the step's work in the
// transaction is rolled back, and the run takes Stored (the redacted
// checkpoint, at the same item) as where it is and does the step again,
// so what the erasure took does not come back from the run's memory.
type RedactedError struct{ Stored []byte }

func (e *RedactedError) Error() string {
	return "async: a permanent deletion redacted the job's checkpoint under its run; the step is done again from it"
}

// erasedFrom is the key EraseCustomer adds to a checkpoint object it
// redacts: the md5s (of the JSONB text, without this key) of the
// checkpoints it was redacted from, one more each erasure, until the run
// moves it on. Advance's fence compares checkpoints without it.
const erasedFrom = "_erased_from"

// unmarked is the SQL of the JSONB expression x without erasedFrom.
func unmarked(x string) string {
	return `(CASE WHEN jsonb_typeof(` + x + `) = 'object' THEN ` + x + ` - '` + erasedFrom + `' ELSE ` + x + ` END)`
}

// Advance is Checkpoint for a job whose runs must not both do a step: it
// moves the checkpoint from `from` (nil: none yet) to `to` only if no
// other run moved it meanwhile, and is ErrSuperseded otherwise, so the
// step's work in tx is rolled back. A checkpoint a permanent deletion's
// erasure redacted under the run is not another run's: Advance is then a
// *RedactedError holding it; the run goes on from it with `from` the
// stored checkpoint as it is (a json.RawMessage), and may take it from
// Resume likewise.
func (j *Job) Advance(ctx context.Context, tx db.Querier, from, to any, pct int) error {
	var prev []byte
	if from != nil {
		var err error
		if prev, err = json.Marshal(from); err != nil {
			return err
		}
	}
	next, err := json.Marshal(to)
	if err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `UPDATE async_actions SET checkpoint = $3, progress = $4, updated_at = now()
		WHERE project_id = $1 AND id = $2 AND ((checkpoint IS NULL AND $5::JSONB IS NULL) OR `+unmarked("checkpoint")+` = `+unmarked("$5::JSONB")+`)`,
		j.ProjectID, j.ActionID, next, max(0, min(pct, 99)), prev)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return j.superseded(ctx, tx, prev)
	}
	j.seen = next
	return nil
}

// superseded is Advance's fence failed from prev: a *RedactedError when
// the stored checkpoint is prev as an erasure redacted it (read under
// lock, so no erasure changes it before the step runs again),
// ErrSuperseded otherwise.
func (j *Job) superseded(ctx context.Context, tx db.Querier, prev []byte) error {
	if prev == nil {
		return ErrSuperseded
	}
	var stored []byte
	err := tx.QueryRow(ctx, `SELECT checkpoint FROM async_actions WHERE project_id = $1 AND id = $2
		AND checkpoint->'`+erasedFrom+`' @> jsonb_build_array(md5(`+unmarked("$3::JSONB")+`::TEXT)) FOR UPDATE`, j.ProjectID, j.ActionID, prev).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrSuperseded
	}
	if err != nil {
		return err
	}
	return &RedactedError{Stored: stored}
}

// Seen is the checkpoint as this run last read (Resume) or wrote it, as
// stored: the `from` of a job's next Advance after Resume when the stored
// one may not read back into its state as it is (a permanent deletion's
// erasure nulls strings and marks it).
func (j *Job) Seen() json.RawMessage {
	return slices.Clone(j.seen)
}

// Resume reads the last checkpoint into state; ok is false when the job has
// none (its first run).
func (j *Job) Resume(ctx context.Context, state any) (ok bool, err error) {
	var b []byte
	if err := j.w.pool.QueryRow(ctx, `SELECT checkpoint FROM async_actions WHERE project_id = $1 AND id = $2`,
		j.ProjectID, j.ActionID).Scan(&b); err != nil {
		return false, err
	}
	if b == nil {
		return false, nil
	}
	j.seen = b
	return true, json.Unmarshal(b, state)
}

// Progress records how far the job is (0 to 100). It writes at most every
// half second, and extends the task's lease while the job runs.
func (j *Job) Progress(ctx context.Context, pct int) error {
	if time.Since(j.lastSave) < 500*time.Millisecond && pct < 100 {
		return nil
	}
	j.lastSave = time.Now()
	pct = max(0, min(pct, 100))
	_, err := j.w.pool.Exec(ctx, `UPDATE async_actions SET progress = $3, updated_at = now() WHERE project_id = $1 AND id = $2`,
		j.ProjectID, j.ActionID, pct)
	return err
}

// runJob is the ExtHandler of every job kind.
func (w *Worker) runJob(fn JobFunc) ExtHandler {
	return func(ctx context.Context, t Task) Outcome {
		var p jobPayload
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return Outcome{Err: fmt.Errorf("async: job payload: %w", err)}
		}
		job := &Job{ProjectID: t.ProjectID, ActionID: p.ActionID, Params: p.Params, w: w, t: t}
		if _, err := w.pool.Exec(ctx, `UPDATE async_actions SET status = $3, updated_at = now() WHERE project_id = $1 AND id = $2`,
			t.ProjectID, p.ActionID, InProgress); err != nil {
			return Outcome{Err: err}
		}
		start := time.Now()
		result, jobErr := fn(ctx, job)
		status, opStatus := Done, "SUCCESS"
		if jobErr != nil {
			status, opStatus = Failed, "FAILED"
			result = map[string]string{"message": jobErr.Error()}
		}
		res, err := json.Marshal(result)
		if err != nil {
			return Outcome{Err: err}
		}
		elapsed := int(time.Since(start).Milliseconds())
		// A result made from a checkpoint (a chunked job's failures) is
		// recorded only if the checkpoint is still as the run last saw it:
		// a permanent deletion's erasure that redacted it since (its row
		// locked by the erasure until it commits, and read again here
		// once it has) fails the record, and the job runs again from the
		// redacted checkpoint, so the result does not bring back what the
		// erasure took (errCheckpointRedacted).
		var seen []byte
		if jobErr == nil {
			seen = job.seen
		}
		return Outcome{Record: func(ctx context.Context, tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE async_actions SET status = $3, operation_status = $4, result = $5, progress = 100,
				processing_time = $6, checkpoint = NULL, updated_at = now() WHERE project_id = $1 AND id = $2
				AND ($7::JSONB IS NULL OR checkpoint = $7::JSONB)`,
				t.ProjectID, p.ActionID, status, opStatus, res, elapsed, seen)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 && seen != nil {
				return errCheckpointRedacted
			}
			if _, err := tx.Exec(ctx, `DELETE FROM async_inputs WHERE project_id = $1 AND action_id = $2`, t.ProjectID, p.ActionID); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `DELETE FROM async_input_erasures WHERE project_id = $1 AND action_id = $2`, t.ProjectID, p.ActionID)
			return err
		}}
	}
}

const actionColumns = `id, type, status, operation_status, result, created_at, updated_at, request_id, processing_time, progress`

func scanAction(r pgx.Row) (Action, error) {
	var a Action
	var created time.Time
	var updated *time.Time
	var result []byte
	if err := r.Scan(&a.ID, &a.Type, &a.Status, &a.OperationStatus, &result, &created, &updated, &a.RequestID,
		&a.ProcessingTime, &a.Progress); err != nil {
		return Action{}, err
	}
	a.CreatedAt, a.UpdatedAt, a.Object = jsonx.Time{Time: created}, jsonx.Ptr(updated), "async_action"
	if result != nil {
		a.Result = result
	}
	return a, nil
}

// GetAction returns one of a project's async actions.
func GetAction(ctx context.Context, q db.Querier, projectID, id string) (Action, error) {
	a, err := scanAction(q.QueryRow(ctx, `SELECT `+actionColumns+` FROM async_actions WHERE project_id = $1 AND id = $2`, projectID, id))
	if errors.Is(err, db.ErrNotFound) {
		return Action{}, db.ErrNotFound
	}
	return a, err
}

// ListActions returns a project's actions, newest first, created before endDate when given.
func ListActions(ctx context.Context, q db.Querier, projectID string, endDate *time.Time, lq listq.Query) ([]Action, error) {
	sql := `SELECT ` + actionColumns + ` FROM async_actions WHERE project_id = $1`
	args := []any{projectID}
	if endDate != nil {
		args = append(args, *endDate)
		sql += fmt.Sprintf(" AND created_at < $%d", len(args))
	}
	cond, orderBy, args := lq.Keyset("async_actions", "id", args)
	args = append(args, lq.Limit+1)
	sql += cond + fmt.Sprintf(" ORDER BY %s LIMIT $%d", orderBy, len(args))
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Action, error) { return scanAction(r) })
}

// WaitTurn holds a job until no earlier job of its type in its project is
// unfinished, so that the type's jobs run one at a time, in the order they
// were made: the reference's rule for order imports ("extra imports are
// scheduled to run in sequence"). An earlier job that has not moved for
// stale (its checkpoint and progress write updated_at) is taken as stuck
// and not waited for, so one parked job does not stop the project's later
// ones for good.
func (j *Job) WaitTurn(ctx context.Context, actionType string, poll, stale time.Duration) error {
	for {
		var earlier bool
		if err := j.w.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM async_actions
			WHERE project_id = $1 AND type = $2 AND status IN ('ENQUEUED', 'IN_PROGRESS') AND id < $3
			AND COALESCE(updated_at, created_at) > now() - $4::INTERVAL)`,
			j.ProjectID, actionType, j.ActionID, fmt.Sprintf("%d milliseconds", stale.Milliseconds())).Scan(&earlier); err != nil {
			return err
		}
		if !earlier {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}
