// Package clientapi serves the client-side API (/client/v1/…): the calls a
// browser or mobile app makes with the project's public client key or a
// client_* token. The router has already checked the key and the origin;
// here each request meets the project's danger-zone toggles and, for a
// customer-bound token, its one customer, and is then served by its
// server-side twin (/v1/…) unchanged, version transforms included.
package clientapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/apiversion"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/tenancy"
)

// Deps are what the client-side API asks of the regional service.
type Deps struct {
	// Project reads a project's client-side settings (cached).
	Project func(ctx context.Context, id string) (tenancy.Project, error)
	// Customer finds a customer by id or source_id.
	Customer func(ctx context.Context, projectID, idOrSource string) (customers.Customer, error)
	// Versions transform the twin's route as they would on /v1.
	Versions *apiversion.Registry
}

type api struct {
	e        *echo.Echo
	d        Deps
	versions echo.MiddlewareFunc
}

// Register mounts /client/v1 on e, whose /v1 routes are the twins; the
// deprecated single-code forms (GET /client/v1/validate, POST
// /client/v1/redeem) are served through the engine's twins (legacy.go).
func Register(e *echo.Echo, d Deps) {
	a := &api{e: e, d: d, versions: d.Versions.Middleware(func(c echo.Context) string {
		if id, ok := identity.From(c.Request().Context()); ok && id.APIVersion != "" {
			return id.APIVersion
		}
		return apiversion.Latest
	})}
	g := e.Group("/client/v1")
	g.GET("/promotions/tiers", a.serve("/v1/promotions/tiers", nil))
	g.POST("/events", a.serve("/v1/events", events))
	g.POST("/publish", a.serve("/v1/publications", publish))
	g.GET("/vouchers", a.serve("/v1/vouchers", listVouchers))
	g.POST("/customers", a.serve("/v1/customers", createCustomer))
	a.registerEngine(g)
	a.registerLegacy(g)
}

// call is one client-side request on its way to its twin.
type call struct {
	ctx     context.Context
	a       *api
	c       echo.Context
	project tenancy.Project
	bound   string                     // the customer a bound token acts for, or ""
	raw     []byte                     // the body as sent
	body    map[string]json.RawMessage // the body when it is a JSON object, or {} when there is none
	changed bool
}

// serve checks a request with prepare and hands it to the route twin.
func (a *api) serve(twin string, prepare func(*call) error) echo.HandlerFunc {
	return a.serveAs("", twin, prepare, nil)
}

// answerFunc makes a twin's successful answer (its status and JSON body)
// into the client route's own.
type answerFunc func(k *call, status int, body []byte) (any, error)

// serveAs is serve with the twin's method (method "" is the request's),
// and, when answer is not nil, the twin's successful answer rewritten by it.
func (a *api) serveAs(method, twin string, prepare func(*call) error, answer answerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		ctx := req.Context()
		who, _ := identity.From(ctx)
		if who.Kind != identity.KindClient {
			return apierr.Unauthorized("The client-side API takes a client-side key (X-Client-Application-Id and X-Client-Token) " +
				"or a token with client_* scopes.")
		}
		p, err := a.d.Project(ctx, who.ProjectID)
		if errors.Is(err, tenancy.ErrProjectNotFound) {
			return apierr.Unauthorized("The project of these credentials no longer exists.")
		}
		if err != nil {
			return err
		}
		k := &call{ctx: ctx, a: a, c: c, project: p, bound: who.Customer}
		if err := k.readBody(); err != nil {
			return err
		}
		if prepare != nil {
			if err := prepare(k); err != nil {
				return err
			}
		}
		raw := k.raw
		if k.changed {
			if raw, err = json.Marshal(k.body); err != nil {
				return err
			}
		}
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
		if answer == nil {
			return a.twin(c, method, twin)
		}
		res := c.Response()
		w, kept := &captured{header: res.Header()}, res.Writer
		res.Writer = w
		err = a.twin(c, method, twin)
		res.Writer, res.Committed, res.Size, res.Status = kept, false, 0, http.StatusOK
		if err != nil {
			return err
		}
		if w.status < 200 || w.status > 299 {
			c.Response().WriteHeader(w.status)
			_, err := c.Response().Write(w.body.Bytes())
			return err
		}
		v, err := answer(k, w.status, w.body.Bytes())
		if err != nil {
			return err
		}
		res.Header().Del(echo.HeaderContentLength) // the twin's, of the body rewritten here
		return c.JSON(w.status, v)
	}
}

// captured holds a twin's answer for serveAs to rewrite; its headers are
// the response's own.
type captured struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *captured) Header() http.Header { return w.header }
func (w *captured) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
func (w *captured) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

// twin serves c by the route at path (with method, or the request's when
// ""), as if it had been sent there.
func (a *api) twin(c echo.Context, method, path string) error {
	req := c.Request()
	u := *req.URL
	u.Path, u.RawPath = path, ""
	out := req.WithContext(req.Context())
	out.URL = &u
	if method != "" {
		out.Method = method
	}
	c.SetRequest(out)
	route := c.Path()
	defer c.SetPath(route) // metrics name the client route
	a.e.Router().Find(out.Method, path, c)
	return a.versions(c.Handler())(c)
}

