package bin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/regional/bin"
	"github.com/tallyhq/tally/regional/regionaltest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const project = "proj_bin"

// fixture is a bin over a fresh regional database, with removers that
// record what they were asked to remove: a product's takes its SKUs'
// entries with it, as the products package's does.
type fixture struct {
	t       *testing.T
	pool    *db.Pool
	clock   *clock.Clock
	bin     *bin.Bin
	mu      sync.Mutex
	removed []string // resource ids, in the order removed
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := regionaltest.Open(t, regionaltest.Database(t))
	f := &fixture{t: t, pool: pool, clock: &clock.Clock{}}
	record := func(_ context.Context, _ pgx.Tx, _ string, e bin.Entry) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.removed = append(f.removed, e.ResourceID)
		return nil
	}
	f.bin = bin.New(pool, f.clock, 24*time.Hour, bin.Removers{
		"sku": record,
		"product": func(ctx context.Context, tx pgx.Tx, projectID string, e bin.Entry) error {
			b := &pgx.Batch{}
			bin.QueueDropChildren(b, projectID, "sku", e.ResourceID)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			return record(ctx, tx, projectID, e)
		},
		"broken": func(context.Context, pgx.Tx, string, bin.Entry) error { return errors.New("cannot remove") },
	})
	return f
}

// put bins entries of projectID in one transaction, as an owner's delete
// does, and returns them.
func (f *fixture) put(projectID string, es ...bin.Entry) []bin.Entry {
	f.t.Helper()
	for i := range es {
		es[i].ID, es[i].CreatedAt = bin.NewID(), f.clock.Now().Truncate(time.Microsecond)
	}
	err := db.InTx(context.Background(), f.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		bin.Put(b, projectID, es)
		return tx.SendBatch(context.Background(), b).Close()
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return es
}

// list is every entry of projectID matching a filter's query.
func (f *fixture) list(projectID, query string) ([]string, int) {
	f.t.Helper()
	r := f.serve(projectID, "GET", "/v1/trash-bin?limit=100"+query)
	if r.Code != 200 {
		f.t.Fatalf("list: %d %s", r.Code, r.Body)
	}
	var l struct {
		Data  []bin.View `json:"data"`
		Total int        `json:"total"`
	}
	if err := json.Unmarshal(r.Body.Bytes(), &l); err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, v := range l.Data {
		out = append(out, v.ResourceID)
	}
	return out, l.Total
}

// serve answers a request of projectID through the bin's routes, as the
// regional service mounts them behind the router's identity.
func (f *fixture) serve(projectID, method, target string) *httptest.ResponseRecorder {
	e := httpx.New(httpx.Config{Service: "bin-test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			c.SetRequest(r.WithContext(identity.With(r.Context(), identity.Identity{ProjectID: projectID})))
			return next(c)
		}
	})
	bin.Register(e.Group("/v1"), f.bin)
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func (f *fixture) wasRemoved() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.removed)
}

func name(s string) *string { return &s }

