// Package httpx builds the echo servers of Tally's services alike: request
// ids, the shared error handler, panic recovery, tracing, metrics and body
// limits, plus JSON decoding that answers bad bodies with clear 4xx errors.
// Its ServePublic, the edge's, refuses a request whose body two parsers
// could frame apart (framing.go).
package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"go.opentelemetry.io/contrib/instrumentation/github.com/labstack/echo/otelecho"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
)

// Config of a service's echo instance.
type Config struct {
	Service string
	Log     *slog.Logger
	Metrics *telemetry.Metrics
	// BodyLimit is the largest request body accepted, e.g. "1M" (the default).
	BodyLimit string
	// LargeBodies are the paths (imports, bulk updates; path.Match
	// patterns) that take bodies up to LargeBodyLimit instead.
	LargeBodies    []string
	LargeBodyLimit string
	// TrustRequestID keeps a well-formed incoming X-Request-Id (set by the
	// router) instead of making a new one. Only services behind the router set it.
	TrustRequestID bool
}

// New returns an echo instance with the common middleware installed.
func New(cfg Config) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.JSONSerializer = plainJSON{}
	e.HTTPErrorHandler = apierr.Handler(cfg.Log)
	e.Pre(RequestID(cfg.TrustRequestID))
	if cfg.Metrics != nil {
		// Outermost, so that it counts the status answered: otelecho below
		// hands a handler's error to the error handler, which maps it (an
		// *apierr.Error, a store's error, a 499 for a client gone) and
		// writes the answer before the metrics see it.
		e.Use(cfg.Metrics.Middleware())
	}
	// A handler's panic is its request's 500, logged with the panicking
	// goroutine's stack (echo takes the stack only when it may print it).
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			cfg.Log.ErrorContext(c.Request().Context(), "panic", "err", err.Error(), "stack", string(stack))
			return err
		}}))
	e.Use(otelecho.Middleware(cfg.Service))
	e.Use(RefuseAmbiguousFraming())
	e.Use(WholePath())
	e.Use(CheckText())
	limit := cfg.BodyLimit
	if limit == "" {
		limit = "1M"
	}
	// An entry is a path or a pattern of path.Match (a * for a segment).
	large := func(c echo.Context) bool {
		return slices.ContainsFunc(cfg.LargeBodies, func(p string) bool {
			ok, _ := path.Match(p, c.Request().URL.Path)
			return ok
		})
	}
	e.Use(middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Limit: limit, Skipper: large}))
	if len(cfg.LargeBodies) > 0 {
		e.Use(middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Limit: cfg.LargeBodyLimit,
			Skipper: func(c echo.Context) bool { return !large(c) }}))
	}
	return e
}

// plainJSON is echo's JSON serializer without HTML escaping: what a
// client writes (a message of "Spend > $50 & save") reads back as written,
// not as \u003e and \u0026. Answers are application/json, never HTML.
type plainJSON struct{ echo.DefaultJSONSerializer }

// Serialize writes i as encoding/json would (jsonx.Append, which is
// faster on the maps answers are made of), or indented by encoding/json.
func (plainJSON) Serialize(c echo.Context, i any, indent string) error {
	if indent != "" {
		enc := json.NewEncoder(c.Response())
		enc.SetEscapeHTML(false)
		enc.SetIndent("", indent)
		return enc.Encode(i)
	}
	bp := answerBufs.Get().(*[]byte)
	defer answerBufs.Put(bp)
	b, err := jsonx.Append((*bp)[:0], i)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if cap(b) <= 1<<20 { // a huge answer's buffer is not kept
		*bp = b
	}
	if CompareEncoders.Load() {
		var std bytes.Buffer
		enc := json.NewEncoder(&std)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(i); err != nil || !bytes.Equal(std.Bytes(), b) {
			return fmt.Errorf("httpx: jsonx.Append wrote %.2000s where encoding/json writes %.2000s (%v)", b, std.Bytes(), err)
		}
	}
	// The answer is whole: its length goes in the header. Without it
	// net/http chunks an answer past 2 KB, and the router, which passes a
	// body of unknown length on as a stream, flushed each piece it read to
	// its client in a write of its own.
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(b)))
	_, err = c.Response().Write(b)
	return err
}

// answerBufs are the answers' buffers, reused.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// CompareEncoders, set (by devstack/stacktest, for every end-to-end
// test), has each answer encoded by encoding/json as well and refused as
// a 500 when the bytes differ.
var CompareEncoders atomic.Bool

// NewRequestID returns a fresh request id (`v-` and a time-ordered body).
func NewRequestID() string { return ids.New("v-") }

// RequestID sets X-Request-Id on every response and puts it in the context.
func RequestID(trustIncoming bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			id := ""
			if trustIncoming {
				id = c.Request().Header.Get(apierr.HeaderRequestID)
				if !validRequestID(id) {
					id = ""
				}
			}
			if id == "" {
				id = NewRequestID()
			}
			c.Response().Header().Set(apierr.HeaderRequestID, id)
			r := c.Request()
			c.SetRequest(r.WithContext(telemetry.WithRequestID(r.Context(), id)))
			return next(c)
		}
	}
}

