package clientapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/ids"
)

// The deprecated single-code forms the official client SDK still calls:
// GET /client/v1/validate?code=… (every input in a deep-object query:
// item[0][product_id]=…, customer[source_id]=…) and POST
// /client/v1/redeem?code=…. Each becomes a stacked request of one voucher,
// served by the engine through its client twin (so toggles, the bound
// customer and the engine's rules are the same), and its answer is put in
// the legacy shape: the validation's verdict with code, discount and
// order at the top level, or the voucher's redemption.
//
// A customer is named by customer[…] or, as the SDK does, by tracking_id
// (the customer's source_id); both naming different customers is 400
// ambiguous_tracking_id. A validation naming neither is given a fresh
// tracking_id, which the answer returns for the SDK to keep; a redemption
// naming neither is 400 missing_customer.
func (a *api) registerLegacy(g *echo.Group) {
	g.GET("/validate", a.serveAs(http.MethodPost, "/v1/validations", legacyValidate, validateAnswer))
	g.POST("/redeem", a.serveAs(http.MethodPost, "/v1/redemptions", legacyRedeem, redeemAnswer))
	g.GET("/promotions/validation", a.serveAs(http.MethodPost, "/v1/qualifications", legacyPromotions, promotionsAnswer))
}

// legacyPromotions builds, from the query the client SDK's validate sends
// when it has no code, the qualification of the project's promotion tiers
// for the order and customer: the deprecated promotions validation.
func legacyPromotions(k *call) error {
	q, err := deepObject(k.c.QueryParams())
	if err != nil {
		return err
	}
	order, err := legacyOrder(q)
	if err != nil {
		return err
	}
	body := map[string]any{"scenario": "ALL", "options": map[string]any{
		"limit":   promotionsLimit,
		"expand":  []string{"redeemable"},
		"filters": map[string]any{"resource_type": map[string]any{"conditions": map[string]any{"$in": []string{"promotion_tier"}}}},
	}}
	if order != nil {
		body["order"] = order
	}
	if m, ok := q["metadata"]; ok {
		body["metadata"] = m
	}
	tracking, _ := q["tracking_id"].(string)
	if err := legacyCustomer(k, body, q["customer"], tracking, true); err != nil {
		return err
	}
	return k.replace(body)
}

// promotionsLimit is the most promotion tiers one promotions validation
// answers: the qualification's page.
const promotionsLimit = 50