func TestWhatGoesToTheBinIsListed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	prod := "prod_1"
	f.put(project, bin.Entry{ResourceType: "product", ResourceID: prod, ResourceName: name("Shirt")},
		bin.Entry{ResourceType: "sku", ResourceID: "sku_1", ResourceName: name("Small"), ParentID: &prod},
		bin.Entry{ResourceType: "sku", ResourceID: "sku_2", ParentID: &prod})
	f.put(project, bin.Entry{ResourceType: "campaign", ResourceID: "camp_1", ResourceName: name("Summer")})
	f.put("proj_other", bin.Entry{ResourceType: "product", ResourceID: "prod_other"})

	for _, c := range []struct {
		name  string
		query string
		want  []string
	}{
		{"everything of the project, oldest first", "", []string{"prod_1", "sku_1", "sku_2", "camp_1"}},
		{"newest first", "&order=-id", []string{"camp_1", "sku_2", "sku_1", "prod_1"}},
		{"by resource type", "&filters[resource_type][conditions][$is]=sku", []string{"sku_1", "sku_2"}},
		{"by resource name", "&filters[resource_name][conditions][$is]=Summer", []string{"camp_1"}},
		{"by resource id", "&filters[resource_id][conditions][$in][0]=sku_2&filters[resource_id][conditions][$in][1]=camp_1",
			[]string{"sku_2", "camp_1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, total := f.list(project, c.query)
			if !slices.Equal(got, c.want) || total != len(c.want) {
				t.Fatalf("%v (total %d), want %v", got, total, c.want)
			}
		})
	}

	t.Run("an entry reads as the reference's TrashBinItem", func(t *testing.T) {
		r := f.serve(project, "GET", "/v1/trash-bin?filters[resource_id][conditions][$is]=sku_1")
		var l struct{ Data []map[string]any }
		if err := json.Unmarshal(r.Body.Bytes(), &l); err != nil || len(l.Data) != 1 {
			t.Fatalf("%s (%v)", r.Body, err)
		}
		v := l.Data[0]
		if v["object"] != "sku" || v["resource_type"] != "sku" || v["resource_name"] != "Small" || v["resource_parent_id"] != prod ||
			v["deleted_by_user_id"] != nil || v["created_at"] == nil {
			t.Fatalf("entry: %v", v)
		}
	})

	t.Run("pages follow each other", func(t *testing.T) {
		r := f.serve(project, "GET", "/v1/trash-bin?limit=3")
		var p1 struct {
			HasMore bool   `json:"has_more"`
			After   string `json:"more_starting_after"`
			Data    []bin.View
		}
		if err := json.Unmarshal(r.Body.Bytes(), &p1); err != nil || !p1.HasMore || len(p1.Data) != 3 {
			t.Fatalf("first page: %s", r.Body)
		}
		got, _ := f.list(project, "&starting_after_id="+p1.After)
		if !slices.Equal(got, []string{"camp_1"}) {
			t.Fatalf("second page %v", got)
		}
	})

	t.Run("a bad query is refused", func(t *testing.T) {
		for _, q := range []string{"?order=name", "?filters[color][conditions][$is]=x"} {
			if r := f.serve(project, "GET", "/v1/trash-bin"+q); r.Code != 400 {
				t.Fatalf("%s: %d %s", q, r.Code, r.Body)
			}
		}
	})
}

func TestAnEntryIsDeletedForGoodByItsRemover(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	prod := "prod_1"
	es := f.put(project, bin.Entry{ResourceType: "product", ResourceID: prod},
		bin.Entry{ResourceType: "sku", ResourceID: "sku_1", ParentID: &prod},
		bin.Entry{ResourceType: "sku", ResourceID: "sku_9"},
		bin.Entry{ResourceType: "broken", ResourceID: "x_1"},
		bin.Entry{ResourceType: "nobody", ResourceID: "y_1"})
	other := f.put("proj_other", bin.Entry{ResourceType: "sku", ResourceID: "sku_other"})

	for _, c := range []struct {
		name        string
		entry       string
		status      int
		removed     []string // by the removers, in all so far
		left        []string
		removeError bool
	}{
		{"a SKU: its remover, then its entry", es[2].ID, 204, []string{"sku_9"}, []string{"prod_1", "sku_1", "x_1", "y_1"}, false},
		{"the same entry again", es[2].ID, 404, []string{"sku_9"}, []string{"prod_1", "sku_1", "x_1", "y_1"}, false},
		{"another project's entry", other[0].ID, 404, []string{"sku_9"}, []string{"prod_1", "sku_1", "x_1", "y_1"}, false},
		{"a remover's failure keeps the entry", es[3].ID, 500, []string{"sku_9"}, []string{"prod_1", "sku_1", "x_1", "y_1"}, true},
		{"a type with no remover keeps the entry", es[4].ID, 500, []string{"sku_9"}, []string{"prod_1", "sku_1", "x_1", "y_1"}, true},
		{"a product takes its SKUs' entries", es[0].ID, 204, []string{"sku_9", "prod_1"}, []string{"x_1", "y_1"}, false},
		{"a SKU its product took", es[1].ID, 404, []string{"sku_9", "prod_1"}, []string{"x_1", "y_1"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := f.serve(project, "DELETE", "/v1/trash-bin/"+c.entry)
			if r.Code != c.status {
				t.Fatalf("%d %s, want %d", r.Code, r.Body, c.status)
			}
			if c.status == 404 {
				var e apierr.Error
				if json.Unmarshal(r.Body.Bytes(), &e) != nil || e.Key != "not_found" || e.ResourceType != "bin_entry" || e.ResourceID != c.entry {
					t.Fatalf("404 %s does not name the entry", r.Body)
				}
			}
			if got := f.wasRemoved(); !slices.Equal(got, c.removed) {
				t.Fatalf("removers ran for %v, want %v", got, c.removed)
			}
			if left, _ := f.list(project, ""); !slices.Equal(left, c.left) {
				t.Fatalf("left %v, want %v", left, c.left)
			}
		})
	}
	if left, _ := f.list("proj_other", ""); !slices.Equal(left, []string{"sku_other"}) {
		t.Fatalf("another project's bin: %v", left)
	}
}

