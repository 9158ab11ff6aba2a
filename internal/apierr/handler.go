package apierr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/cpushare"
	"github.com/tallyhq/tally/internal/db"
)

// HeaderRequestID is where every response carries its request id.
const HeaderRequestID = "X-Request-Id"

// From turns any error a handler returns into the API error to render. This
// is the one table from error kinds to statuses.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return fromEcho(he)
	}
	// Stores classify their errors (db.Pool); this catches a driver error
	// that reached here another way, so an outage is never a 500.
	err = db.Classify(err)
	switch {
	case errors.Is(err, db.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Key: "not_found", Message: "Resource not found", Cause: err}
	case errors.Is(err, db.ErrConflict):
		return &Error{Status: http.StatusConflict, Key: "duplicate_found", Message: "Duplicated resource found", Cause: err}
	case errors.Is(err, db.ErrInvalidValue):
		return &Error{Status: http.StatusBadRequest, Key: "invalid_payload", Message: "Invalid payload",
			Details: "A value in the request cannot be stored: text must be UTF-8 without NUL characters, and numbers within range.", Cause: err}
	case errors.Is(err, db.ErrCheck):
		return &Error{Status: http.StatusBadRequest, Key: "invalid_payload", Message: "Invalid payload",
			Details: fmt.Sprintf("The request breaks a rule of the stored data (%s).", db.Constraint(err)), Cause: err}
	}
	for _, k := range unavailable {
		if errors.Is(err, k.kind) {
			u := Unavailable(k.details)
			if k.key != "" {
				u.Key, u.Message = k.key, k.message
			}
			u.Cause = err
			return u
		}
	}
	return &Error{Status: http.StatusInternalServerError, Key: "internal_error", Message: "Internal server error",
		Details: "An unexpected error occurred; the request id identifies it in our logs.", Cause: err}
}

// unavailable are the error kinds answered 503 with Retry-After, first
// match first: what the client is told, and the key and message where they
// are not service_unavailable's.
var unavailable = []struct {
	kind                  error
	key, message, details string
}{
	{db.ErrContended, "resource_busy", "Resource busy",
		"Other requests of this project hold what this request changes, and did not let go in time; try again shortly."},
	{db.ErrAmbiguous, "outcome_unknown", "Outcome unknown",
		"The database could not confirm whether this request's changes were saved; read what it changes before sending it again."},
	{db.ErrOverShare, "project_over_share", "Project over its share",
		"This project has as many requests using the database as its share of the cluster allows; try again shortly."},
	{cpushare.ErrPaced, "project_over_share", "Project over its share",
		"This instance is busy and this project is over its share of it: its requests are paced, and this one's turn was too far off; try again shortly."},
	{db.ErrUnavailable, "", "", "The database of this cluster cannot be reached; try again shortly."},
	{context.DeadlineExceeded, "", "", "The request took too long to complete; try again shortly."},
}

func fromEcho(he *echo.HTTPError) *Error {
	msg := fmt.Sprint(he.Message)
	out := &Error{Status: he.Code, Message: http.StatusText(he.Code), Cause: he.Internal}
	switch he.Code {
	case http.StatusNotFound:
		out.Key, out.Message, out.Details = "not_found", "Resource not found", "No such endpoint."
	case http.StatusMethodNotAllowed:
		out.Key = "method_not_allowed"
		out.Message = "Method not allowed"
	case http.StatusRequestEntityTooLarge:
		out.Key, out.Message = "payload_too_large", "Payload too large"
		out.Details = "The request body is larger than this endpoint accepts."
	case http.StatusUnsupportedMediaType:
		out.Key, out.Message = "unsupported_media_type", "Unsupported media type"
		out.Details = "Send the body as JSON with the header Content-Type: application/json."
	case http.StatusUnauthorized:
		out.Key, out.Message = "unauthorized", "Unauthorized"
	case http.StatusTooManyRequests:
		out.Key, out.Message = "too_many_requests", "Too many requests hit the API too quickly."
	case http.StatusBadRequest:
		out.Key, out.Message, out.Details = "invalid_payload", "Invalid payload", msg
	default:
		if he.Code >= 500 {
			out.Key = "internal_error"
		} else {
			out.Key = strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "_")
			out.Details = msg
		}
	}
	return out
}

// StatusClientClosedRequest is nginx's 499: the client went away before
// its answer was ready. No answer reaches it; the status is for the logs and
// the request metrics, where it is no server error.
const StatusClientClosedRequest = 499

// ClientGone reports whether err is the request's own end: its work failed
// with context.Canceled because ctx, the request's context, was canceled,
// which net/http does when the client's connection closes. A cancellation
// of something else while the client still waits is no such thing.
func ClientGone(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(ctx.Err(), context.Canceled)
}

// Handler is the echo HTTPErrorHandler of every Tally service.
func Handler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		ctx := c.Request().Context()
		var e *Error
		if ClientGone(ctx, err) {
			// Whatever the error became on its way up (a database error, a
			// 503 of a store), the cause is the client hanging up.
			e = &Error{Status: StatusClientClosedRequest, Key: "client_closed_request", Message: "Client closed request",
				Details: "The client closed the connection before the answer was ready.", Cause: err}
		} else {
			e = From(err)
		}
		body := *e
		body.RequestID = c.Response().Header().Get(HeaderRequestID)
		if e.Status == http.StatusMethodNotAllowed {
			if allow := c.Response().Header().Get(echo.HeaderAllow); allow != "" {
				body.Details = "This endpoint accepts " + strings.ReplaceAll(allow, ", ", ", ") + "."
			}
		}
		for k, vs := range e.Header {
			c.Response().Header()[k] = vs
		}
		switch {
		case e.Status == StatusClientClosedRequest:
			log.InfoContext(ctx, "request canceled by client", "status", e.Status, "key", e.Key, "err", errString(err))
		case e.Status >= 500:
			log.ErrorContext(ctx, "request failed", "status", e.Status, "key", e.Key, "err", errString(err),
				"cause", errString(e.Cause))
		default:
			log.DebugContext(ctx, "request rejected", "status", e.Status, "key", e.Key, "err", errString(err))
		}
		if c.Request().Method == http.MethodHead {
			_ = c.NoContent(e.Status)
			return
		}
		_ = c.JSON(e.Status, &body)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
