package async

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async/concerns"
	"github.com/tallyhq/tally/regional/erasure"
)

// ErasureKind is the task that finishes a permanent deletion in the
// asynchronous phase: the scans of what the project retains (outbox
// payloads, async results, export files), whose cost grows with it, queued
// in the deletion's transaction. Until it is done its row names the
// subject, and every read of what it has still to erase goes through
// Erasing: task payloads are redacted as they are claimed, async results
// as they are read, and export files are held (exports).
const ErasureKind = "customer.erasure"

// erasingSQL reads the subjects of a project's unfinished erasures, from
// the partial index outbox_erasing (migration 46), which holds only them:
// a read asks it at the cost of an index probe, whatever the outbox holds.
// A parked erasure stays here, so what it did not erase stays unread
// until an operator requeues it.
const erasingSQL = `SELECT project_id, payload FROM outbox WHERE project_id = ANY($1) AND kind = '` + ErasureKind + `'
	AND status <> 'done'`

// QueueErasure queues the erasure of s's retained copies in tx, the
// permanent deletion's transaction.
func QueueErasure(ctx context.Context, tx db.Querier, projectID string, s erasure.Subject) error {
	_, err := Enqueue(ctx, tx, projectID, NewTask{Kind: ErasureKind, Payload: s, MaxAttempts: 100})
	return err
}

// Erasing returns the subjects whose erasure is not finished in projectID.
func Erasing(ctx context.Context, q db.Querier, projectID string) ([]erasure.Subject, error) {
	by, err := erasing(ctx, q, []string{projectID})
	return by[projectID], err
}

func erasing(ctx context.Context, q db.Querier, projects []string) (map[string][]erasure.Subject, error) {
	rows, err := q.Query(ctx, erasingSQL, projects)
	if err != nil {
		return nil, err
	}
	return scanErasing(rows)
}

// Current are the payloads of ts as a claim would give them now: each
// read again from its row, which an erasure finished since the claim has
// redacted, and redacted with the subjects of the erasures not finished.
// A task that sends its payload out (a webhook delivery) reads it so
// right before it sends, having first made its sending known to the
// permanent deletions that wait for such sends (webhooks.Service.AwaitSends):
// a deletion committed before this read is seen by it, and one committed
// after sees the send. The erasures are read before the rows, all in one
// round trip: an erasure finished between the reads has redacted the rows
// the later ones read.
func Current(ctx context.Context, q db.Querier, ts []Task) ([][]byte, error) {
	var by map[string][]erasure.Subject
	payloads := make([][]byte, len(ts))
	b := &pgx.Batch{}
	b.Queue(erasingSQL, projectsOf(ts, func(t Task) string { return t.ProjectID })).Query(func(rows pgx.Rows) error {
		var err error
		by, err = scanErasing(rows)
		return err
	})
	for i, t := range ts {
		b.Queue(`SELECT payload FROM outbox WHERE project_id = $1 AND id = $2`, t.ProjectID, t.ID).QueryRow(func(r pgx.Row) error {
			return r.Scan(&payloads[i])
		})
	}
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	for i, t := range ts {
		var err error
		if payloads[i], err = erasure.RedactAll(payloads[i], by[t.ProjectID]); err != nil {
			return nil, fmt.Errorf("async: task %s: %w", t.ID, err)
		}
	}
	return payloads, nil
}

func scanErasing(rows pgx.Rows) (map[string][]erasure.Subject, error) {
	by := map[string][]erasure.Subject{}
	var p string
	var payload []byte
	_, err := pgx.ForEachRow(rows, []any{&p, &payload}, func() error {
		var s erasure.Subject
		if err := json.Unmarshal(payload, &s); err != nil {
			return fmt.Errorf("async: an erasure's subject: %w", err)
		}
		if s.CustomerID != "" { // a finished one's payload, blanked
			by[p] = append(by[p], s)
		}
		return nil
	})
	return by, err
}