func TestTheSweepRemovesWhatOutlivedTheRetention(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A sweep that never ends (one that keeps finding what it removed)
	// fails here rather than at the test binary's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Over a day ago: a SKU binned on its own, then its product, which took
	// its other SKU to the bin with it (one moment), and in another project
	// an old SKU; then a SKU half a day old and a new one.
	prod := "prod_old"
	f.put(project, bin.Entry{ResourceType: "sku", ResourceID: "sku_old", ParentID: &prod})
	f.put(project, bin.Entry{ResourceType: "product", ResourceID: prod},
		bin.Entry{ResourceType: "sku", ResourceID: "sku_with", ParentID: &prod})
	f.put("proj_other", bin.Entry{ResourceType: "sku", ResourceID: "sku_other_old"})
	f.clock.Advance(12 * time.Hour)
	f.put(project, bin.Entry{ResourceType: "sku", ResourceID: "sku_day"})
	f.clock.Advance(12*time.Hour + time.Minute)
	f.put(project, bin.Entry{ResourceType: "sku", ResourceID: "sku_new"})

	if err := f.bin.Expire(ctx); err != nil {
		t.Fatal(err)
	}
	// The product goes before the SKU binned in the same moment, and takes
	// its entry: sku_with is never handed to the SKUs' remover.
	removed := f.wasRemoved()
	slices.Sort(removed)
	if want := []string{"prod_old", "sku_old", "sku_other_old"}; !slices.Equal(removed, want) {
		t.Fatalf("the sweep removed %v, want %v", removed, want)
	}
	if left, _ := f.list(project, ""); !slices.Equal(left, []string{"sku_day", "sku_new"}) {
		t.Fatalf("left %v, want the entries younger than a day", left)
	}
	if left, _ := f.list("proj_other", ""); len(left) != 0 {
		t.Fatalf("another project's old entry stayed: %v", left)
	}

	t.Run("each entry goes when it outlives the retention, not before", func(t *testing.T) {
		f.clock.Advance(12 * time.Hour)
		if err := f.bin.Expire(ctx); err != nil {
			t.Fatal(err)
		}
		if left, _ := f.list(project, ""); !slices.Equal(left, []string{"sku_new"}) {
			t.Fatalf("left %v", left)
		}
		f.clock.Advance(13 * time.Hour)
		if err := f.bin.Expire(ctx); err != nil {
			t.Fatal(err)
		}
		if left, _ := f.list(project, ""); len(left) != 0 {
			t.Fatalf("left %v", left)
		}
	})

	t.Run("an entry whose remover fails stops the sweep with its error and stays", func(t *testing.T) {
		f.put(project, bin.Entry{ResourceType: "broken", ResourceID: "x_1"})
		f.clock.Advance(25 * time.Hour)
		if err := f.bin.Expire(ctx); err == nil {
			t.Fatal("the sweep hid a remover's failure")
		}
		if left, _ := f.list(project, ""); !slices.Equal(left, []string{"x_1"}) {
			t.Fatalf("left %v", left)
		}
	})
}

// A sweep with a hundred and more due entries takes them all, in batches.
func TestTheSweepTakesEveryDueEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	es := make([]bin.Entry, 250)
	for i := range es {
		es[i] = bin.Entry{ResourceType: "sku", ResourceID: fmt.Sprintf("sku_%03d", i)}
	}
	f.put(project, es...)
	f.clock.Advance(25 * time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.bin.Expire(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(f.wasRemoved()); n != 250 {
		t.Fatalf("%d removed, want 250", n)
	}
	if _, total := f.list(project, ""); total != 0 {
		t.Fatalf("%d entries left", total)
	}
}
