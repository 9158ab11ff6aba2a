package db

import (
	"errors"
	"net"
	"strings"
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
	// ErrCheck: a write broke a CHECK, NOT NULL or foreign key constraint;
	// Constraint names it.
	ErrCheck = errors.New("db: constraint violated")
	// ErrContended: what the request changes stayed locked by others past
	// LockTimeout, or deadlocked, over every retry.
	ErrContended = errors.New("db: rows locked by other requests")
	// ErrAmbiguous: the database could not say whether the transaction
	// committed (CockroachDB's 40003); it may have.
	ErrAmbiguous = errors.New("db: the commit's outcome is unknown")
)

var kinds = []error{ErrNotFound, ErrConflict, ErrUnavailable, ErrInvalidValue, ErrCheck, ErrContended, ErrOverShare, ErrAmbiguous}

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
	for _, k := range kinds {
		if errors.Is(err, k) {
			return err
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &classified{ErrNotFound, err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return &classified{ErrConflict, err}
		case pgErr.Code == "23514" || pgErr.Code == "23502" || pgErr.Code == "23503":
			return &classified{ErrCheck, err}
		case pgErr.Code == "40P01" || pgErr.Code == "55P03":
			return &classified{ErrContended, err}
		case pgErr.Code == "40003":
			return &classified{ErrAmbiguous, err}
		case strings.HasPrefix(pgErr.Code, "22") || pgErr.Code == "54000":
			// data exceptions (a NUL or invalid character, a string too
			// long, a number out of range, text that is no number or date)
			// and a value too large for an index
			return &classified{ErrInvalidValue, err}
		case pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03" || pgErr.Code == "57014" ||
			strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "53"):
			// shutdowns, cannot connect now, statement timeout, connection
			// exceptions, insufficient resources (too many connections)
			return &classified{ErrUnavailable, err}
		}
		return err
	}
	if IsConnectionError(err) {
		return &classified{ErrUnavailable, err}
	}
	return err
}

// Constraint is the constraint a classified ErrConflict or ErrCheck broke,
// "" for other errors.
func Constraint(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "23") {
		return pgErr.ConstraintName
	}
	return ""
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
