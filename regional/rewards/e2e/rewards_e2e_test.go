package e2e_test

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func product(id string) map[string]any {
	return map[string]any{"product": map[string]any{"id": id}}
}

func coin(exchange, points float64) map[string]any {
	return map[string]any{"coin": map[string]any{"exchange_ratio": exchange, "points_ratio": points}}
}

// The redemption of rewards, their stock's use and their assignments are
// tested with redemptions (regional/redemptions), which owns them.
func TestRewardsThroughTheRouter(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("reward.created", "reward.updated", "reward.deleted")
	as := func(t *testing.T) stacktest.API { return stacktest.API{T: t, E: a.E, P: a.P} }

	t.Run("a refused create says what is wrong and stores nothing", func(t *testing.T) {
		for _, c := range []struct {
			name string
			body map[string]any
			key  string
		}{
			{"no name", map[string]any{"parameters": product("prod_1")}, "invalid_payload"},
			{"no parameters", map[string]any{"name": "X"}, "invalid_payload"},
			{"two kinds at once", map[string]any{"name": "X", "parameters": map[string]any{"product": map[string]any{"id": "p"},
				"coin": map[string]any{"exchange_ratio": 1, "points_ratio": 10}}}, "invalid_payload"},
			{"a campaign reward naming no campaign", map[string]any{"name": "X", "parameters": map[string]any{"campaign": map[string]any{}}},
				"invalid_payload"},
			{"a zero exchange ratio", map[string]any{"name": "X", "parameters": coin(0, 10)}, "invalid_payload"},
			{"a negative stock", map[string]any{"name": "X", "stock": -1, "parameters": product("p")}, "invalid_payload"},
			{"a COIN reward with stock", map[string]any{"name": "X", "stock": 5, "parameters": coin(1, 10)}, "invalid_payload"},
		} {
			t.Run(c.name, func(t *testing.T) { as(t).Fails("POST", "/v1/rewards", c.body, 400, c.key) })
		}
		if l := as(t).OK("GET", "/v1/rewards", nil); l["total"] != 0.0 {
			t.Fatalf("refused rewards were stored: %v", l)
		}
	})

	var mug, pay map[string]any
	t.Run("each kind reads back as created", func(t *testing.T) {
		a := as(t)
		mug = a.OK("POST", "/v1/rewards", map[string]any{"name": "Mug", "stock": 2,
			"attributes": map[string]any{"description": "A mug", "image_url": "https://img.example.com/mug.png"},
			"parameters": map[string]any{"product": map[string]any{"id": "prod_mug", "sku_id": "sku_blue"}}, "metadata": map[string]any{"shelf": "A"}})
		if !strings.HasPrefix(mug["id"].(string), "rew_") || mug["type"] != "MATERIAL" || mug["object"] != "reward" || mug["stock"] != 2.0 ||
			mug["redeemed"] != 0.0 || mug["attributes"].(map[string]any)["description"] != "A mug" || mug["updated_at"] != nil ||
			mug["parameters"].(map[string]any)["product"].(map[string]any)["sku_id"] != "sku_blue" ||
			mug["metadata"].(map[string]any)["shelf"] != "A" {
			t.Fatalf("material reward: %v", mug)
		}
		pay = a.OK("POST", "/v1/rewards", map[string]any{"name": "Pay with points", "stock": nil, "parameters": coin(1, 10)})
		if pay["type"] != "COIN" || pay["stock"] != nil || pay["parameters"].(map[string]any)["coin"].(map[string]any)["points_ratio"] != 10.0 ||
			pay["parameters"].(map[string]any)["product"] != nil {
			t.Fatalf("coin reward: %v", pay)
		}
		if g := a.OK("GET", "/v1/rewards/"+mug["id"].(string), nil); g["name"] != "Mug" || g["stock"] != 2.0 {
			t.Fatalf("get: %v", g)
		}
		if o := hooks.Wait(t, "reward.created", 2); o["reward"] == nil {
			t.Fatalf("reward.created: %v", o)
		}
	})

	t.Run("an update changes what it names and keeps the kind", func(t *testing.T) {
		a := as(t)
		mugID, payID := mug["id"].(string), pay["id"].(string)
		for _, c := range []struct {
			name  string
			id    string
			body  map[string]any
			check func(u map[string]any) bool
		}{
			{"a name alone", mugID, map[string]any{"name": "Blue mug"}, func(u map[string]any) bool {
				return u["name"] == "Blue mug" && u["stock"] == 2.0 && u["updated_at"] != nil && u["metadata"].(map[string]any)["shelf"] == "A"
			}},
			{"one attribute keeps the other", mugID, map[string]any{"attributes": map[string]any{"description": "Blue"}}, func(u map[string]any) bool {
				at := u["attributes"].(map[string]any)
				return at["description"] == "Blue" && at["image_url"] == "https://img.example.com/mug.png"
			}},
			{"metadata is replaced", mugID, map[string]any{"metadata": map[string]any{"bin": 7}}, func(u map[string]any) bool {
				m := u["metadata"].(map[string]any)
				return m["bin"] == 7.0 && m["shelf"] == nil
			}},
			{"stock to unlimited", mugID, map[string]any{"stock": nil}, func(u map[string]any) bool { return u["stock"] == nil }},
			{"stock back to a count", mugID, map[string]any{"stock": 3}, func(u map[string]any) bool { return u["stock"] == 3.0 }},
			{"another product", mugID, map[string]any{"parameters": product("prod_cup")}, func(u map[string]any) bool {
				return u["type"] == "MATERIAL" && u["parameters"].(map[string]any)["product"].(map[string]any)["id"] == "prod_cup"
			}},
			{"another ratio", payID, map[string]any{"parameters": coin(2, 5)}, func(u map[string]any) bool {
				return u["parameters"].(map[string]any)["coin"].(map[string]any)["exchange_ratio"] == 2.0
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				if u := as(t).OK("PUT", "/v1/rewards/"+c.id, c.body); !c.check(u) {
					t.Fatalf("update %v: %v", c.body, u)
				}
			})
		}
		for _, c := range []struct {
			name string
			id   string
			body map[string]any
			code int
			key  string
		}{
			{"a MATERIAL reward made COIN", mugID, map[string]any{"parameters": coin(1, 1)}, 400, "invalid_payload"},
			{"a COIN reward made MATERIAL", payID, map[string]any{"parameters": product("p")}, 400, "invalid_payload"},
			{"stock on a COIN reward", payID, map[string]any{"stock": 1}, 400, "invalid_payload"},
			{"a blank name", mugID, map[string]any{"name": " "}, 400, "invalid_payload"},
			{"a negative stock", mugID, map[string]any{"stock": -2}, 400, "invalid_payload"},
			{"no such reward", "rew_nope", map[string]any{"name": "X"}, 404, "not_found"},
		} {
			t.Run(c.name, func(t *testing.T) { as(t).Fails("PUT", "/v1/rewards/"+c.id, c.body, c.code, c.key) })
		}
		if g := a.OK("GET", "/v1/rewards/"+mugID, nil); g["type"] != "MATERIAL" || g["name"] != "Blue mug" || g["stock"] != 3.0 {
			t.Fatalf("a refused update changed the reward: %v", g)
		}
		// One event for each update that was taken, none for the refused.
		hooks.Wait(t, "reward.updated", 7)
		if n := hooks.Count("reward.updated"); n != 7 {
			t.Fatalf("%d reward.updated events, want 7", n)
		}
	})

	t.Run("the list is in creation order, paged, with the total", func(t *testing.T) {
		a := as(t)
		third := a.OK("POST", "/v1/rewards", map[string]any{"name": "Bike", "parameters": product("prod_bike")})
		p1 := a.OK("GET", "/v1/rewards?limit=2", nil)
		d := p1["data"].([]any)
		if p1["total"] != 3.0 || len(d) != 2 || p1["has_more"] != true || d[0].(map[string]any)["id"] != mug["id"] ||
			d[1].(map[string]any)["id"] != pay["id"] {
			t.Fatalf("first page: %v", p1)
		}
		p2 := a.OK("GET", "/v1/rewards?limit=2&starting_after_id="+p1["more_starting_after"].(string), nil)
		if d := p2["data"].([]any); len(d) != 1 || d[0].(map[string]any)["id"] != third["id"] || p2["has_more"] != false {
			t.Fatalf("second page: %v", p2)
		}
	})

	t.Run("a deleted reward is gone", func(t *testing.T) {
		a := as(t)
		id := pay["id"].(string)
		if r := a.Do("DELETE", "/v1/rewards/"+id, nil); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		a.Fails("GET", "/v1/rewards/"+id, nil, 404, "not_found")
		a.Fails("DELETE", "/v1/rewards/"+id, nil, 404, "not_found")
		if o := hooks.Wait(t, "reward.deleted", 1); o["reward"].(map[string]any)["id"] != id {
			t.Fatalf("reward.deleted: %v", o)
		}
		if l := a.OK("GET", "/v1/rewards", nil); l["total"] != 2.0 {
			t.Fatalf("list after a deletion: %v", l)
		}
	})

	t.Run("another project sees none of it", func(t *testing.T) {
		other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
		id := mug["id"].(string)
		other.Fails("GET", "/v1/rewards/"+id, nil, 404, "not_found")
		other.Fails("PUT", "/v1/rewards/"+id, map[string]any{"name": "Mine"}, 404, "not_found")
		other.Fails("DELETE", "/v1/rewards/"+id, nil, 404, "not_found")
		if l := other.OK("GET", "/v1/rewards", nil); l["total"] != 0.0 {
			t.Fatalf("other project's list: %v", l)
		}
	})
}

