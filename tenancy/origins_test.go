package tenancy_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/tenancy"
)

// Exact origins, subdomain patterns, default ports and bare hosts (https),
// and * for any origin; everything else refused.
func TestTrustedDomainsMatchOrigins(t *testing.T) {
	o := tenancy.CompileOrigins([]string{"https://shop.example", "https://*.brand.example", "http://localhost:3000",
		"app.example:8443", "https://[::1]:9000"})
	for origin, want := range map[string]bool{
		"https://shop.example":          true,
		"HTTPS://Shop.Example":          true,
		"https://shop.example:443":      true,
		"shop.example":                  true, // the client SDK in Node sends a bare host
		"http://shop.example":           false,
		"https://shop.example:8443":     false,
		"https://www.shop.example":      false,
		"https://a.brand.example":       true,
		"https://a.b.brand.example":     true,
		"https://brand.example":         false,
		"https://evilbrand.example":     false,
		"https://a.brand.example.evil":  false,
		"http://a.brand.example":        false,
		"http://localhost:3000":         true,
		"http://localhost":              false,
		"https://app.example:8443":      true,
		"https://[::1]:9000":            true,
		"null":                          false,
		"":                              false,
		"https://shop.example/":         false,
		"https://user@shop.example":     false,
		"https://*.brand.example":       false,
		"javascript://shop.example":     false,
		"https://shop.example:99999":    false,
		"https://shop.example:+443":     false,
		"https://shop..example":         false,
		"https://shop.example:443:443":  false,
		"https://\u0441hop.example":     false,
		"https://shop.example\r\nX: y":  false,
		"https://xn--hop-8cd.example":   false,
		"https://sub.shop.example:3000": false,
	} {
		if got := o.Allows(origin); got != want {
			t.Errorf("Allows(%q) = %v, want %v", origin, got, want)
		}
	}
	if !tenancy.CompileOrigins([]string{"*"}).Allows("https://anything.example") || !tenancy.CompileOrigins([]string{"*"}).Allows("") {
		t.Error("* trusts every origin, and requests without one")
	}
	if (tenancy.Origins{}).Allows("https://shop.example") || tenancy.CompileOrigins(nil).Allows("https://shop.example") {
		t.Error("no entries trust nothing")
	}
	for entry, ok := range map[string]bool{"*": true, "https://shop.example": true, "https://*.shop.example": true,
		"shop.example": true, "http://localhost:3000": true, "https://shop.example/": false, "https://*": false,
		"ftp://shop.example": false, "https://sh op.example": false, "**.shop.example": false, "": false,
		"https://a.*.shop.example": false} {
		if err := tenancy.CheckTrustedDomain(entry); (err == nil) != ok {
			t.Errorf("CheckTrustedDomain(%q) = %v", entry, err)
		}
	}
	if !tenancy.SameOrigin("https://Shop.example:443", "shop.example") || tenancy.SameOrigin("https://shop.example", "http://shop.example") {
		t.Error("SameOrigin")
	}
}

// A cluster's trusted origins are those of its live projects' lists, with
// projects of no list (null), an empty one, another cluster's and deleted
// ones around; a change reaches the resolver through the change log.
func TestClusterOriginsAreItsLiveProjectsLists(t *testing.T) {
	ctx := context.Background()
	pool := directory(t)
	var trusting tenancy.Project
	if err := db.InTx(ctx, pool, func(q pgx.Tx) error {
		for _, c := range []string{"api", "us1"} {
			if err := tenancy.UpsertCluster(ctx, q, tenancy.Cluster{Name: c, Region: c, Kind: tenancy.Shared,
				APIHost: c + ".example.com", UpstreamURL: "http://10.0.0.1"}); err != nil {
				return err
			}
		}
		for _, p := range []tenancy.Project{{Name: "none", Cluster: "api"},
			{Name: "empty", Cluster: "api", Settings: tenancy.Settings{ClientTrustedDomains: []string{}}},
			{Name: "elsewhere", Cluster: "us1", Settings: tenancy.Settings{ClientTrustedDomains: []string{"https://us.example"}}},
			{Name: "gone", Cluster: "api", Settings: tenancy.Settings{ClientTrustedDomains: []string{"https://gone.example"}}},
			{Name: "shop", Cluster: "api", Settings: tenancy.Settings{ClientTrustedDomains: []string{"https://shop.example"}}}} {
			if _, _, err := tenancy.CreateProject(ctx, q, &p); err != nil {
				return err
			}
			if p.Name == "gone" {
				if err := tenancy.DeleteProject(ctx, q, p.ID); err != nil {
					return err
				}
			}
			trusting = p
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := tenancy.NewResolver(pool, tenancy.ResolverOptions{})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go r.Watch(wctx, 50*time.Millisecond)
	o, err := r.ClusterOrigins(ctx, "api")
	if err != nil || !o.Allows("https://shop.example") || o.Allows("https://us.example") || o.Allows("https://gone.example") {
		t.Fatalf("api's origins: %+v %v", o, err)
	}
	trusting.Settings.ClientTrustedDomains = []string{"https://*.shop.example"}
	if err := db.InTx(ctx, pool, func(q pgx.Tx) error { return tenancy.UpdateProject(ctx, q, &trusting) }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for o, _ = r.ClusterOrigins(ctx, "api"); o.Allows("https://shop.example"); o, _ = r.ClusterOrigins(ctx, "api") {
		if time.Now().After(deadline) {
			t.Fatal("the change did not reach the resolver")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !o.Allows("https://www.shop.example") {
		t.Fatalf("after the change: %+v", o)
	}
}