func validRequestID(id string) bool {
	if !strings.HasPrefix(id, "v-") || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch == '-' || ch == '_') {
			return false
		}
	}
	return true
}

// Bind decodes a JSON request body into v. A body that is not JSON is a 415,
// malformed JSON or a wrong type is a 400 invalid_payload that says where.
// Unknown fields are ignored, as the interface's versioning rules require.
func Bind(c echo.Context, v any) error {
	r := c.Request()
	if ct := r.Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return echo.NewHTTPError(http.StatusUnsupportedMediaType)
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeError(err)
	}
	if err := checkBody(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return apierr.InvalidPayload("The body holds more than one JSON value.")
	}
	return nil
}

// DecodeError is the 400 for a JSON value that did not decode into its Go
// value, in Bind's words: for the items of an import, each decoded alone.
func DecodeError(err error) error { return decodeError(err) }

func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
	case errors.Is(err, io.EOF):
		return apierr.InvalidPayload("The request body is empty; send a JSON object.")
	case errors.As(err, &syn):
		return apierr.InvalidPayload(fmt.Sprintf("Malformed JSON at byte %d: %s.", syn.Offset, syn.Error()))
	case errors.As(err, &typ):
		field := typ.Field
		// The body itself has the wrong type: say which type the route
		// takes (an array for the bulk and import routes), where every
		// route said "a JSON object" whatever it took.
		if field == "" {
			return apierr.InvalidPayload(fmt.Sprintf("Expected a JSON %s, got %s.", strings.TrimPrefix(strings.TrimPrefix(jsonType(typ.Type.Kind().String()), "an "), "a "), gotType(typ.Value)))
		}
		return apierr.InvalidPayload(fmt.Sprintf("Property %s must be %s, got %s.", field, jsonType(typ.Type.Kind().String()), gotType(typ.Value)))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return apierr.InvalidPayload("Malformed JSON: the body ends too early.")
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he
	}
	return apierr.InvalidPayload("Malformed JSON: " + err.Error())
}

// gotType names the JSON value encoding/json met ("object", "bool",
// "number 1.5") with its article, as the messages read.
func gotType(value string) string {
	switch v, _, _ := strings.Cut(value, " "); v {
	case "object", "array":
		return "an " + v
	case "bool":
		return "a boolean"
	case "string", "number":
		return "a " + v
	default:
		return value
	}
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	default:
		return "a number"
	}
}

// ServerIdleTimeout is how long a service keeps an idle keep-alive
// connection open. The router's upstream pool gives its connections up
// sooner (router/upstream.go), so it never writes into one being closed.
const ServerIdleTimeout = 120 * time.Second

// Serve runs h on the listener of a service behind the router until ctx
// ends, then shuts down gracefully, letting requests in flight finish for
// up to 10 seconds. Public listeners use ServePublic.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	return serve(ctx, &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: ServerIdleTimeout,
		DisableGeneralOptionsHandler: true}, l)
}

// ProjectID is the project of the request's verified identity (regional
// handlers run behind the middleware that admits only vouched requests).
func ProjectID(c echo.Context) string {
	id, _ := identity.From(c.Request().Context())
	return id.ProjectID
}

// Reply answers c with 200 and v, or returns err for the error handler:
// `return httpx.Reply(c)(svc.Get(…))`.
func Reply(c echo.Context) func(v any, err error) error {
	return func(v any, err error) error {
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, v)
	}
}

// WithBody binds the request body into an R (see Bind), and replies with
// what fn makes of it.
func WithBody[R any](c echo.Context, fn func(r R) (any, error)) error {
	var r R
	if err := Bind(c, &r); err != nil {
		return err
	}
	return Reply(c)(fn(r))
}

// ArrayError is the 400 for a body that should be a JSON array of items
// (the bulk and import routes that read their body themselves): it says
// what was expected and what came, as Bind's own message does.
func ArrayError(body []byte, items string) error {
	got := "an empty array"
	switch t := bytes.TrimSpace(body); {
	case len(t) == 0:
		got = "an empty body"
	case t[0] == '{':
		got = "an object"
	case t[0] == '"':
		got = "a string"
	case t[0] == 't' || t[0] == 'f':
		got = "a boolean"
	case t[0] == 'n':
		got = "null"
	case t[0] == '[':
		if !json.Valid(t) {
			return apierr.InvalidPayload("Malformed JSON: expected a JSON array of " + items + ".")
		}
		if len(bytes.TrimSpace(t[1:])) > 1 {
			got = "an array holding something else"
		}
	case json.Valid(t):
		got = "a number"
	default:
		return apierr.InvalidPayload("Malformed JSON: expected a JSON array of " + items + ".")
	}
	return apierr.InvalidPayload(fmt.Sprintf("Expected a JSON array of %s, got %s.", items, got))
}