// The official Python SDK sends a COIN reward's ratios as strings, as the
// reference's request schema types them; they read back as numbers.
func TestACoinRewardTakesItsRatiosAsStrings(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	w := a.OK("POST", "/v1/rewards", map[string]any{"name": "Pay with points (SDK)", "parameters": map[string]any{
		"coin": map[string]any{"exchange_ratio": "0.5", "points_ratio": "20"}}})
	if c := w["parameters"].(map[string]any)["coin"].(map[string]any); c["exchange_ratio"] != 0.5 || c["points_ratio"] != 20.0 {
		t.Fatalf("coin reward from strings: %v", w)
	}
	u := a.OK("PUT", "/v1/rewards/"+w["id"].(string), map[string]any{"parameters": map[string]any{
		"coin": map[string]any{"exchange_ratio": "2", "points_ratio": "5"}}})
	if c := u["parameters"].(map[string]any)["coin"].(map[string]any); c["exchange_ratio"] != 2.0 || c["points_ratio"] != 5.0 {
		t.Fatalf("coin reward updated from strings: %v", u)
	}
	a.Fails("POST", "/v1/rewards", map[string]any{"name": "X", "parameters": map[string]any{
		"coin": map[string]any{"exchange_ratio": "one", "points_ratio": "20"}}}, 400, "invalid_payload")
}