// promotionsAnswer is the legacy promotions validation: valid when some
// promotion tier applies, and each applicable tier with its discount, the
// amount it takes off and the order, in hierarchy order.
func promotionsAnswer(k *call, status int, raw []byte) (any, error) {
	var v struct {
		Redeemables struct {
			Data []map[string]any `json:"data"`
		} `json:"redeemables"`
		TrackingID any `json:"tracking_id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("clientapi: the qualification twin answered %d %.200s", status, raw)
	}
	promotions := make([]any, 0, len(v.Redeemables.Data))
	for _, r := range v.Redeemables.Data {
		if r["object"] != "promotion_tier" {
			continue
		}
		p := map[string]any{"id": r["id"], "object": "promotion_tier", "name": r["name"], "valid": true,
			"tracking_id": v.TrackingID, "metadata": r["metadata"], "hierarchy": r["hierarchy"],
			"applicable_to": r["applicable_to"], "inapplicable_to": r["inapplicable_to"]}
		if b, ok := r["banner"]; ok {
			p["banner"] = b
		}
		if id, ok := r["campaign_id"]; ok {
			p["campaign"] = map[string]any{"id": id, "name": r["campaign_name"], "object": "campaign"}
		}
		if res, ok := r["result"].(map[string]any); ok {
			p["discount"] = res["discount"]
		}
		if o, ok := r["order"].(map[string]any); ok {
			p["order"] = o
			p["discount_amount"] = o["total_applied_discount_amount"]
			p["applied_discount_amount"] = o["applied_discount_amount"]
		}
		promotions = append(promotions, p)
	}
	sort.SliceStable(promotions, func(i, j int) bool {
		hi, _ := promotions[i].(map[string]any)["hierarchy"].(float64)
		hj, _ := promotions[j].(map[string]any)["hierarchy"].(float64)
		return hi < hj
	})
	return map[string]any{"valid": len(promotions) > 0, "tracking_id": v.TrackingID, "promotions": promotions}, nil
}

// legacyValidate builds the stacked validation from the query.
func legacyValidate(k *call) error {
	q, err := deepObject(k.c.QueryParams())
	if err != nil {
		return err
	}
	code, err := legacyCode(q["code"])
	if err != nil {
		return err
	}
	order, err := legacyOrder(q)
	if err != nil {
		return err
	}
	body := map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": code}},
		"options": map[string]any{"expand": []string{"redeemable"}}}
	if order != nil {
		body["order"] = order
	}
	if m, ok := q["metadata"]; ok {
		body["metadata"] = m
	}
	if s := legacySession(q); s != nil {
		body["session"] = s
	}
	tracking, _ := q["tracking_id"].(string)
	if err := legacyCustomer(k, body, q["customer"], tracking, true); err != nil {
		return err
	}
	return k.replace(body)
}

// legacyRedeem builds the stacked redemption from the query's code and the
// body (customer, order, metadata, gift, reward, session, tracking_id).
func legacyRedeem(k *call) error {
	if err := need(k.project.Settings.ClientRedeemEnabled, "client_redeem_enabled", "Redeeming"); err != nil {
		return err
	}
	if k.body == nil {
		return apierr.InvalidPayload("The body must be a JSON object.")
	}
	code, err := legacyCode(k.c.QueryParam("code"))
	if err != nil {
		return err
	}
	var in struct {
		Customer   any             `json:"customer"`
		Order      any             `json:"order"`
		Metadata   any             `json:"metadata"`
		Gift       any             `json:"gift"`
		Reward     any             `json:"reward"`
		Session    any             `json:"session"`
		TrackingID json.RawMessage `json:"tracking_id"`
	}
	raw, _ := json.Marshal(k.body)
	_ = json.Unmarshal(raw, &in) // each field is a raw value here; the twin checks their types
	redeemable := map[string]any{"object": "voucher", "id": code}
	if in.Gift != nil {
		redeemable["gift"] = in.Gift
	}
	if in.Reward != nil {
		redeemable["reward"] = in.Reward
	}
	body := map[string]any{"redeemables": []any{redeemable}}
	for field, v := range map[string]any{"order": in.Order, "metadata": in.Metadata, "session": in.Session} {
		if v != nil {
			body[field] = v
		}
	}
	tracking := k.c.QueryParam("tracking_id")
	if !absent(in.TrackingID) {
		if json.Unmarshal(in.TrackingID, &tracking) != nil {
			return apierr.InvalidPayload("tracking_id must be a string.")
		}
	}
	if err := legacyCustomer(k, body, in.Customer, tracking, false); err != nil {
		return err
	}
	return k.replace(body)
}

// legacyCode is the voucher code the request names.
func legacyCode(v any) (string, error) {
	code, ok := v.(string)
	if !ok || strings.TrimSpace(code) == "" {
		return "", apierr.New(http.StatusBadRequest, "missing_code", "Bad Request",
			"The voucher's code is required: ?code=… (the deprecated single-code forms validate or redeem one voucher).")
	}
	return code, nil
}

// legacyCustomer sets the request's customer from customer and tracking_id
// and binds it to a bound token's customer.
func legacyCustomer(k *call, body map[string]any, customer any, tracking string, generate bool) error {
	var obj map[string]any
	switch c := customer.(type) {
	case nil:
	case map[string]any:
		obj = c
	default:
		return apierr.InvalidPayload("customer must be an object (customer[source_id]=… in the query).")
	}
	named := func(field string) string {
		s, _ := obj[field].(string)
		return s
	}
	switch {
	case obj != nil && named("id") == "" && named("source_id") == "" && tracking == "" && k.bound == "":
		return apierr.New(http.StatusBadRequest, "missing_customer", "Bad Request",
			"The customer needs an id or a source_id, or the request a tracking_id.")
	case obj != nil && tracking != "" && named("source_id") != "" && named("source_id") != tracking:
		return apierr.New(http.StatusBadRequest, "ambiguous_tracking_id", "Bad Request",
			fmt.Sprintf("Two different identifiers name the customer: tracking_id %q and customer.source_id %q.", tracking, named("source_id")))
	case obj == nil && tracking == "" && k.bound == "":
		if !generate {
			return apierr.New(http.StatusBadRequest, "missing_customer", "Bad Request",
				"A redemption names its customer: customer.source_id (or id) in the body, or tracking_id.")
		}
		tracking = ids.New("track_")
	}
	if tracking != "" {
		body["tracking_id"] = tracking
		if obj == nil {
			obj = map[string]any{}
		}
		if named("id") == "" && named("source_id") == "" {
			obj["source_id"] = tracking
		}
	}
	if obj != nil {
		body["customer"] = obj
	}
	return nil
}

// legacyOrder is the order from amount, item[…] and order[…].
func legacyOrder(q map[string]any) (map[string]any, error) {
	var order map[string]any
	switch o := q["order"].(type) {
	case nil:
	case map[string]any:
		order = o
	default:
		return nil, apierr.New(http.StatusBadRequest, "invalid_query_params", "Bad Request", "order must be an object: order[amount]=….")
	}
	set := func(field string, v any) {
		if v == nil {
			return
		}
		if order == nil {
			order = map[string]any{}
		}
		if _, ok := order[field]; !ok {
			order[field] = v
		}
	}
	set("amount", q["amount"])
	set("items", q["item"])
	if order == nil {
		return nil, nil
	}
	numbers(order, 0)
	return order, nil
}

// numberFields are the order's and its items' numeric properties, which a
// query carries as text.
var numberFields = map[string]bool{"amount": true, "quantity": true, "price": true, "discount_amount": true,
	"initial_amount": true, "initial_quantity": true, "total_amount": true, "subtotal_amount": true}

// numbers makes the numeric properties of an order (and its items) numbers
// where their text is one; other text stays for the twin to refuse.
func numbers(v any, depth int) {
	if depth > 4 {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		for field, x := range v {
			if s, ok := x.(string); ok && numberFields[field] {
				if n, err := strconv.ParseInt(s, 10, 64); err == nil {
					v[field] = n
				} else if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
					v[field] = f
				}
				continue
			}
			numbers(x, depth+1)
		}
	case []any:
		for _, x := range v {
			numbers(x, depth+1)
		}
	}
}

// legacySession is the LOCK session of session_type, session_key,
// session_ttl and session_ttl_unit.
func legacySession(q map[string]any) map[string]any {
	s := map[string]any{}
	for _, f := range []string{"type", "key", "ttl_unit"} {
		if v, ok := q["session_"+f]; ok {
			s[f] = v
		}
	}
	if v, ok := q["session_ttl"]; ok {
		if t, isText := v.(string); isText {
			if n, err := strconv.ParseFloat(t, 64); err == nil && !math.IsNaN(n) && !math.IsInf(n, 0) {
				v = n
			}
		}
		s["ttl"] = v
	}
	if len(s) == 0 {
		return nil
	}
	return s
}

// replace makes body the request the twin serves.
func (k *call) replace(body map[string]any) error {
	k.body = map[string]json.RawMessage{}
	for f, v := range body {
		k.set(f, v)
	}
	return k.bindField("customer")
}

// validateAnswer is the legacy validation: the one redeemable's verdict,
// with its discount, gift or loyalty result and order at the top level.
func validateAnswer(k *call, status int, raw []byte) (any, error) {
	var v struct {
		Valid       bool             `json:"valid"`
		Redeemables []map[string]any `json:"redeemables"`
		Order       any              `json:"order"`
		Session     any              `json:"session"`
		TrackingID  any              `json:"tracking_id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || len(v.Redeemables) != 1 {
		return nil, fmt.Errorf("clientapi: the validation twin answered %d %.200s", status, raw)
	}
	r := v.Redeemables[0]
	out := map[string]any{"code": r["id"], "valid": v.Valid && r["status"] == "APPLICABLE", "tracking_id": v.TrackingID,
		"metadata": r["metadata"]}
	if id, ok := r["campaign_id"]; ok {
		out["campaign_id"], out["campaign"] = id, r["campaign_name"]
	}
	res, _ := r["result"].(map[string]any)
	if out["valid"] == true {
		for from, to := range map[string]string{"discount": "discount", "gift": "gift", "loyalty_card": "loyalty"} {
			if x, ok := res[from]; ok {
				out[to] = x
			}
		}
		out["order"], out["applicable_to"], out["inapplicable_to"] = r["order"], r["applicable_to"], r["inapplicable_to"]
		if out["order"] == nil {
			out["order"] = v.Order
		}
		if v.Session != nil {
			out["session"] = v.Session
		}
		return out, nil
	}
	if e, ok := res["error"].(map[string]any); ok {
		out["error"] = e
		out["reason"] = e["message"]
		if d, ok := e["details"].(string); ok && d != "" {
			out["reason"] = d
		}
	} else if d, ok := res["details"].(map[string]any); ok {
		out["reason"], out["error"] = d["message"], d
	}
	return out, nil
}

