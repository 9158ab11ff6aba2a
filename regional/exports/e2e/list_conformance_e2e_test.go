package e2e_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// The export list and the async actions list answer exports of every
// object (and the jobs that made them) as the reference shapes each: the
// conformance check, run as the test's environment closes, holds each
// listed item to its own branch of the list's oneOf.
func TestListsOfEveryKindOfExportConform(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	for _, o := range []string{"redemption", "product", "sku", "voucher", "customer", "order", "publication", "points_expiration", "voucher_transactions"} {
		e := a.OK("POST", "/v1/exports", map[string]any{"exported_object": o})
		stacktest.Eventually(t, 20e9, "export "+o, func() bool { return a.OK("GET", "/v1/exports/"+e["id"].(string), nil)["status"] == "DONE" })
	}
	a.OK("GET", "/v1/exports", nil)
	a.OK("GET", "/v1/async-actions", nil)
}
