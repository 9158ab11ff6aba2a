package events_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/erasure"
	"github.com/tallyhq/tally/regional/events"
	"github.com/tallyhq/tally/regional/regionaltest"
)

// A customer's counts go up by one an event of a name, and go with them:
// by permanent deletion (EraseCustomer) and by deletion (DropCustomer),
// another customer's staying.
func TestCountsGoWithTheirCustomer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := regionaltest.Open(t, regionaltest.Database(t))
	send := func(customer, name string) {
		t.Helper()
		if err := db.InTx(ctx, pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			events.CountEvent(b, "proj_x", customer, name)
			return tx.SendBatch(ctx, b).Close()
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"cust_a", "cust_b", "cust_c"} {
		send(c, "purchase")
		send(c, "purchase")
	}
	send("cust_a", "visit")
	counts := func() map[string]map[string]int {
		t.Helper()
		m, err := events.Counts{}.Counts(ctx, pool, "proj_x", []string{"cust_a", "cust_b", "cust_c"}, []string{"purchase", "visit"})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := counts(); len(m) != 3 || m["cust_a"]["purchase"] != 2 || m["cust_a"]["visit"] != 1 || m["cust_c"]["visit"] != 0 {
		t.Fatalf("counts %v", m)
	}
	if err := db.InTx(ctx, pool, func(tx pgx.Tx) error {
		if err := events.EraseCustomer(ctx, tx, "proj_x", erasure.Subject{CustomerID: "cust_a"}, &erasure.Counts{}); err != nil {
			return err
		}
		return events.DropCustomer(ctx, tx, "proj_x", "cust_b")
	}); err != nil {
		t.Fatal(err)
	}
	if m := counts(); len(m) != 1 || m["cust_c"]["purchase"] != 2 {
		t.Fatalf("counts after the deletions %v", m)
	}
}
