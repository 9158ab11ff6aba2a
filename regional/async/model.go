package async

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Task is one outbox row as a handler sees it.
type Task struct {
	ProjectID   string
	ID          string
	Kind        string
	Payload     json.RawMessage
	Attempt     int // 1 on the first run
	MaxAttempts int
	Deadline    *time.Time
	TraceParent string
	CreatedAt   time.Time
	owner       string
	// order is its kind's Policy.LockOrder, worked out once when the task
	// is claimed: the gate and the batch's sort both read it, and a
	// LockOrder decodes the payload.
	order string
}

type taskKey struct{ project, id string }

func (t Task) key() taskKey { return taskKey{t.ProjectID, t.ID} }

// TxHandler runs a task whose effect is in the database: it runs in the
// transaction that marks the task done, so its effect happens exactly once.
type TxHandler func(ctx context.Context, tx pgx.Tx, t Task) error

// Outcome is what an external handler reports: Err for a failed try, and
// Record, when set, writes what should be kept of the try, in the
// transaction that finishes or reschedules the task. That transaction is
// READ COMMITTED (see db.InTxReadCommitted): Record writes bookkeeping, with
// inserts and updates that name their rows, not reads that decide anything.
//
// Note is for kinds registered with a Recorder: it is handed to the
// recorder with the other tries of the batch, which writes them all at once.
type Outcome struct {
	Err    error
	Record func(ctx context.Context, tx pgx.Tx) error
	Note   any
}

// Try is one finished or failed try of an external task, as a Recorder sees it.
type Try struct {
	Task Task
	Err  error
	Note any
}

// Recorder queues the statements that write what a batch of tries of one
// kind left; they run in the transaction that finishes or reschedules the
// tries (READ COMMITTED, as for Outcome.Record), sent as one pipelined
// batch. One round trip per batch of tries instead of a few per try is what
// lets a busy kind keep up.
type Recorder func(b *pgx.Batch, tries []Try)

// ExtHandler runs a task whose effect is outside the database (an HTTP
// call). It may run more than once (at least once): what it does must be
// safe to repeat, keyed by the task id.
type ExtHandler func(ctx context.Context, t Task) Outcome

// Policy is how a kind is retried.
type Policy struct {
	MaxAttempts int           // park after this many tries (default 10)
	MaxAge      time.Duration // park once the task is this old (0: no limit)
	BackoffBase time.Duration // first retry delay, doubling (default 1s)
	BackoffCap  time.Duration // longest delay (default 1h)
	// ReadCommitted runs a database-effect task in a READ COMMITTED
	// transaction instead of SERIALIZABLE: for a handler that takes the row
	// locks it needs and makes its effect once by a unique key, which
	// serializable checks would only abort against unrelated writes.
	ReadCommitted bool
	// LockOrder, for a database-effect kind, names what a task locks first
	// (the customer whose cards it updates, say). The tasks of a batch run
	// in the order of these names, so two batches that lock the same rows
	// take them in the same order: one waits for the other instead of the
	// two deadlocking, which costs a second of detection and a rerun of both
	// batches' tasks one by one. Tasks without one run first.
	LockOrder func(Task) string
}

func (p Policy) withDefaults() Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 10
	}
	if p.BackoffBase == 0 {
		p.BackoffBase = time.Second
	}
	if p.BackoffCap == 0 {
		p.BackoffCap = time.Hour
	}
	return p
}

// delay before try n+1 after n failed tries: doubling, capped, with ±20% jitter.
func (p Policy) delay(n int, jitter float64) time.Duration {
	d := p.BackoffBase
	for i := 1; i < n && d < p.BackoffCap; i++ {
		d *= 2
	}
	if d > p.BackoffCap {
		d = p.BackoffCap
	}
	return time.Duration(float64(d) * (0.8 + 0.4*jitter))
}

type kind struct {
	tx     TxHandler
	ext    ExtHandler
	record Recorder
	policy Policy
}

// Registry maps task kinds to their handlers, and async action types to
// their jobs.
//
// It stays a registry, filled by the domains' constructors, rather than a
// contract each is given: the worker dispatches on a name read from an
// outbox row, not on a call a package makes, so no package calls another
// through it, and a kind's handler lives with the package that queues the
// kind. Every handler is registered while the app is built, before a
// worker runs: a registration after Worker.Run has started panics
// (sealed), so the worker never reads a table that is still changing.
type Registry struct {
	kinds  map[string]kind
	jobs   map[string]JobFunc
	wake   chan struct{}
	queued chan struct{} // a task is being written in this instance (Queue)
	sealed atomic.Bool
}

// seal ends registration: a worker has started reading the registry.
func (r *Registry) seal() { r.sealed.Store(true) }

// open panics when name is registered after the registry was sealed.
func (r *Registry) open(name string) {
	if r.sealed.Load() {
		panic("async: " + name + " registered after a worker started; register handlers while building the app")
	}
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{kinds: map[string]kind{}, jobs: map[string]JobFunc{}, wake: make(chan struct{}, 1),
		queued: make(chan struct{}, 1)}
}

type registryKey struct{}

// WithRegistry returns ctx carrying r: a task queued under it (Queue,
// Enqueue) tells r's worker that one is on its way, so that an idle worker
// polls at its busy pace again (WorkerOptions.IdlePoll). The instance puts
// it on every request's context.
func WithRegistry(ctx context.Context, r *Registry) context.Context {
	return context.WithValue(ctx, registryKey{}, r)
}

// noteQueued tells the worker of ctx's registry, if any, that a task is
// being written. It never blocks.
func noteQueued(ctx context.Context) {
	r, _ := ctx.Value(registryKey{}).(*Registry)
	if r == nil {
		return
	}
	select {
	case r.queued <- struct{}{}:
	default:
	}
}

// Wake tells this instance's worker that a task was just committed, so
// that it claims at once instead of at its next poll. Tasks committed by
// other instances are found by the poll. It never blocks.
func (r *Registry) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// HandleTx registers a database-effect handler.
func (r *Registry) HandleTx(name string, h TxHandler, p Policy) {
	r.open(name)
	r.kinds[name] = kind{tx: h, policy: p.withDefaults()}
}

// Handle registers an external-effect handler.
func (r *Registry) Handle(name string, h ExtHandler, p Policy) {
	r.open(name)
	r.kinds[name] = kind{ext: h, policy: p.withDefaults()}
}

// HandleRecorded registers an external-effect handler whose tries are
// written a batch at a time by rec, from the Notes of their outcomes.
func (r *Registry) HandleRecorded(name string, h ExtHandler, rec Recorder, p Policy) {
	r.open(name)
	r.kinds[name] = kind{ext: h, record: rec, policy: p.withDefaults()}
}

// Policy returns a kind's retry policy.
func (r *Registry) Policy(name string) (Policy, bool) {
	k, ok := r.kinds[name]
	return k.policy, ok
}
