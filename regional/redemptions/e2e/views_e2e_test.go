package e2e_test

import (
	"testing"
)

func ids(l map[string]any, key string) []string {
	var out []string
	for _, d := range l["data"].([]any) {
		m := d.(map[string]any)
		if key != "" {
			m = m[key].(map[string]any)
		}
		out = append(out, m["id"].(string))
	}
	return out
}

func same(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A reward's assignments are made, read, changed and removed through
// /v1/rewards/{id}/assignments, and the campaign's paths
// (/v1/loyalties/{id}/rewards and /reward-assignments) and the member's
// rewards show the same ones.
func TestRewardAssignmentsThroughEveryPathAgree(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	progID := a.Campaign("Spenders", nil)["id"].(string)
	otherID := a.Campaign("Others", nil)["id"].(string)
	code := a.Member(progID, "ann")["code"].(string)
	mug := a.OK("POST", "/v1/rewards", map[string]any{"name": "Mug", "parameters": map[string]any{"product": map[string]any{"id": "prod_mug"}}})
	mugID := mug["id"].(string)
	price := func(p int) map[string]any { return map[string]any{"loyalty": map[string]any{"points": p}} }

	as := a.OK("POST", "/v1/rewards/"+mugID+"/assignments", map[string]any{"campaign": progID, "parameters": price(100)})
	asID := as["id"].(string)
	if as["object"] != "reward_assignment" || as["reward_id"] != mugID || as["related_object_id"] != progID {
		t.Fatalf("assignment: %v", as)
	}
	a.Fails("POST", "/v1/rewards/"+mugID+"/assignments", map[string]any{"campaign": progID, "parameters": price(5)}, 409, "duplicate_found")
	a.Fails("POST", "/v1/rewards/"+mugID+"/assignments", map[string]any{"parameters": price(5)}, 400, "invalid_payload")
	a.Fails("POST", "/v1/rewards/rew_none/assignments", map[string]any{"campaign": progID, "parameters": price(5)}, 404, "not_found")
	other := a.OK("POST", "/v1/rewards/"+mugID+"/assignments", map[string]any{"campaign": otherID, "parameters": price(7)})

	byReward := a.OK("GET", "/v1/rewards/"+mugID+"/assignments", nil)
	if byReward["total"] != 2.0 || !same(ids(byReward, ""), []string{asID, other["id"].(string)}) {
		t.Fatalf("reward's assignments: %v", byReward)
	}
	for _, path := range []string{"/v1/loyalties/" + progID + "/rewards", "/v1/loyalties/" + progID + "/reward-assignments"} {
		if l := a.OK("GET", path, nil); l["total"] != 1.0 || !same(ids(l, ""), []string{asID}) {
			t.Fatalf("%s: %v", path, l)
		}
	}
	for _, path := range []string{"/v1/rewards/" + mugID + "/assignments/" + asID, "/v1/loyalties/" + progID + "/rewards/" + asID,
		"/v1/loyalties/" + progID + "/reward-assignments/" + asID} {
		if g := a.OK("GET", path, nil); g["id"] != asID || g["parameters"].(map[string]any)["loyalty"].(map[string]any)["points"] != 100.0 {
			t.Fatalf("%s: %v", path, g)
		}
	}
	if w := a.OK("GET", "/v1/loyalties/"+progID+"/reward-assignments/"+asID+"/reward", nil); w["id"] != mugID || w["object"] != "reward" {
		t.Fatalf("assignment's reward: %v", w)
	}
	// An assignment is its reward's and its campaign's only.
	a.Fails("GET", "/v1/rewards/"+mugID+"/assignments/rewa_none", nil, 404, "not_found")
	a.Fails("GET", "/v1/loyalties/"+otherID+"/reward-assignments/"+asID, nil, 404, "not_found")

	if u := a.OK("PUT", "/v1/rewards/"+mugID+"/assignments/"+asID, map[string]any{"parameters": price(150)}); u["parameters"].(map[string]any)["loyalty"].(map[string]any)["points"] != 150.0 {
		t.Fatalf("update: %v", u)
	}
	mr := a.OK("GET", "/v1/loyalties/members/"+code+"/rewards", nil)
	if mr["object"] != "list" || mr["total"] != 1.0 || !same(ids(mr, "assignment"), []string{asID}) || !same(ids(mr, "reward"), []string{mugID}) {
		t.Fatalf("member's rewards: %v", mr)
	}
	item := mr["data"].([]any)[0].(map[string]any)
	if item["object"] != "loyalty_reward" || item["assignment"].(map[string]any)["parameters"].(map[string]any)["loyalty"].(map[string]any)["points"] != 150.0 {
		t.Fatalf("member's reward: %v", item)
	}
	if l := a.OK("GET", "/v1/loyalties/"+progID+"/members/"+code+"/rewards", nil); !same(ids(l, "assignment"), []string{asID}) {
		t.Fatalf("member's rewards in the campaign's path: %v", l)
	}
	a.Fails("GET", "/v1/loyalties/"+otherID+"/members/"+code+"/rewards", nil, 404, "")

	if r := a.Do("DELETE", "/v1/rewards/"+mugID+"/assignments/"+asID, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	for _, path := range []string{"/v1/loyalties/" + progID + "/rewards", "/v1/loyalties/" + progID + "/reward-assignments",
		"/v1/loyalties/members/" + code + "/rewards"} {
		if l := a.OK("GET", path, nil); l["total"] != 0.0 {
			t.Fatalf("%s after the delete: %v", path, l)
		}
	}
	if l := a.OK("GET", "/v1/rewards/"+mugID+"/assignments", nil); l["total"] != 1.0 {
		t.Fatalf("reward's assignments after the delete: %v", l)
	}
}

// affordable_only keeps the rewards whose price the card's balance covers,
// and follows the balance as it moves.
func TestAffordableRewardsFollowTheBalance(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	progID := a.Campaign("Spenders", nil)["id"].(string)
	code := a.Member(progID, "ann")["code"].(string)
	reward := func(name string, points int) string {
		w := a.OK("POST", "/v1/rewards", map[string]any{"name": name, "parameters": map[string]any{"product": map[string]any{"id": "prod_" + name}}})
		a.OK("POST", "/v1/rewards/"+w["id"].(string)+"/assignments", map[string]any{"campaign": progID,
			"parameters": map[string]any{"loyalty": map[string]any{"points": points}}})
		return w["id"].(string)
	}
	cheap, mid, dear := reward("cheap", 10), reward("mid", 100), reward("dear", 1000)
	affordable := func() []string {
		return ids(a.OK("GET", "/v1/loyalties/members/"+code+"/rewards?affordable_only=true", nil), "reward")
	}
	for _, c := range []struct {
		change int
		want   []string
	}{
		{0, nil},
		{10, []string{cheap}},
		{90, []string{cheap, mid}},
		{900, []string{cheap, mid, dear}},
		{-1, []string{cheap, mid}},
		{-991, nil},
	} {
		if c.change != 0 {
			a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": c.change})
		}
		if got := affordable(); !same(got, c.want) {
			t.Fatalf("after %+d: affordable %v, want %v", c.change, got, c.want)
		}
	}
	if all := ids(a.OK("GET", "/v1/loyalties/members/"+code+"/rewards?affordable_only=false", nil), "reward"); len(all) != 3 {
		t.Fatalf("every reward: %v", all)
	}
	a.Fails("GET", "/v1/loyalties/members/"+code+"/rewards?affordable_only=maybe", nil, 400, "invalid_query_params")
}
