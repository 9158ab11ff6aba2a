package runtimex

import (
	"fmt"
	"log/slog"
	"runtime/debug"
)

// PanicError is a panic recovered in background work, with the stack of the
// goroutine where it happened. A bug in one task or sweep is that task's
// failure, recorded and retried like any other, never the process's end.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// LogValue logs the stack beside the message.
func (e *PanicError) LogValue() slog.Value {
	return slog.GroupValue(slog.String("panic", fmt.Sprint(e.Value)), slog.String("stack", string(e.Stack)))
}

// Recover, deferred, turns a panic of the deferring function into *err.
// It must be deferred directly: recover only stops a panic there.
func Recover(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}

// Call runs fn and returns its error, or a *PanicError if it panicked.
func Call(fn func() error) (err error) {
	defer Recover(&err)
	return fn()
}
