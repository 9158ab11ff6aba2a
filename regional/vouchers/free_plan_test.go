package vouchers

import (
	"context"
	"strings"
	"testing"

	"github.com/tallyhq/tally/regional/regionaltest"
)

// A publication's read of a campaign's free vouchers goes through the
// partial index of free vouchers: through the campaign's index it read
// every voucher the campaign had given, in id order, before the free
// ones, so an AUTO_UPDATE campaign whose vouchers are all held (a
// discount CAMPAIGN reward gives each as it makes it) read more with each
// publication.
func TestFreeVouchersAreReadFromTheirIndex(t *testing.T) {
	p := regionaltest.Open(t, regionaltest.Database(t))
	ctx := context.Background()
	if _, err := p.Exec(ctx, `INSERT INTO vouchers (project_id, id, code, campaign_id, type, attrs, active, holder_id, created_at)
		SELECT 'proj_' || (g % 4), 'v_' || lpad(g::TEXT, 10, '0'), 'C-' || g, 'camp_' || (g % 4 + 4 * (g % 3)), 'DISCOUNT_VOUCHER', '{}', true,
			CASE WHEN g % 50 = 0 THEN NULL ELSE 'cust_' || (g % 64) END, now()
		FROM generate_series(1, 40000) AS g`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `ANALYZE vouchers`); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan, err := regionaltest.Explain(ctx, p, mode, freeVouchers, []any{"proj_1", "camp_1", 1})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, "vouchers_free") {
			t.Errorf("%s: the free vouchers are not read from vouchers_free:\n%s", mode, plan)
		}
	}
}
