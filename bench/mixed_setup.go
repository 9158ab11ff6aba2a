package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/ids"
)

// The mixed day's data: mixedCustomers members of a loyalty program, each
// with a card; a public discount code without a redemption limit;
// mixedTiers PROMOTION campaigns of a tier each, every tier under a
// validation rule on the order's amount that the mix's order meets for
// the first half and never for the second.
const (
	mixedCustomers = 200
	mixedTiers     = 10
)

// mixedHookTypes are the events the project's webhook takes: the mix's
// redemptions (one per redeemable) and the customers it creates.
var mixedHookTypes = []string{"redemption.succeeded", "customer.created"}

// mixedFixture is the project the mix runs on and what it counts.
type mixedFixture struct {
	c         client
	run       string // this run's prefix of the source ids it makes
	code      string
	cards     []string // customer i's card; its source id is mixed-i
	applying  []string // the tiers the order meets
	items     []any
	qualTotal int // redeemables a qualification finds
	hookID    string
	hookBase  map[string]int // deliveries of the probe's customers

	next      atomic.Int64
	measuring atomic.Bool
	kinds     [mixedKinds]mixedKind
	wrong     atomic.Value
	redeemed  atomic.Int64 // redemptions of the answers (redemption.succeeded)
	created   atomic.Int64 // customers created (customer.created)
}

// mixedSetup makes the mix's data and its webhook, and waits for the
// webhook to deliver.
func mixedSetup(stack *devstack.Stack, c client, mgmt devstack.ManagementCredentials, rcv *hookReceiver) (*mixedFixture, error) {
	f := &mixedFixture{c: c, run: strings.ToLower(ids.Secret(4))}
	f.code = "MIXED-" + strings.ToUpper(f.run)
	f.items = make([]any, 4)
	for i := range f.items {
		f.items[i] = map[string]any{"product_id": fmt.Sprintf("prod_mixed_%d", i), "quantity": 1 + i%2, "price": 2500 + 500*i}
	}
	if err := f.loyalty(stack, mgmt); err != nil {
		return nil, err
	}
	if _, err := c.must("POST", "/v1/vouchers/"+f.code, map[string]any{"type": "DISCOUNT_VOUCHER",
		"discount": map[string]any{"type": "PERCENT", "percent_off": 10}}); err != nil {
		return nil, err
	}
	if err := f.promotions(); err != nil {
		return nil, err
	}
	hook, err := manage(c.hc, stack.RouterURL, mgmt, "/projects/"+c.p.ProjectID+"/webhooks",
		map[string]any{"target_url": rcv.url, "events": mixedHookTypes})
	if err != nil {
		return nil, err
	}
	f.hookID, _ = hook["id"].(string)
	// The region learns of the webhook with its next poll: a customer
	// created until one is delivered.
	for deadline := time.Now().Add(15 * time.Second); rcv.count() == 0; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("mixed: no webhook delivered in 15 s")
		}
		if _, err := c.must("POST", "/v1/customers", map[string]any{"source_id": "mixed-probe-" + f.run + "-" + ids.Secret(4)}); err != nil {
			return nil, err
		}
	}
	// Those created before the region knew of the webhook are never
	// delivered; those after, within a second or two.
	time.Sleep(3 * time.Second)
	rcv.mu.Lock()
	f.hookBase = maps.Clone(rcv.types)
	rcv.mu.Unlock()
	return f, f.probe()
}

// loyalty makes the program: points for each paid order and for each
// custom event mixed_visit, and a card for each customer.
func (f *mixedFixture) loyalty(stack *devstack.Stack, mgmt devstack.ManagementCredentials) error {
	c := f.c
	schema, err := manage(c.hc, stack.RouterURL, mgmt, "/projects/"+c.p.ProjectID+"/custom-event-schemas", map[string]any{"name": "mixed_visit",
		"schema": map[string]any{"properties": map[string]any{"store": map[string]any{"type": "string"}, "spent": map[string]any{"type": "number"}}}})
	if err != nil {
		return err
	}
	camp, err := c.must("POST", "/v1/loyalties", map[string]any{"name": "Mixed loyalty"})
	if err != nil {
		return err
	}
	campID := camp["id"].(string)
	if status, m, err := c.do("POST", "/v1/loyalties/"+campID+"/earning-rules", []map[string]any{
		{"event": "order.paid", "loyalty": map[string]any{"type": "FIXED", "points": 10}},
		{"event": "mixed_visit", "custom_event": map[string]any{"schema_id": schema["id"]}, "loyalty": map[string]any{"type": "FIXED", "points": 1}},
	}); status != 200 {
		return fmt.Errorf("mixed: earning rules: %d %v %v", status, m, err)
	}
	f.cards = make([]string, mixedCustomers)
	return parallel(4, mixedCustomers, func(i int) error {
		card, err := c.must("POST", "/v1/loyalties/"+campID+"/members", map[string]any{"customer": map[string]any{"source_id": fmt.Sprintf("mixed-%d", i)}})
		if err == nil {
			f.cards[i] = card["code"].(string)
		}
		return err
	})
}

