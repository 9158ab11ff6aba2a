package management_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A project's branding: one a project, created, read, listed, changed by a
// partial PUT (what is not sent stays, null clears), refused where a URL or
// an e-mail is not one, deleted.
func TestProjectBranding(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	h := e.MgmtHeader()
	p := e.CreateProject(t, "api")
	url := base + "/projects/" + p.ID + "/branding"
	if l := e.Do(t, "GET", url, h, nil); l.Status != 200 || len(l.JSON(t)["data"].([]any)) != 0 {
		t.Fatalf("no branding yet: %d %s", l.Status, l.Body)
	}
	r := e.Do(t, "POST", url, h, map[string]any{"brand": map[string]any{"name": "Shop", "website_url": "https://shop.example"},
		"contact": map[string]any{"email": "hi@shop.example", "phone": "+48 1"}})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	b := r.JSON(t)
	id := b["id"].(string)
	if b["brand"].(map[string]any)["name"] != "Shop" || b["contact"].(map[string]any)["phone"] != "+48 1" ||
		b["address"].(map[string]any)["city"] != nil || b["object"] != "brand" {
		t.Fatalf("created: %s", r.Body)
	}
	if r := e.Do(t, "POST", url, h, map[string]any{"brand": map[string]any{"name": "Again"}}); r.Status != 409 {
		t.Fatalf("a second branding: %d %s", r.Status, r.Body)
	}
	u := e.Do(t, "PUT", url+"/"+id, h, map[string]any{"address": map[string]any{"city": "Kraków"}, "contact": map[string]any{"phone": nil}})
	if u.Status != 200 {
		t.Fatalf("update: %d %s", u.Status, u.Body)
	}
	g := e.Do(t, "GET", url+"/"+id, h, nil).JSON(t)
	if g["brand"].(map[string]any)["name"] != "Shop" || g["address"].(map[string]any)["city"] != "Kraków" ||
		g["contact"].(map[string]any)["phone"] != nil || g["contact"].(map[string]any)["email"] != "hi@shop.example" || g["updated_at"] == nil {
		t.Fatalf("after a partial PUT: %v", g)
	}
	for _, bad := range []map[string]any{
		{"brand": map[string]any{"website_url": "shop"}},
		{"contact": map[string]any{"email": "not an address"}},
		{"brand": map[string]any{"logo": "x"}},
		{"colours": map[string]any{}},
	} {
		if r := e.Do(t, "PUT", url+"/"+id, h, bad); r.Status != 400 {
			t.Errorf("%v: %d %s", bad, r.Status, r.Body)
		}
	}
	if l := e.Do(t, "GET", url, h, nil).JSON(t); len(l["data"].([]any)) != 1 {
		t.Fatalf("list: %v", l)
	}
	if r := e.Do(t, "GET", base+"/projects/"+e.CreateProject(t, "api").ID+"/branding/"+id, h, nil); r.Status != 404 {
		t.Fatalf("another project's: %d", r.Status)
	}
	if r := e.Do(t, "DELETE", url+"/"+id, h, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", url+"/"+id, h, nil); r.Status != 404 {
		t.Fatalf("after delete: %d", r.Status)
	}
}
