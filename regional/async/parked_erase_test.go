package async_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/erasure"
)

// The operators' list of parked tasks reads payloads without claiming
// them: while a customer's erasure is unfinished, a parked webhook that
// copied her shows none of her data, and a parked erasure shows only whose
// it is, not the values it looks for.
func TestParkedTasksShowNothingOfACustomerBeingErased(t *testing.T) {
	url := database(t)
	p := open(t, url)
	ctx := context.Background()
	ann := erasure.Subject{CustomerID: "cust_ann", Values: []string{"ann@example.com", "Ann Smith"}}
	err := db.InTx(ctx, p, func(tx pgx.Tx) error {
		for _, proj := range []string{"proj_a", "proj_b"} {
			if _, err := async.Enqueue(ctx, tx, proj, async.NewTask{Kind: "webhook.deliver", Payload: map[string]any{
				"data": map[string]any{"customer": map[string]any{"id": "cust_ann", "object": "customer", "email": "ann@example.com", "name": "Ann Smith"}},
			}}); err != nil {
				return err
			}
		}
		return async.QueueErasure(ctx, tx, "proj_a", ann)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `UPDATE outbox SET status = 'parked', finished_at = now()`); err != nil {
		t.Fatal(err)
	}
	rows, err := async.ListParked(ctx, p, "", "", 10)
	if err != nil || len(rows) != 3 {
		t.Fatalf("parked: %+v %v", rows, err)
	}
	for _, r := range rows {
		b, _ := json.Marshal(r.Payload)
		shown := string(b)
		switch {
		case r.Kind == async.ErasureKind:
			if strings.Contains(shown, "ann@example.com") || strings.Contains(shown, "Ann Smith") || !strings.Contains(shown, "cust_ann") {
				t.Errorf("the parked erasure shows %s, want its customer's id and none of her values", shown)
			}
		case r.ProjectID == "proj_a":
			if strings.Contains(shown, "ann@example.com") || strings.Contains(shown, "Ann Smith") {
				t.Errorf("a parked task of the project erasing her shows %s", shown)
			}
		default: // another project's customer of that id is not hers
			if !strings.Contains(shown, "ann@example.com") {
				t.Errorf("another project's parked task lost its data: %s", shown)
			}
		}
	}
}