// promotions makes the tiers, each under its rule.
func (f *mixedFixture) promotions() error {
	var mu sync.Mutex
	return parallel(4, mixedTiers, func(i int) error {
		over := 1000 // the order is 115.00
		if i >= mixedTiers/2 {
			over = 10_000_000
		}
		rule, err := f.c.must("POST", "/v1/validation-rules", map[string]any{"name": fmt.Sprintf("Mixed rule %d", i), "type": "advanced",
			"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{over}}}, "logic": "1"}})
		if err != nil {
			return err
		}
		tier := map[string]any{"name": fmt.Sprintf("Mixed tier %d", i), "validation_rules": []any{rule["id"]},
			"action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100 + i}}}
		camp, err := f.c.must("POST", "/v1/campaigns", map[string]any{"name": fmt.Sprintf("Mixed promotion %d", i),
			"campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": []any{tier}}})
		if err != nil {
			return err
		}
		if i < mixedTiers/2 {
			mu.Lock()
			f.applying = append(f.applying, camp["promotion"].(map[string]any)["tiers"].([]any)[0].(map[string]any)["id"].(string))
			mu.Unlock()
		}
		return nil
	})
}

// probe asks one qualification for what every one must find, and sends
// one request of each kind, outside the measure.
func (f *mixedFixture) probe() error {
	path, body := f.request(kindQualification, 0)
	status, m, err := f.c.do("POST", path, json.RawMessage(body))
	if err != nil || status != 200 {
		return fmt.Errorf("mixed: qualification: %d %v %v", status, m, err)
	}
	reds, _ := m["redeemables"].(map[string]any)
	total, _ := reds["total"].(float64)
	f.qualTotal = int(total)
	if f.qualTotal < len(f.applying) {
		return fmt.Errorf("mixed: a qualification found %d redeemables, fewer than the %d tiers that apply", f.qualTotal, len(f.applying))
	}
	for kind := range mixedKinds {
		path, body := f.request(kind, kind)
		res, err := f.c.send("POST", path, bytes.NewReader(body), "application/json")
		if err != nil {
			return err
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 {
			return fmt.Errorf("mixed: %s: %d %s %v", mixedNames[kind], res.StatusCode, b, err)
		}
		if err := f.check(kind, kind, b); err != nil {
			return fmt.Errorf("mixed: %s: %w", mixedNames[kind], err)
		}
	}
	return nil
}

// request is the mix's nth request, of kind: its path and body. Customer
// n%mixedCustomers makes it; a redeeming request stacks the code and an
// applying tier.
func (f *mixedFixture) request(kind, n int) (string, []byte) {
	cust := fmt.Sprintf("mixed-%d", n%mixedCustomers)
	stack := []any{map[string]any{"object": "voucher", "id": f.code},
		map[string]any{"object": "promotion_tier", "id": f.applying[n%len(f.applying)]}}
	var path string
	var body map[string]any
	switch kind {
	case kindValidation, kindRedemption:
		path = "/v1/validations"
		if kind == kindRedemption {
			path = "/v1/redemptions"
		}
		body = map[string]any{"customer": map[string]any{"source_id": cust}, "order": map[string]any{"items": f.items}, "redeemables": stack}
	case kindQualification:
		path = "/v1/qualifications"
		body = map[string]any{"customer": map[string]any{"source_id": cust}, "order": map[string]any{"items": f.items},
			"options": map[string]any{"limit": 50}}
	case kindCustomer:
		path = "/v1/customers"
		body = map[string]any{"source_id": fmt.Sprintf("mixed-new-%s-%d", f.run, n), "name": "Mixed Day",
			"email": fmt.Sprintf("mixed-%d@example.com", n), "metadata": map[string]any{"bench": "mixed"}}
	case kindOrder:
		path = "/v1/orders"
		body = map[string]any{"source_id": fmt.Sprintf("mixed-order-%s-%d", f.run, n), "status": "PAID", "items": f.items,
			"customer": map[string]any{"source_id": cust}}
	case kindPoints:
		path = "/v1/loyalties/members/" + f.cards[n%mixedCustomers] + "/balance"
		body = map[string]any{"points": 1}
	case kindEvent:
		path = "/v1/events"
		body = map[string]any{"event": "mixed_visit", "customer": map[string]any{"source_id": cust},
			"loyalty": map[string]any{"code": f.cards[n%mixedCustomers]}, "metadata": map[string]any{"store": "Oslo", "spent": 12.5}}
	}
	b, _ := json.Marshal(body)
	return path, b
}

// check is an answer's content as kind's must be, for the nth request;
// it counts the webhooks the answer makes.
func (f *mixedFixture) check(kind, n int, b []byte) error {
	var a struct {
		Object      string          `json:"object"`
		SourceID    string          `json:"source_id"`
		Status      string          `json:"status"`
		Type        string          `json:"type"`
		Points      int64           `json:"points"`
		Valid       bool            `json:"valid"`
		Redeemables json.RawMessage `json:"redeemables"`
		Redemptions json.RawMessage `json:"redemptions"` // an order's is an object
		Parent      struct {
			Result string `json:"result"`
		} `json:"parent_redemption"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	bad := func(what string) error { return fmt.Errorf("%s: %.400s", what, b) }
	switch kind {
	case kindValidation:
		var rs []struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(a.Redeemables, &rs)
		if !a.Valid || len(rs) != 2 || rs[0].Status != "APPLICABLE" || rs[1].Status != "APPLICABLE" {
			return bad("want valid, both redeemables APPLICABLE")
		}
	case kindQualification:
		var q struct {
			Total int `json:"total"`
			Data  []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(a.Redeemables, &q)
		found := 0
		for _, d := range q.Data {
			if slices.Contains(f.applying, d.ID) {
				found++
			}
		}
		if q.Total != f.qualTotal || len(q.Data) != min(q.Total, 50) || found != len(f.applying) {
			return bad(fmt.Sprintf("want %d redeemables with the %d tiers that apply", f.qualTotal, len(f.applying)))
		}
	case kindRedemption:
		var rs []struct {
			Result string `json:"result"`
		}
		_ = json.Unmarshal(a.Redemptions, &rs)
		if len(rs) != 2 || rs[0].Result != "SUCCESS" || rs[1].Result != "SUCCESS" || a.Parent.Result != "SUCCESS" {
			return bad("want two redemptions, SUCCESS")
		}
		f.redeemed.Add(int64(len(rs)))
	case kindCustomer:
		if a.Object != "customer" || a.SourceID != fmt.Sprintf("mixed-new-%s-%d", f.run, n) {
			return bad("want the customer")
		}
		f.created.Add(1)
	case kindOrder:
		if a.Object != "order" || a.Status != "PAID" || a.SourceID != fmt.Sprintf("mixed-order-%s-%d", f.run, n) {
			return bad("want the order, PAID")
		}
	case kindPoints:
		if a.Object != "balance" || a.Points != 1 || a.Type != "loyalty_card" {
			return bad("want a balance of a card, 1 point added")
		}
	case kindEvent:
		if a.Object != "event" || a.Type != "mixed_visit" {
			return bad("want the event")
		}
	}
	return nil
}

// hooksWanted are the deliveries the answers so far make, by type.
func (f *mixedFixture) hooksWanted() map[string]int64 {
	return map[string]int64{"redemption.succeeded": int64(f.hookBase["redemption.succeeded"]) + f.redeemed.Load(),
		"customer.created": int64(f.hookBase["customer.created"]) + f.created.Load()}
}

// dropWebhook deletes the mix's webhook: the receiver closes with the
// section.
func (f *mixedFixture) dropWebhook(stack *devstack.Stack, mgmt devstack.ManagementCredentials) {
	req, _ := http.NewRequest("DELETE", stack.RouterURL+"/management/v1/projects/"+f.c.p.ProjectID+"/webhooks/"+f.hookID, nil)
	req.Host = "api.localhost"
	req.Header.Set("X-Management-Id", mgmt.ID)
	req.Header.Set("X-Management-Token", mgmt.Token)
	if res, err := f.c.hc.Do(req); err == nil {
		res.Body.Close()
	}
}
