package publications

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/vouchers"
)

type handler struct{ svc *Service }

// Register mounts the publication endpoints on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.POST("/publications", h.create)
	g.GET("/publications/create", h.createByGet)
	g.GET("/publications", h.list)
}

func joinOnce(q url.Values) (bool, error) {
	s := q.Get("join_once")
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, apierr.InvalidQuery("join_once", "must be true or false")
	}
	return b, nil
}

func (h handler) create(c echo.Context) error {
	jo, err := joinOnce(c.QueryParams())
	if err != nil {
		return err
	}
	var r Request
	if err := httpx.Bind(c, &r); err != nil {
		return err
	}
	r.JoinOnce = jo
	return httpx.Reply(c)(h.svc.Create(c.Request().Context(), httpx.ProjectID(c), r))
}

// createByGet serves the legacy form: the request in the query string,
// objects in brackets (customer[source_id]=…, campaign[name]=…,
// metadata[key]=…).
func (h handler) createByGet(c echo.Context) error {
	q := c.QueryParams()
	jo, err := joinOnce(q)
	if err != nil {
		return err
	}
	r, err := RequestFromQuery(q)
	if err != nil {
		return err
	}
	r.JoinOnce = jo
	return httpx.Reply(c)(h.svc.Create(c.Request().Context(), httpx.ProjectID(c), r))
}

// RequestFromQuery reads a publication request from a query string in the
// deepObject style; values are strings, but campaign[count] a number.
func RequestFromQuery(q url.Values) (Request, error) {
	top := map[string]any{}
	for key, vals := range q {
		if len(vals) == 0 || key == "join_once" {
			continue
		}
		path := strings.Split(strings.ReplaceAll(key, "]", ""), "[")
		var val any = vals[0]
		if len(path) == 2 && path[0] == "campaign" && path[1] == "count" {
			n, err := strconv.Atoi(vals[0])
			if err != nil {
				return Request{}, apierr.InvalidQuery("campaign[count]", "must be a whole number")
			}
			val = n
		}
		m := top
		for i, k := range path {
			if k == "" {
				return Request{}, apierr.InvalidQuery(key, "is not a parameter name of the form a[b][c]")
			}
			if i == len(path)-1 {
				if _, isObj := m[k].(map[string]any); isObj {
					return Request{}, apierr.InvalidQuery(key, "is given both as a value and as an object")
				}
				m[k] = val
				break
			}
			next, ok := m[k].(map[string]any)
			if !ok {
				if _, taken := m[k]; taken {
					return Request{}, apierr.InvalidQuery(key, "is given both as a value and as an object")
				}
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
	}
	b, err := json.Marshal(top)
	if err != nil {
		return Request{}, err
	}
	var r Request
	if err := json.Unmarshal(b, &r); err != nil {
		return Request{}, apierr.InvalidQuery("voucher", "voucher, source_id and channel are single strings")
	}
	return r, nil
}

var listSpec = listq.Spec{Orders: []string{"-created_at", "created_at", "id", "-id", "voucher_code", "-voucher_code",
	"tracking_id", "-tracking_id", "customer_id", "-customer_id", "channel", "-channel"}, Pages: true}

// ParseList reads GET /v1/publications' parameters.
func ParseList(q url.Values) (ListQuery, error) {
	var lq ListQuery
	var err error
	if lq.Query, err = listq.Parse(q, listSpec); err != nil {
		return lq, err
	}
	lq.Campaign, lq.Customer, lq.Voucher, lq.SourceID = q.Get("campaign"), q.Get("customer"), q.Get("voucher"), q.Get("source_id")
	if lq.Result = q.Get("result"); lq.Result != "" && lq.Result != Success && lq.Result != Failure {
		return lq, apierr.InvalidQuery("result", "must be SUCCESS or FAILURE")
	}
	if lq.VoucherType = q.Get("voucher_type"); lq.VoucherType != "" && lq.VoucherType != "discount" && lq.VoucherType != "loyalty" {
		return lq, apierr.InvalidQuery("voucher_type", "must be discount or loyalty")
	}
	if s := q.Get("is_referral_code"); s != "" {
		if lq.ReferralOnly, err = strconv.ParseBool(s); err != nil {
			return lq, apierr.InvalidQuery("is_referral_code", "must be true or false")
		}
	}
	lq.Filter, err = filters.Parse(q, listFields)
	return lq, err
}

func (h handler) list(c echo.Context) error {
	lq, err := ParseList(c.QueryParams())
	if err != nil {
		return err
	}
	out, total, more, next, err := h.svc.List(c.Request().Context(), httpx.ProjectID(c), lq)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[View]{DataRef: "publications", Data: out, Total: &total, More: more, Next: next})
}

// List returns a page of the project's publications with their customers
// and (simplified) vouchers, read in one more round trip.
func (s *Service) List(ctx context.Context, projectID string, lq ListQuery) ([]View, int, bool, string, error) {
	ps, total, err := list(ctx, s.pool, projectID, lq, s.now())
	if err != nil {
		return nil, 0, false, "", err
	}
	ps, more, next := listq.Page(ps, lq.Limit, func(p Publication) string { return p.ID })
	custs := map[string]customers.Customer{}
	vs := map[string]vouchers.Voucher{}
	b := &pgx.Batch{}
	cards := map[string]loyalty.Card{}
	var vids, cids []string
	for _, p := range ps {
		if _, queued := custs[p.CustomerID]; !queued {
			custs[p.CustomerID] = customers.Customer{}
			customers.QueueGetByIDOf(b, projectID, "$2", []any{p.CustomerID}, func(c customers.Customer) { custs[c.ID] = c })
		}
		switch {
		case p.VoucherID != nil && p.VoucherType != nil && *p.VoucherType == "LOYALTY_CARD":
			cids = append(cids, *p.VoucherID)
		case p.VoucherID != nil:
			vids = append(vids, *p.VoucherID)
		}
	}
	if len(vids) > 0 {
		vouchers.QueueByIDs(b, projectID, vids, func(v vouchers.Voucher) { vs[v.ID] = v })
	}
	if len(cids) > 0 {
		loyalty.QueueCardsByID(b, projectID, cids, func(c loyalty.Card) { cards[c.ID] = c })
	}
	if b.Len() > 0 {
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			return nil, 0, false, "", err
		}
	}
	var manyIDs []string
	for _, p := range ps {
		if p.Result == Success && p.VoucherID == nil {
			manyIDs = append(manyIDs, p.ID)
		}
	}
	many, err := vouchersOf(ctx, s.pool, projectID, manyIDs)
	if err != nil {
		return nil, 0, false, "", err
	}
	out := make([]View, len(ps))
	for i, p := range ps {
		var cust *customers.Customer
		if c := custs[p.CustomerID]; c.ID != "" {
			cust = &c
		}
		out[i] = p.view(cust)
		if gs, ok := many[p.ID]; ok {
			out[i].several(gs)
		}
		if p.VoucherID != nil {
			if c, ok := cards[*p.VoucherID]; ok {
				f := c.Figures()
				out[i].Voucher = ListVoucher{Code: c.Code, Object: "voucher", Campaign: p.CampaignName, LoyaltyCard: &f}
			} else if v, ok := vs[*p.VoucherID]; ok {
				out[i].Voucher = listVoucher(v, p.IsReferralCode)
			} else if p.VoucherCode != nil { // deleted for good since
				out[i].Voucher = ListVoucher{Code: *p.VoucherCode, Object: "voucher", Campaign: p.CampaignName, IsReferralCode: p.IsReferralCode}
			}
		}
	}
	return out, total, more, next, nil
}
