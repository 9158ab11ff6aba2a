package management_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// Project users: invited pending with a role in each project, assigned,
// listed, read, given another role, unassigned (never from their last
// project); their credential is issued once, and calls only their
// projects' routes that their role allows.
func TestProjectUsersAndTheirCredentials(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	h := e.MgmtHeader()
	a, b, other := e.CreateProject(t, "api"), e.CreateProject(t, "api"), e.CreateProject(t, "api")
	users := func(p stacktest.Project) string { return base + "/projects/" + p.ID + "/users" }
	want := func(r stacktest.Resp, status int, what string) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Body, status)
		}
	}

	want(e.Do(t, "POST", base+"/projects/users/invite", h, map[string]any{"email": "ann@example.com", "first_name": "Ann",
		"last_name": "Lee", "projects": map[string]any{a.ID: "VIEWER"}}), 204, "invite")
	want(e.Do(t, "POST", base+"/projects/users/invite", h, map[string]any{"email": "ann@example.com",
		"projects": map[string]any{a.ID: "VIEWER"}}), 409, "invite an existing login")
	want(e.Do(t, "POST", base+"/projects/users/invite", h, map[string]any{"email": "bob@example.com",
		"projects": map[string]any{a.ID: "OWNER"}}), 400, "invite with an unknown role")
	want(e.Do(t, "POST", base+"/projects/users/invite", h, map[string]any{"email": "not an address",
		"projects": map[string]any{a.ID: "USER"}}), 400, "invite a bad e-mail")

	l := e.Do(t, "GET", users(a), h, nil)
	want(l, 200, "list")
	data := l.JSON(t)["data"].([]any)
	if len(data) != 1 {
		t.Fatalf("users of a: %s", l.Body)
	}
	ann := data[0].(map[string]any)
	id := ann["id"].(string)
	if ann["login"] != "ann@example.com" || ann["email"] != "ann@example.com" || ann["first_name"] != "Ann" || ann["role"] != "VIEWER" ||
		ann["status"] != "PENDING" || ann["projects"].(map[string]any)[a.ID] != "VIEWER" || ann["object"] != "user" {
		t.Fatalf("ann: %v", ann)
	}
	want(e.Do(t, "GET", users(b)+"/"+id, h, nil), 404, "ann in a project she is not in")
	r := e.Do(t, "POST", users(b), h, map[string]any{"login": "ann@example.com", "role": "USER"})
	want(r, 200, "assign by login")
	if m := r.JSON(t); m["role"] != "USER" || m["projects"].(map[string]any)[a.ID] != "VIEWER" {
		t.Fatalf("assigned: %s", r.Body)
	}
	want(e.Do(t, "POST", users(b), h, map[string]any{"id": "user_none", "role": "USER"}), 404, "assign an unknown user")
	want(e.Do(t, "POST", users(b), h, map[string]any{"id": id}), 400, "assign without a role")
	// A custom role ID names a role Tally cannot have (no API defines one):
	// refused wherever a role is given, saying so, never read as another role.
	for _, r := range []stacktest.Resp{
		e.Do(t, "POST", users(b), h, map[string]any{"id": id, "role": "role_5f3e2a"}),
		e.Do(t, "PUT", users(a)+"/"+id, h, map[string]any{"role": "role_5f3e2a"}),
		e.Do(t, "POST", base+"/projects/users/invite", h, map[string]any{"email": "cus@example.com", "projects": map[string]any{a.ID: "role_5f3e2a"}}),
	} {
		want(r, 400, "a custom role ID")
		if d, _ := r.JSON(t)["details"].(string); !strings.Contains(d, `"role_5f3e2a" is not a predefined role`) || !strings.Contains(d, "custom roles") {
			t.Fatalf("a custom role ID's refusal: %s", r.Body)
		}
	}
	if g := e.Do(t, "GET", users(a)+"/"+id, h, nil).JSON(t); g["role"] != "VIEWER" {
		t.Fatalf("after a refused custom role: %v", g)
	}

	// Her credential, once.
	cr := e.Do(t, "POST", base+"/users/"+id+"/credentials", h, nil)
	want(cr, 200, "issue")
	want(e.Do(t, "POST", base+"/users/"+id+"/credentials", h, nil), 409, "issue again")
	c := cr.JSON(t)
	uh := http.Header{"X-Management-Id": {c["management_id"].(string)}, "X-Management-Token": {c["management_token"].(string)}}
	if g := e.Do(t, "GET", users(a)+"/"+id, h, nil).JSON(t); g["status"] != "ACTIVE" {
		t.Fatalf("after the credential: %v", g)
	}

	// VIEWER in a: reads a, writes nothing there.
	want(e.Do(t, "GET", base+"/projects/"+a.ID, uh, nil), 200, "viewer reads the project")
	want(e.Do(t, "GET", base+"/projects/"+a.ID+"/webhooks", uh, nil), 200, "viewer reads webhooks")
	want(e.Do(t, "GET", base+"/projects/"+a.ID+"/api-keys", uh, nil), 403, "viewer reads keys")
	want(e.Do(t, "POST", base+"/projects/"+a.ID+"/webhooks", uh, map[string]any{"target_url": "https://example.com/h",
		"events": []any{"customer.created"}}), 403, "viewer writes a webhook")
	// USER in b: writes webhooks, not users or the project.
	want(e.Do(t, "POST", base+"/projects/"+b.ID+"/webhooks", uh, map[string]any{"target_url": "https://example.com/h",
		"events": []any{"customer.created"}}), 200, "user writes a webhook")
	want(e.Do(t, "POST", users(b), uh, map[string]any{"id": id, "role": "ADMIN"}), 403, "user raises their own role")
	want(e.Do(t, "PUT", base+"/projects/"+b.ID, uh, map[string]any{"name": "x"}), 403, "user renames the project")
	// Nothing outside her projects, nor the platform's own routes.
	want(e.Do(t, "GET", base+"/projects/"+other.ID, uh, nil), 403, "another project")
	want(e.Do(t, "GET", base+"/projects/"+other.ID+"/webhooks", uh, nil), 403, "another project's webhooks")
	want(e.Do(t, "GET", base+"/projects", uh, nil), 403, "the projects list")
	want(e.Do(t, "POST", base+"/projects/users/invite", uh, map[string]any{"email": "eve@example.com",
		"projects": map[string]any{a.ID: "ADMIN"}}), 403, "invite")
	want(e.Do(t, "GET", base+"/clusters", uh, nil), 403, "clusters")

	// A new role holds at once: ADMIN of a manages its users, still cannot
	// delete it.
	u := e.Do(t, "PUT", users(a)+"/"+id, h, map[string]any{"role": "ADMIN"})
	want(u, 200, "update")
	if u.JSON(t)["role"] != "ADMIN" {
		t.Fatalf("updated: %s", u.Body)
	}
	want(e.Do(t, "GET", base+"/projects/"+a.ID+"/api-keys", uh, nil), 200, "admin reads keys")
	want(e.Do(t, "GET", users(a), uh, nil), 200, "admin lists users")
	want(e.Do(t, "DELETE", base+"/projects/"+a.ID, uh, nil), 403, "admin deletes the project")

	// Unassigned from b, her credential no longer reaches it; a, her last
	// project, keeps her.
	want(e.Do(t, "DELETE", users(b)+"/"+id, h, nil), 204, "unassign")
	want(e.Do(t, "GET", base+"/projects/"+b.ID+"/webhooks", uh, nil), 403, "b after the unassignment")
	want(e.Do(t, "DELETE", users(a)+"/"+id, h, nil), 400, "unassign from the last project")
	want(e.Do(t, "DELETE", users(b)+"/"+id, h, nil), 404, "unassign twice")
}