// redeemAnswer is the legacy redemption: the voucher's own redemption.
func redeemAnswer(k *call, status int, raw []byte) (any, error) {
	var v struct {
		Redemptions []map[string]any `json:"redemptions"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("clientapi: the redemption twin answered %d %.200s", status, raw)
	}
	for _, r := range v.Redemptions {
		if r["related_object_type"] == "voucher" || r["voucher"] != nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("clientapi: the redemption twin answered no voucher redemption: %.200s", raw)
}

// deepObject reads a query in the deep-object style the client SDK writes
// (a[b][0][c]=v) into nested objects, an object whose keys are all indexes
// becoming an array in index order.
func deepObject(q url.Values) (map[string]any, error) {
	root := map[string]any{}
	bad := func(key, why string) error {
		return apierr.New(http.StatusBadRequest, "invalid_query_params", "Bad Request",
			fmt.Sprintf("Query parameter %q: %s.", key, why))
	}
	for key, vals := range q {
		path, ok := splitKey(key)
		if !ok {
			return nil, bad(key, "brackets must pair up, as in customer[metadata][tier]")
		}
		if len(path) > 6 {
			return nil, bad(key, "nested more than 6 levels")
		}
		node := root
		for i, seg := range path {
			if i == len(path)-1 && seg == "" { // a[]=x&a[]=y: the next indexes
				for _, v := range vals {
					node[strconv.Itoa(len(node))] = v
				}
				break
			}
			if seg == "" {
				return nil, bad(key, "[] is only for the last level")
			}
			if i == len(path)-1 {
				if _, taken := node[seg]; taken {
					return nil, bad(key, "both a value and an object")
				}
				node[seg] = vals[len(vals)-1]
				break
			}
			next, ok := node[seg].(map[string]any)
			if !ok {
				if _, taken := node[seg]; taken {
					return nil, bad(key, "both a value and an object")
				}
				next = map[string]any{}
				node[seg] = next
			}
			node = next
		}
	}
	out, err := arrays(root, "")
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

// splitKey splits a[b][c] into a, b, c.
func splitKey(key string) ([]string, bool) {
	i := strings.IndexByte(key, '[')
	if i < 0 {
		return []string{key}, !strings.Contains(key, "]")
	}
	path := []string{key[:i]}
	rest := key[i:]
	for rest != "" {
		if rest[0] != '[' {
			return nil, false
		}
		j := strings.IndexByte(rest, ']')
		if j < 0 || strings.ContainsRune(rest[1:j], '[') {
			return nil, false
		}
		path, rest = append(path, rest[1:j]), rest[j+1:]
	}
	return path, path[0] != ""
}

// arrays turns objects keyed by indexes (0, 1, …) into arrays.
func arrays(v any, at string) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return v, nil
	}
	indexes := len(m) > 0
	for k, x := range m {
		name := k
		if at != "" {
			name = at + "[" + k + "]"
		}
		y, err := arrays(x, name)
		if err != nil {
			return nil, err
		}
		m[k] = y
		if n, err := strconv.Atoi(k); err != nil || n < 0 || strconv.Itoa(n) != k {
			indexes = false
		}
	}
	if !indexes || at == "" {
		return m, nil
	}
	if len(m) > 1000 {
		return nil, apierr.New(http.StatusBadRequest, "invalid_query_params", "Bad Request",
			fmt.Sprintf("Query parameter %s: at most 1000 elements.", at))
	}
	keys := make([]int, 0, len(m))
	for k := range m {
		n, _ := strconv.Atoi(k)
		keys = append(keys, n)
	}
	sort.Ints(keys)
	out := make([]any, len(keys))
	for i, n := range keys {
		out[i] = m[strconv.Itoa(n)]
	}
	return out, nil
}