// projectsOf are the distinct projects of xs, in their first order.
func projectsOf[T any](xs []T, project func(T) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range xs {
		if p := project(x); !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// redactClaimed takes from the payloads of claimed tasks the data of the
// subjects whose erasure has not reached them yet: a webhook delivery (or
// any task) run meanwhile sends and uses what the erasure will leave.
func redactClaimed(ctx context.Context, q db.Querier, ts []Task) error {
	projects := projectsOf(ts, func(t Task) string { return t.ProjectID })
	if len(projects) == 0 {
		return nil
	}
	by, err := erasing(ctx, q, projects)
	if err != nil || len(by) == 0 {
		return err
	}
	for i, t := range ts {
		if subjects := by[t.ProjectID]; len(subjects) > 0 && t.Kind != ErasureKind {
			if ts[i].Payload, err = erasure.RedactAll(t.Payload, subjects); err != nil {
				return fmt.Errorf("async: task %s: %w", t.ID, err)
			}
		}
	}
	return nil
}

// redactParked is redactClaimed for the operators' list of parked tasks
// (payloads[i] is rows[i]'s): a parked task is read there, not claimed, so
// it would show what an unfinished erasure has still to take from it. A
// parked erasure shows only its customer's id: the values it looks for are
// the personal data it erases.
func redactParked(ctx context.Context, q db.Querier, rows []Row, payloads [][]byte) error {
	projects := projectsOf(rows, func(r Row) string { return r.ProjectID })
	if len(projects) == 0 {
		return nil
	}
	by, err := erasing(ctx, q, projects)
	if err != nil {
		return err
	}
	for i, r := range rows {
		if r.Kind == ErasureKind {
			var s erasure.Subject
			if json.Unmarshal(payloads[i], &s) == nil {
				payloads[i], _ = json.Marshal(erasure.Subject{CustomerID: s.CustomerID, Values: []string{}})
			}
			continue
		}
		if subjects := by[r.ProjectID]; len(subjects) > 0 {
			if payloads[i], err = erasure.RedactAll(payloads[i], subjects); err != nil {
				return fmt.Errorf("async: parked task %s: %w", r.ID, err)
			}
		}
	}
	return nil
}

// redactActions is redactClaimed for the async results a read returns,
// each redacted as a job's list of failed items (Subject.RedactJob).
func redactActions(ctx context.Context, q db.Querier, projectID string, as []Action) error {
	subjects, err := Erasing(ctx, q, projectID)
	if err != nil || len(subjects) == 0 {
		return err
	}
	ids := make([]string, len(as))
	for i := range as {
		ids[i] = as[i].ID
	}
	// The failures that name nothing of theirs, which the erasure will
	// find by what the jobs recorded they concern.
	by, err := concerns.Of(ctx, q, projectID, subjects, ids)
	if err != nil {
		return err
	}
	for i := range as {
		for _, s := range subjects {
			if as[i].Result == nil {
				break
			}
			if as[i].Result, _, err = s.RedactJob(as[i].Result, "", nil, by[as[i].ID]); err != nil {
				return fmt.Errorf("async: action %s: %w", as[i].ID, err)
			}
		}
	}
	return nil
}

// EraseCustomer is the erasure.Eraser of the outbox and async actions, run
// by the erasure task: webhook payloads waiting to be sent (and those
// sent, until the purge takes them), action results that copied the
// customer and the checkpoints of running jobs that did lose their
// personal data. The rows are found by the customer's
// id or values in their text: a scan of the project's outbox and actions,
// which the purge keeps short. The erasure tasks' own rows are left: they
// hold their subjects until they finish (ForgetErasure).
// Results and checkpoints are redacted as jobs' lists of failed items
// (Subject.RedactJob): an item that named her, or (in a checkpoint) that
// EraseInputs marked just before, says only ErasedItem why it failed, as
// its reason may quote a value it asked for her (a metadata schema's).
func EraseCustomer(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject, _ *erasure.Counts) error {
	cond, args := s.Mention("payload::TEXT", []any{projectID})
	if _, err := erasure.Rows(ctx, tx, projectID, s, `SELECT id, payload FROM outbox WHERE project_id = $1 AND kind <> '`+
		ErasureKind+`' AND `+cond, args, `UPDATE outbox SET payload = $3 WHERE project_id = $1 AND id = $2`); err != nil {
		return err
	}
	// The failures that concern her, recorded by the jobs that listed
	// them: those of finished jobs name nothing else of hers.
	by, err := concerns.Of(ctx, tx, projectID, []erasure.Subject{s}, nil)
	if err != nil {
		return err
	}
	cond, args = s.Mention("result::TEXT", []any{projectID})
	args = append(args, concerns.Actions(by))
	concerned := fmt.Sprintf(" OR id = ANY($%d)", len(args))
	if _, err := erasure.RowsBy(ctx, tx, projectID, func(id string, doc []byte) ([]byte, bool, error) {
		return s.RedactJob(doc, "", nil, by[id])
	}, `SELECT id, result FROM async_actions WHERE project_id = $1 AND result IS NOT NULL AND (`+cond+concerned+`)`,
		args, `UPDATE async_actions SET result = $3 WHERE project_id = $1 AND id = $2`); err != nil {
		return err
	}
	marks, err := inputMarks(ctx, tx, projectID)
	if err != nil {
		return err
	}
	// The checkpoints of jobs not finished: a chunked job's failures list
	// the items' values (source_id, …) until its result is made from them.
	// Rows are locked as read, so a chunk committing meanwhile waits for
	// this and takes the redacted failures (CommitChunk), and a result
	// recorded meanwhile sees the checkpoint changed (runJob). A
	// checkpoint object is marked with a digest of the one found (added
	// to those of earlier erasures the run has not moved past): a job
	// fenced on its checkpoint (Advance) tells it from another run's,
	// and takes it (RedactedError). The mark itself is not redacted (a
	// value of hex digits could match inside a digest).
	cond, args = s.Mention("checkpoint::TEXT", []any{projectID})
	args = append(args, concerns.Actions(by))
	concerned = fmt.Sprintf(" OR id = ANY($%d)", len(args))
	_, err = erasure.RowsBy(ctx, tx, projectID, func(id string, doc []byte) ([]byte, bool, error) {
		var marked func(int64) bool
		if m := marks[id]; m != nil {
			marked = func(i int64) bool { return m[i] }
		}
		return s.RedactJob(doc, erasedFrom, marked, by[id])
	}, `SELECT id, checkpoint FROM async_actions WHERE project_id = $1 AND checkpoint IS NOT NULL
		AND (`+cond+concerned+` OR id IN (SELECT action_id FROM async_input_erasures WHERE project_id = $1)) FOR UPDATE`,
		args, `UPDATE async_actions SET checkpoint = CASE WHEN jsonb_typeof($3::JSONB) = 'object'
			THEN $3::JSONB || jsonb_build_object('`+erasedFrom+`', COALESCE(checkpoint->'`+erasedFrom+`', '[]'::JSONB) ||
				jsonb_build_array(md5(`+unmarked("checkpoint")+`::TEXT)))
			ELSE $3::JSONB END WHERE project_id = $1 AND id = $2`)
	if err != nil {
		return err
	}
	return concerns.Forget(ctx, tx, projectID, s)
}

// inputMarks are the items of the project's unfinished jobs' inputs that
// erasures redacted (EraseInputs), by job.
func inputMarks(ctx context.Context, tx pgx.Tx, projectID string) (map[string]map[int64]bool, error) {
	rows, err := tx.Query(ctx, `SELECT action_id, item FROM async_input_erasures WHERE project_id = $1`, projectID)
	if err != nil {
		return nil, err
	}
	marks := map[string]map[int64]bool{}
	var action string
	var item int64
	_, err = pgx.ForEachRow(rows, []any{&action, &item}, func() error {
		if marks[action] == nil {
			marks[action] = map[int64]bool{}
		}
		marks[action][item] = true
		return nil
	})
	return marks, err
}

// ForgetErasure blanks the erasure task t's subject in tx, the transaction
// that finishes it: a finished task is kept until the purge, and its
// subject's values must not be.
func ForgetErasure(ctx context.Context, tx pgx.Tx, t Task) error {
	_, err := tx.Exec(ctx, `UPDATE outbox SET payload = '{}' WHERE project_id = $1 AND id = $2 AND kind = $3`,
		t.ProjectID, t.ID, ErasureKind)
	return err
}
