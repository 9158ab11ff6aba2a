package async

import (
	"strings"

	"github.com/tallyhq/tally/internal/keygate"
)

// A worker's gate (internal/keygate) keeps two of its batch transactions
// from holding tasks that lock the same rows. Without it, a batch claimed while another runs
// holds tasks of the same customers (events for one customer arrive in a
// stream, each an accrual task), waits on the first batch's row locks
// until it commits, and every batch after it waits in turn: the batches of
// one worker run one after another, each a commit apart, and the queue
// grows (the events bench at 500/s: 57 % of the server's busy backends
// waiting on card locks, 1,255 accruals pending after 5 s). Held back
// instead, a task joins the batch that starts when the batch holding its
// key ends, so each batch runs without waiting and takes a stream's tasks
// together.
//
// The key is what Policy.LockOrder names, up to its first "|" (a customer
// id, or a card's holder then the card: both lock rows of that customer),
// within the task's project. Tasks of a kind without a LockOrder are never
// held back. Batches of other workers are not seen: they meet the row
// locks as before.
type keyGate = keygate.Gate[Task, taskKey]

// newKeyGate is a worker's gate: a task's key is its lockKey.
func newKeyGate() keyGate { return keyGate{Key: lockKey, ID: Task.key} }

// lockKey is t's key in the gate: its lock order up to the first "|",
// within its project; "" for a task of a kind without a lock order.
func lockKey(t Task) string {
	key, _, _ := strings.Cut(t.order, "|")
	if key == "" {
		return ""
	}
	return t.ProjectID + "\x00" + key
}
