// Package noisy is issue 32's noisy neighbour: one project's conflicting
// writes on one voucher, one gift card and one loyalty card, as fast as
// they are answered. The end-to-end test (regional/engine) and the bench
// (-only noisy) both run it, so that they measure one scenario.
package noisy

import (
	"fmt"
	"sync"
	"time"
)

// Do sends a request as the noisy project and answers its status and
// body.
type Do func(method, path string, body any) (int, map[string]any, error)

// Clients is how many clients write at once.
const Clients = 50

// Setup makes what the writes aim at: the discount voucher HOT, the gift
// card HOT-GIFT and a card of a new loyalty program, whose code it answers.
func Setup(do Do) (string, error) {
	must := func(path string, body any) (map[string]any, error) {
		status, m, err := do("POST", path, body)
		if err == nil && status != 200 {
			err = fmt.Errorf("noisy: POST %s: %d %v", path, status, m)
		}
		return m, err
	}
	for code, body := range map[string]any{
		"HOT":      map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 10}},
		"HOT-GIFT": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 10_000_000_000}},
	} {
		if _, err := must("/v1/vouchers/"+code, body); err != nil {
			return "", err
		}
	}
	camp, err := must("/v1/loyalties", map[string]any{"name": "Hot cards"})
	if err != nil {
		return "", err
	}
	m, err := must("/v1/loyalties/"+camp["id"].(string)+"/members", map[string]any{"customer": map[string]any{"source_id": "hot"}})
	if err != nil {
		return "", err
	}
	return m["code"].(string), nil
}

// Run runs Clients clients until stop is closed, a third on each kind of
// write: redemptions of HOT, points added to card, and stacked redemptions
// of HOT and HOT-GIFT whose two children are then rolled back at once.
// While wait says so (nil: never) a client sends nothing. count is told
// the status of every answer (0 for a request that got none).
func Run(do Do, card string, stop <-chan struct{}, wait func() bool, count func(status int)) {
	order := map[string]any{"items": []any{map[string]any{"product_id": "p", "price": 1000, "quantity": 1}}}
	voucher := func(code string) map[string]any { return map[string]any{"object": "voucher", "id": code} }
	var wg sync.WaitGroup
	for i := range Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if wait != nil && wait() {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				switch i % 3 {
				case 0:
					s, _, _ := do("POST", "/v1/redemptions", map[string]any{"redeemables": []any{voucher("HOT")}, "order": order})
					count(s)
				case 1:
					s, _, _ := do("POST", "/v1/loyalties/members/"+card+"/balance", map[string]any{"points": 1})
					count(s)
				default:
					s, m, _ := do("POST", "/v1/redemptions", map[string]any{"redeemables": []any{voucher("HOT"), voucher("HOT-GIFT")}, "order": order})
					count(s)
					if s != 200 {
						continue
					}
					var kids sync.WaitGroup
					for _, k := range m["redemptions"].([]any) {
						kids.Add(1)
						go func() {
							defer kids.Done()
							s, _, _ := do("POST", "/v1/redemptions/"+k.(map[string]any)["id"].(string)+"/rollback", map[string]any{})
							count(s)
						}()
					}
					kids.Wait()
				}
			}
		}()
	}
	wg.Wait()
}
