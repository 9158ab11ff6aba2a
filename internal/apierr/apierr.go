package apierr

import (
	"fmt"
	"net/http"
)

// Error is an API error as the interface renders it.
type Error struct {
	Status       int    `json:"code"`
	Key          string `json:"key,omitempty"`
	Message      string `json:"message"`
	Details      string `json:"details,omitempty"`
	RequestID    string `json:"request_id,omitempty"`
	ResourceID   string `json:"resource_id,omitempty"`
	ResourceType string `json:"resource_type,omitempty"`
	// Header carries response headers the error needs (Allow, Retry-After).
	Header http.Header `json:"-"`
	// Cause is logged, never shown.
	Cause error `json:"-"`
}

func (e *Error) Error() string {
	if e.Details != "" {
		return fmt.Sprintf("%d %s: %s", e.Status, e.Key, e.Details)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Key, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// New makes an error with a status, a key, a message and details.
func New(status int, key, message, details string) *Error {
	return &Error{Status: status, Key: key, Message: message, Details: details}
}

// Unauthorized is the interface's 401 for missing or invalid credentials.
func Unauthorized(details string) *Error {
	return &Error{Status: http.StatusUnauthorized, Key: "unauthorized", Message: "Unauthorized", Details: details}
}

// NotFound is the interface's 404 for a resource that does not exist.
func NotFound(resourceType, id string) *Error {
	return &Error{
		Status: http.StatusNotFound, Key: "not_found", Message: "Resource not found",
		Details:    fmt.Sprintf("Cannot find %s with id %s", resourceType, id),
		ResourceID: id, ResourceType: resourceType,
	}
}

// InvalidPayload is a 400 for a request body that cannot be used.
func InvalidPayload(details string) *Error {
	return &Error{Status: http.StatusBadRequest, Key: "invalid_payload", Message: "Invalid payload", Details: details}
}

// InvalidQuery is a 400 for a query parameter that cannot be used; details name it.
func InvalidQuery(param, problem string) *Error {
	return &Error{Status: http.StatusBadRequest, Key: "invalid_query_params", Message: "Invalid query params",
		Details: fmt.Sprintf("%s: %s", param, problem)}
}

// Duplicate is a 409 for a resource that already exists.
func Duplicate(resourceType, details string) *Error {
	return &Error{Status: http.StatusConflict, Key: "duplicate_found", Message: "Duplicated resource found",
		Details: details, ResourceType: resourceType}
}

// Unavailable is a 503: a dependency (a database, an upstream cluster) cannot be reached.
func Unavailable(details string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Key: "service_unavailable", Message: "Service unavailable",
		Details: details, Header: http.Header{"Retry-After": []string{"1"}}}
}
