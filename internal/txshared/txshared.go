// Package txshared keeps values that the tasks run in one transaction read
// once: the asynchronous worker (regional/async) gives each attempt of a
// batch transaction a fresh set (With), and a task's handler reads through
// it (Get).
package txshared

import "context"

// key is the context key of a transaction's shared values.
type key struct{}

// With is ctx carrying a fresh set of shared values, for one attempt of one
// transaction of tasks. The tasks of a transaction run one after another:
// the set is not for concurrent use.
func With(ctx context.Context) context.Context {
	return context.WithValue(ctx, key{}, map[any]any{})
}

// Get is the value under k read once per attempt of the transaction a
// database-effect task's handler runs in: the first task of a batch that
// asks reads it with read, the others of the batch get the same value (the
// earning rules of an event type, read once for a batch of accruals rather
// than once a task). What read returns is shared: read only. A read that
// fails is not kept. Outside such a transaction (a handler called
// directly, a task run alone) read runs every time.
//
// The value is as fresh as the batch: a READ COMMITTED task reading it
// itself would see what committed since the batch's first read, which is
// what a batch started that much earlier would have seen.
func Get[T any](ctx context.Context, k any, read func() (T, error)) (T, error) {
	m, _ := ctx.Value(key{}).(map[any]any)
	if v, ok := m[k].(T); ok {
		return v, nil
	}
	v, err := read()
	if err == nil && m != nil {
		m[k] = v
	}
	return v, err
}
