// Package apierr is the one error type of Tally's HTTP interfaces and the one
// echo error handler that renders it, so every service answers errors in the
// interface's body: {code, key, message, details, request_id} and, on 404,
// resource_id and resource_type. Driver and library text never reaches a client.
package apierr
