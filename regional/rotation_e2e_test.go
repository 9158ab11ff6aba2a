package regional_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/management"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/router"
	"github.com/tallyhq/tally/tenancy"
)

// Both internal secrets are rotated in the documented order (README,
// deploy/README.md) without a request failing: every role learns the new
// secret as previous, then each swaps (the new current, the old previous),
// then previous is dropped. Each step
// replaces the instances behind the same addresses, as a rollout does.
// A signer left on the old secret is refused once previous is gone.
func TestSecretRotationKeepsRequestsSucceedingAtEveryStep(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api")
	cfg := e.Stack.Config()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dbURL := ""
	for _, r := range cfg.Regions {
		if r.Cluster == "api" {
			dbURL = r.DatabaseURL
		}
	}
	oldID, newID := stacktest.Secret, []byte("rotated identity secret 0123456789")
	oldOp, newOp := cfg.OperatorSecret, []byte("rotated operator secret 0123456789")
	log := telemetry.NewLogger(io.Discard, 0)

	// Each role at a fixed address, its instance swapped step by step.
	serve := func() (string, *atomic.Pointer[http.Handler]) {
		var h atomic.Pointer[http.Handler]
		l := listen(t)
		go httpx.Serve(ctx, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
		return "http://" + l.Addr().String(), &h
	}
	regionalURL, regionalH := serve()
	mgmtURL, mgmtH := serve()
	routerURL, routerH := serve()
	apiHost, dlHost := devstack.ClusterHosts("api", "localhost")
	if err := db.InTx(ctx, e.Stack.Tenancy, func(tx pgx.Tx) error {
		return tenancy.UpsertCluster(ctx, tx, tenancy.Cluster{Name: "api", Region: "europe", Kind: tenancy.Shared,
			APIHost: apiHost, DownloadHost: dlHost, UpstreamURL: regionalURL})
	}); err != nil {
		t.Fatal(err)
	}

	type secrets struct{ id, idPrev, op, opPrev []byte }
	startRegional := func(s secrets) {
		t.Helper()
		app, err := regional.New(ctx, regional.Config{Cluster: "api", DatabaseURL: dbURL, TenancyURL: cfg.TenancyURL,
			IdentitySecret: s.id, IdentitySecretPrevious: s.idPrev, OperatorSecret: s.op, OperatorSecretPrevious: s.opPrev, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(app.Close)
		h := app.Handler()
		regionalH.Store(&h)
	}
	startManagement := func(s secrets) {
		t.Helper()
		app, err := management.New(ctx, management.Config{TenancyURL: cfg.TenancyURL, IdentitySecret: s.id,
			IdentitySecretPrevious: s.idPrev, OperatorSecret: s.op, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(app.Close)
		h := app.Handler()
		mgmtH.Store(&h)
	}
	startRouter := func(id, prev []byte) {
		t.Helper()
		rt, err := router.New(router.Config{BaseDomain: "localhost", PublicScheme: "http", ManagementURL: mgmtURL,
			IdentitySecret: id, IdentitySecretPrevious: prev, Resolver: tenancy.NewResolver(e.Stack.Tenancy, tenancy.ResolverOptions{Log: log}), Log: log})
		if err != nil {
			t.Fatal(err)
		}
		h := rt.Handler()
		routerH.Store(&h)
	}
	client := stacktest.ClientFor(routerURL)
	n := 0
	requests := func(step string) (statuses []int) {
		t.Helper()
		n++
		for _, r := range []struct {
			method, url string
			header      http.Header
			body        any
		}{
			{"POST", stacktest.URL("api", "/v1/customers"), p.Header(), map[string]any{"source_id": fmt.Sprintf("rotation-%d", n)}},
			{"GET", stacktest.URL("api", "/v1/customers?limit=1"), p.Header(), nil},
			// management (the router's identity), then regional's /internal (management's operator call)
			{"GET", stacktest.URL("api", "/management/v1/clusters/api/outbox/parked?limit=1"), e.MgmtHeader(), nil},
		} {
			resp := stacktest.Do(t, client, r.method, r.url, r.header, r.body)
			statuses = append(statuses, resp.Status)
			if resp.Status != 200 {
				t.Logf("%s: %s %s: %d %s", step, r.method, r.url, resp.Status, resp.Body)
			}
		}
		return statuses
	}
	ok := func(step string) {
		t.Helper()
		for _, s := range requests(step) {
			if s != 200 {
				t.Fatalf("%s: a request failed (see above)", step)
			}
		}
	}

	startRegional(secrets{id: oldID, op: oldOp})
	startManagement(secrets{id: oldID, op: oldOp})
	startRouter(oldID, nil)
	ok("before the rotation")

	// 1. Everyone learns the new secrets as previous, one role after
	// another, still signing with the old.
	startRegional(secrets{id: oldID, idPrev: newID, op: oldOp, opPrev: newOp})
	ok("regional accepts the new secrets")
	startManagement(secrets{id: oldID, idPrev: newID, op: oldOp})
	ok("management accepts the new identity secret")
	startRouter(oldID, newID)
	ok("the router accepts the new secret's download links")
	// 2. The swap, in any order: here the signers first, the worst case
	// (each new secret signed while a verifier holds it only as previous).
	startRouter(newID, oldID)
	ok("the router signs with the new identity secret")
	startManagement(secrets{id: newID, idPrev: oldID, op: newOp})
	ok("management signs its operator calls with the new secret")
	startRegional(secrets{id: newID, idPrev: oldID, op: newOp, opPrev: oldOp})
	ok("regional swapped")
	// 3. Previous dropped.
	startRegional(secrets{id: newID, op: newOp})
	startManagement(secrets{id: newID, op: newOp})
	startRouter(newID, nil)
	ok("previous dropped everywhere")

	// The old secrets open nothing any more.
	startRouter(oldID, nil)
	if s := requests("a router on the old identity secret"); s[0] != 401 || s[1] != 401 || s[2] != 401 {
		t.Errorf("a router signing with the dropped secret: %v, want 401s", s)
	}
	startRouter(newID, nil)
	startManagement(secrets{id: newID, op: oldOp})
	if s := requests("management on the old operator secret"); s[0] != 200 || s[2] != 401 {
		t.Errorf("management signing /internal calls with the dropped operator secret: %v, want 200 then 401 from /internal", s)
	}
}
