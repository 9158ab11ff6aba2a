package wallet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/customers"
)

// Holder roles.
const (
	Owner    = "OWNER"
	Referrer = "REFERRER"
	Referee  = "REFEREE"
)

// Statuses of a held redeemable.
const (
	Active       = "ACTIVE"
	Used         = "USED"
	Disabled     = "DISABLED"
	NotActiveYet = "NOT_ACTIVE_YET"
	Expired      = "EXPIRED"
	NoBalance    = "NO_BALANCE"
)

// State is what a redeemable's status is computed from.
type State struct {
	Active            bool
	Start, Expiration *time.Time
	Used              bool // its redemption quantity is reached
	NoBalance         bool // a gift card without credits, a loyalty card without points
}

// Status is the redeemable's status at now. A redeemable that is wrong in
// several ways shows the first of: disabled, not active yet, expired,
// used, no balance; the order in which validation refuses them.
func (s State) Status(now time.Time) string {
	switch {
	case !s.Active:
		return Disabled
	case s.Start != nil && now.Before(*s.Start):
		return NotActiveYet
	case s.Expiration != nil && !now.Before(*s.Expiration):
		return Expired
	case s.Used:
		return Used
	case s.NoBalance:
		return NoBalance
	}
	return Active
}

// Redeemable is what is held: a voucher (any type, a loyalty card
// included) as its owner renders it, and its status.
type Redeemable struct {
	Type    string `json:"type"`
	Voucher any    `json:"voucher"`
	Status  string `json:"status"`
}

// Holding is one row of the wallet. Discount and gift vouchers and loyalty
// cards are held by their holder_id, their holding id rh_ and the
// voucher's id body (so that every holding sorts by creation alike);
// referral codes by referrals' holder rows, whose ids are rh_ already.
type Holding struct {
	ID           string
	CreatedAt    time.Time
	RedeemableID string
	CustomerID   string
	Role         string
	CampaignID   *string
	CampaignType *string
	VoucherType  string
	Redeemable   Redeemable
}

// View is the reference's CustomerRedeemable.
type View struct {
	ID               string     `json:"id"`
	CreatedAt        jsonx.Time `json:"created_at"`
	RedeemableID     string     `json:"redeemable_id"`
	RedeemableObject string     `json:"redeemable_object"`
	CustomerID       string     `json:"customer_id"`
	HolderRole       string     `json:"holder_role"`
	CampaignID       *string    `json:"campaign_id"`
	CampaignType     *string    `json:"campaign_type"`
	VoucherType      string     `json:"voucher_type"`
	Redeemable       Redeemable `json:"redeemable"`
}

// View renders the holding.
func (h Holding) View() View {
	return View{ID: h.ID, CreatedAt: jsonx.Time{Time: h.CreatedAt}, RedeemableID: h.RedeemableID, RedeemableObject: "voucher",
		CustomerID: h.CustomerID, HolderRole: h.Role, CampaignID: h.CampaignID, CampaignType: h.CampaignType,
		VoucherType: h.VoucherType, Redeemable: h.Redeemable}
}

// Query is a wallet page: a source answers the customer's holdings that
// Filter selects, after the cursor After (an rh_ id) in id order (or its
// reverse), at most Limit+1 of them, and their total.
type Query struct {
	CustomerID string
	Filter     filters.Filter
	After      string
	Desc       bool
	Limit      int
	Now        time.Time
}

// Source answers a page of the holdings one package owns.
type Source func(ctx context.Context, projectID string, q Query) ([]Holding, int, error)

// Columns are a source's SQL for the fields the wallet filters by. Key is
// the column its rows are ordered by, the holding id's body behind Prefix
// (v.id behind v_), so that a page is read along the owner's index on
// (project, holder, id) rather than sorted.
type Columns struct {
	ID, CreatedAt, RedeemableID, Role, CampaignID, CampaignType, VoucherType string
	Key, Prefix                                                              string
}

// Fields are the filters the reference defines for the wallet, on c.
func (c Columns) Fields() map[string]filters.Field {
	return map[string]filters.Field{
		"id":                {Kind: filters.String, Column: c.ID},
		"created_at":        {Kind: filters.DateTime, Column: c.CreatedAt},
		"redeemable_id":     {Kind: filters.String, Column: c.RedeemableID},
		"redeemable_object": {Kind: filters.String, Column: "'voucher'"},
		"holder_role":       {Kind: filters.String, Column: c.Role},
		"campaign_id":       {Kind: filters.String, Column: c.CampaignID},
		"campaign_type":     {Kind: filters.String, Column: c.CampaignType},
		"voucher_type":      {Kind: filters.String, Column: c.VoucherType},
	}
}

// SQL is a source's page on columns c: filter is the filter's condition
// ("" or starting with " AND "), for the total counted with countArgs;
// page follows it in the page's statement (the cursor's condition and
// the ORDER BY … LIMIT that ends it), run with pageArgs. Both argument
// lists start with args.
func (q Query) SQL(c Columns, args []any) (filter, page string, countArgs, pageArgs []any) {
	if !q.Filter.Empty() {
		var f string
		f, args = q.Filter.SQL(c.Fields(), args, q.Now)
		filter = " AND " + f
	}
	countArgs = args
	pageArgs = slices.Clone(args)
	cmp, dir := listq.Keyset(q.Desc)
	if q.After != "" {
		pageArgs = append(pageArgs, c.Prefix+strings.TrimPrefix(q.After, "rh_"))
		page = fmt.Sprintf(" AND %s %s $%d", c.Key, cmp, len(pageArgs))
	}
	pageArgs = append(pageArgs, q.Limit+1)
	page += fmt.Sprintf(" ORDER BY %s %s LIMIT $%d", c.Key, dir, len(pageArgs))
	return filter, page, countArgs, pageArgs
}

// HoldingID is the holding id of a voucher or card held by its holder_id.
func HoldingID(voucherID string) string { return "rh_" + strings.TrimPrefix(voucherID, "v_") }

// Customers finds the customer a wallet belongs to.
type Customers interface {
	Get(ctx context.Context, projectID, idOrSource string) (customers.Customer, error)
}

// Wallet answers customers' wallets from its sources.
type Wallet struct {
	customers Customers
	clock     *clock.Clock
	sources   []Source
}

// New returns the wallet over the holdings of sources.
// clk is the time statuses are computed at.
func New(cust Customers, clk *clock.Clock, sources ...Source) *Wallet {
	return &Wallet{customers: cust, clock: clk, sources: sources}
}

// List returns a page of the wallet of the customer named by id or
// source_id (404 when there is none), the total of the holdings the filter
// selects, whether more follow and the cursor that reads them.
func (w *Wallet) List(ctx context.Context, projectID, customer string, q Query) ([]View, int, bool, string, error) {
	c, err := w.customers.Get(ctx, projectID, customer)
	if err != nil {
		return nil, 0, false, "", err
	}
	q.CustomerID, q.Now = c.ID, w.clock.Now()
	var all []Holding
	total := 0
	for _, src := range w.sources {
		hs, n, err := src(ctx, projectID, q)
		if err != nil {
			return nil, 0, false, "", err
		}
		all, total = append(all, hs...), total+n
	}
	// Each source answered its first Limit+1 after the cursor, so the
	// first Limit+1 of them all are the page and the sign of more.
	slices.SortFunc(all, func(a, b Holding) int {
		if q.Desc {
			return strings.Compare(b.ID, a.ID)
		}
		return strings.Compare(a.ID, b.ID)
	})
	page, more, next := listq.PageOf(all, q.Limit, func(h Holding) string { return h.ID }, Holding.View)
	return page, total, more, next, nil
}
