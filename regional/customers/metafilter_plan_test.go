package customers_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/regionaltest"
)

// A metadata-filtered page of customers and its total read the matches
// through the inverted index on the metadata (customers_by_metadata), not
// every customer of the project: without it a page of a rare value reads
// the project's customers from the newest until it has found enough, and
// the total reads them all.
func TestMetadataFilteredListReadsTheIndex(t *testing.T) {
	p := regionaltest.Open(t, regionaltest.Database(t))
	ctx := context.Background()
	if _, err := p.Exec(ctx, `INSERT INTO customers (project_id, id, source_id, attrs, created_at)
		SELECT 'proj_' || (g % 2), 'cust_' || lpad(g::TEXT, 8, '0'), 's' || g,
			jsonb_build_object('metadata', jsonb_build_object('region', 'r' || (g % 5000), 'n', g)), now()
		FROM generate_series(1, 60000) AS g`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `ANALYZE customers`); err != nil {
		t.Fatal(err)
	}
	q := url.Values{"filters[metadata.region][conditions][$is]": {"r7"}}
	page, pageArgs, count, countArgs, err := customers.ListStatements("proj_1", q)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		sql  string
		args []any
	}{{page, pageArgs}, {count, countArgs}} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			plan, err := regionaltest.Explain(ctx, p, mode, s.sql, s.args)
			if err != nil {
				t.Fatalf("%s: %v", s.sql, err)
			}
			if !strings.Contains(plan, "customers_by_metadata") {
				t.Errorf("%s, %s: not from customers_by_metadata:\n%s", s.sql, mode, plan)
			}
		}
	}
}
