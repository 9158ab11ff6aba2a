package db

import (
	"errors"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Typed errors: SQLSTATEs and driver failures become one of these here, once.
var (
	ErrNotFound    = errors.New("db: not found")
	ErrConflict    = errors.New("db: conflict with an existing row")
	ErrUnavailable = errors.New("db: database unavailable")
	// ErrInvalidValue: the database refused a value the request carried.
	ErrInvalidValue = errors.New("db: value cannot be stored")
)

type classified struct {
	kind  error
	cause error
}

func (c *classified) Error() string        { return c.kind.Error() + ": " + c.cause.Error() }
func (c *classified) Is(target error) bool { return target == c.kind }
func (c *classified) Unwrap() error        { return c.cause }

// Classify maps a driver error to a typed error, keeping the cause.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) || errors.Is(err, ErrUnavailable) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &classified{ErrNotFound, err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return &classified{ErrConflict, err}
		case pgErr.Code == "22021" || pgErr.Code == "22P05" || pgErr.Code == "22001" || pgErr.Code == "22003":
			// a NUL or invalid character, a string too long, a number out of range
			return &classified{ErrInvalidValue, err}
		case pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03" || pgErr.Code[:2] == "08":
			// admin shutdown, crash shutdown, cannot connect now, connection exceptions
			return &classified{ErrUnavailable, err}
		}
		return err
	}
	if IsConnectionError(err) {
		return &classified{ErrUnavailable, err}
	}
	return err
}

// IsConnectionError reports whether err means the database could not be
// reached or the connection broke, rather than that a statement failed.
func IsConnectionError(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) {
		return true
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) && pgconn.Timeout(err) {
		return true
	}
	return false
}

// IsUniqueViolation reports a unique-constraint conflict.
func IsUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