// readBody reads the body, keeping it as an object when it is one (or
// none); k.body is nil for any other body, which the twin refuses.
func (k *call) readBody() error {
	req := k.c.Request()
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		k.raw, err = io.ReadAll(req.Body)
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
		}
		if err != nil {
			return apierr.InvalidPayload("The request body could not be read: " + err.Error() + ".")
		}
	}
	if len(bytes.TrimSpace(k.raw)) == 0 {
		k.body = map[string]json.RawMessage{}
	} else if json.Unmarshal(k.raw, &k.body) != nil || k.body == nil {
		k.body = nil
	}
	if err := exactKeys(k.body, "", guarded); err != nil {
		return err
	}
	var cust map[string]json.RawMessage
	if json.Unmarshal(k.body["customer"], &cust) == nil {
		return exactKeys(cust, "customer.", customerKeys)
	}
	return nil
}

// set changes a property of an object body. A value that does not
// marshal (a NaN) is left as text for the twin to refuse, never dropped.
func (k *call) set(field string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(fmt.Sprint(v))
	}
	k.body[field], k.changed = b, true
}

// guarded are the body's properties the client API checks (toggles, the
// bound customer, cards), and customerKeys a customer object's.
var (
	guarded      = []string{"customer", "redeemables", "loyalty", "referral", "expiration_date"}
	customerKeys = []string{"id", "source_id"}
)

// exactKeys refuses a property of obj written other than as names have
// it: encoding/json matches a struct's field names without regard to case
// (Unicode's simple folding: ſ is s), so the twin would read
// EXPIRATION_DATE or ſource_id where a check of the exact key saw nothing.
func exactKeys(obj map[string]json.RawMessage, where string, names []string) error {
	for key := range obj {
		for _, n := range names {
			if key != n && strings.EqualFold(key, n) {
				return apierr.InvalidPayload(fmt.Sprintf("%s%q: write the property as %q", where, key, n))
			}
		}
	}
	return nil
}

// need refuses an action the project has not enabled.
func need(on bool, flag, what string) error {
	if on {
		return nil
	}
	return apierr.New(http.StatusForbidden, "client_side_action_disabled", "Forbidden",
		fmt.Sprintf("%s from the client-side API is disabled for this project: an admin enables %s "+
			"(PUT /management/v1/projects/{projectId}).", what, flag))
}

func events(k *call) error {
	if carries(k.body["loyalty"]) || carries(k.body["referral"]) {
		if err := need(k.project.Settings.ClientLoyaltyEventsEnabled, "client_loyalty_events_enabled",
			"Sending events with loyalty or referral"); err != nil {
			return err
		}
	}
	return k.bindField("customer")
}

// publish takes the campaign from the query, where the client SDK puts it.
func publish(k *call) error {
	if err := need(k.project.Settings.ClientPublishEnabled, "client_publish_enabled", "Publishing vouchers"); err != nil {
		return err
	}
	if k.body != nil && !absent(k.body["expiration_date"]) {
		if err := need(k.project.Settings.ClientSetVoucherExpirationDateEnabled, "client_set_voucher_expiration_date_enabled",
			"Setting the published voucher's expiration date"); err != nil {
			return err
		}
	}
	if name := k.c.QueryParam("campaign"); name != "" && k.body != nil && absent(k.body["campaign"]) && absent(k.body["voucher"]) {
		k.set("campaign", name)
	}
	return k.bindField("customer")
}

func listVouchers(k *call) error {
	if err := need(k.project.Settings.ClientListVouchersEnabled, "client_list_vouchers_enabled", "Listing vouchers"); err != nil {
		return err
	}
	if k.bound == "" {
		return nil
	}
	// The context's own (cached) query, which the twin reads.
	q := k.c.QueryParams()
	if ref := q.Get("customer"); ref != "" {
		return k.check(ref, "")
	}
	// The bound customer's vouchers: the filter takes the customer's id.
	id := k.bound
	if c, err := k.a.d.Customer(k.ctx, k.project.ID, k.bound); err == nil && names(c, k.bound, boundField(k.bound)) {
		id = c.ID
	} else if err != nil && !notFound(err) {
		return err
	}
	q.Set("customer", id)
	k.c.Request().URL.RawQuery = q.Encode()
	return nil
}

func createCustomer(k *call) error {
	if err := need(k.project.Settings.ClientCreateCustomerEnabled, "client_create_customer_enabled", "Creating customers"); err != nil {
		return err
	}
	if k.bound == "" || k.body == nil {
		return nil // nil: not an object, which the twin refuses
	}
	changed, err := k.bindObject(k.body)
	k.changed = k.changed || changed
	return err
}

// carries says whether an event's loyalty or referral object asks for
// anything: the client SDK sends both as {} by default.
func carries(raw json.RawMessage) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return len(bytes.TrimSpace(raw)) > 0
	}
	switch v := v.(type) {
	case nil:
		return false
	case string:
		return v != ""
	case map[string]any:
		for _, x := range v {
			if x != nil && x != "" {
				return true
			}
		}
		return false
	}
	return true
}

func absent(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == "" || s == "null" || s == `""`
}
