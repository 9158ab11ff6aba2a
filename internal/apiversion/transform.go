package apiversion

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"
)

// Transform adapts one route between the newest shapes and those of the
// versions before Since, the version that changed them: Request turns an
// older request body into the newest, Response the newest response body
// (with its status) into the older one. Either may be nil.
type Transform struct {
	Method, Route string // the echo route, e.g. "/v1/vouchers/:code/publish"
	Since         string
	Request       func(body []byte) ([]byte, error)
	Response      func(status int, body []byte) ([]byte, error)
}

// Registry is the one place the versions' differences live.
type Registry struct {
	byRoute map[string][]Transform // method + " " + route, newest Since first
}

// NewRegistry returns a registry with no transforms.
func NewRegistry() *Registry { return &Registry{byRoute: map[string][]Transform{}} }

// Add registers t.
func (r *Registry) Add(t Transform) {
	k := t.Method + " " + t.Route
	ts := append(r.byRoute[k], t)
	slices.SortStableFunc(ts, func(a, b Transform) int {
		switch {
		case a.Since > b.Since:
			return -1
		case a.Since < b.Since:
			return 1
		}
		return 0
	})
	r.byRoute[k] = ts
}

// applying are the transforms of a route that a request of version v
// needs, newest first: those of every change made after v.
func (r *Registry) applying(method, route, v string) []Transform {
	var out []Transform
	for _, t := range r.byRoute[method+" "+route] {
		if Before(v, t.Since) {
			out = append(out, t)
		}
	}
	return out
}

// Middleware applies the transforms the version of each request needs
// (version reads it, from the verified identity): the request body is
// brought forward, newest change last, before the handler reads it, and
// the response is taken back, newest change first, after it wrote it.
// Requests of the newest version pass untouched and unbuffered.
func (r *Registry) Middleware(version func(echo.Context) string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ts := r.applying(c.Request().Method, c.Path(), version(c))
			if len(ts) == 0 {
				return next(c)
			}
			req := c.Request()
			if req.Body != nil && req.Body != http.NoBody {
				body, err := io.ReadAll(req.Body)
				if err != nil {
					return err
				}
				for i := len(ts) - 1; i >= 0 && len(body) > 0; i-- {
					if ts[i].Request != nil {
						if body, err = ts[i].Request(body); err != nil {
							return err
						}
					}
				}
				req.Body = io.NopCloser(bytes.NewReader(body))
				req.ContentLength = int64(len(body))
			}
			res := c.Response()
			buf := &bufferedWriter{ResponseWriter: res.Writer, header: res.Header()}
			res.Writer = buf
			err := next(c)
			res.Writer = buf.ResponseWriter
			if err != nil && !res.Committed {
				return err // the error handler answers, in the shape every version shares
			}
			body := buf.body.Bytes()
			for _, t := range ts {
				if t.Response != nil {
					var terr error
					if body, terr = t.Response(buf.status, body); terr != nil {
						return terr
					}
				}
			}
			if buf.status == 0 {
				buf.status = http.StatusOK
			}
			if len(body) > 0 {
				res.Header().Set("Content-Length", strconv.Itoa(len(body)))
			} else {
				res.Header().Del("Content-Length") // the handler's, of the body before the transforms
			}
			buf.ResponseWriter.WriteHeader(buf.status)
			_, werr := buf.ResponseWriter.Write(body)
			return werr
		}
	}
}

// bufferedWriter keeps a handler's response until the transforms are done.
type bufferedWriter struct {
	http.ResponseWriter
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferedWriter) WriteHeader(status int) { w.status = status }

func (w *bufferedWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

func (w *bufferedWriter) Flush() {} // buffered on purpose: nothing leaves before the transforms
