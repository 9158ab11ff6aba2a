package vouchers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/bin"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/categories"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/vouchercodes"
	"github.com/tallyhq/tally/regional/webhooks"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/vouchers")

// Service holds the rules of vouchers and discount campaigns.
type Service struct {
	pool          *db.Pool
	clock         *clock.Clock
	notify        Notifier           // nil: none (tests of the package alone)
	camps         *campaigns.Service // the campaigns' rows and their notices
	onGiven       Hold               // nil: none
	publishCounts PublishCounts
	meta          MetadataSchemas
}

// MetadataSchemas checks the metadata a write leaves against the
// project's schema for its resource (metaschemas.Checker): 400
// metadata_validation_failed naming every failing key.
type MetadataSchemas interface {
	CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error
}

// CheckMetadata checks a voucher's metadata against the project's voucher
// schema, for the voucher jobs (imports, bulk and metadata updates).
func (s *Service) CheckMetadata(ctx context.Context, projectID string, md map[string]any) error {
	return s.meta.CheckMetadata(ctx, projectID, "voucher", md)
}

// Hold runs in the transaction that gives a voucher to a customer (a
// publication): regional/referrals' RecordReferrer records a referral
// code's referrer.
type Hold func(ctx context.Context, tx pgx.Tx, projectID string, v Voucher) error

// PublishCounts counts the publications of vouchers by id (and code),
// which regional/publications keeps: a voucher read's publish.count.
type PublishCounts func(ctx context.Context, q db.Querier, projectID string, ids, codes []string) (map[string]int64, error)

// counted fills in the views' publish.count.
func (s *Service) counted(ctx context.Context, projectID string, vs []View) error {
	if s.publishCounts == nil || len(vs) == 0 {
		return nil
	}
	ids, codes := make([]string, len(vs)), make([]string, len(vs))
	for i, v := range vs {
		ids[i], codes[i] = v.ID, v.Code
	}
	n, err := s.publishCounts(ctx, s.pool, projectID, ids, codes)
	if err != nil {
		return err
	}
	for i := range vs {
		vs[i].Publish.Count = n[vs[i].ID]
	}
	return nil
}

// viewOf is a voucher as the API answers it, publish.count included.
func (s *Service) viewOf(ctx context.Context, projectID string, v Voucher) (View, error) {
	vs := []View{v.View()}
	err := s.counted(ctx, projectID, vs)
	return vs[0], err
}

// NewService returns the voucher service (RemoveBinned is its bin
// Remover); notify raises the webhook notices of vouchers and gift balances,
// camps writes its campaigns' rows, publishCounts gives voucher reads their
// publish.count (nil: 0), hold runs when a voucher is given to a customer
// (nil: nothing).
func NewService(pool *db.Pool, notify Notifier, meta MetadataSchemas, camps *campaigns.Service, clk *clock.Clock,
	publishCounts PublishCounts, hold Hold) *Service {
	return &Service{pool: pool, notify: notify, meta: meta, camps: camps, clock: clk, publishCounts: publishCounts, onGiven: hold}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

// Request is the body of POST /v1/vouchers[/{code}] and PUT /v1/vouchers/{code}.
type Request struct {
	Code              *string         `json:"code"`
	Campaign          *string         `json:"campaign"`
	CampaignID        *string         `json:"campaign_id"`
	Category          *string         `json:"category"`
	CategoryID        *string         `json:"category_id"`
	Type              *string         `json:"type"`
	Discount          json.RawMessage `json:"discount"`
	Gift              json.RawMessage `json:"gift"`
	LoyaltyCard       json.RawMessage `json:"loyalty_card"`
	StartDate         *time.Time      `json:"start_date"`
	ExpirationDate    *time.Time      `json:"expiration_date"`
	ValidityTimeframe json.RawMessage `json:"validity_timeframe"`
	ValidityDayOfWeek json.RawMessage `json:"validity_day_of_week"`
	ValidityHours     json.RawMessage `json:"validity_hours"`
	Active            *bool           `json:"active"`
	AdditionalInfo    *string         `json:"additional_info"`
	Metadata          json.RawMessage `json:"metadata"`
	Redemption        *struct {
		Quantity *int64 `json:"quantity"`
	} `json:"redemption"`
	CodeConfig *codes.Config `json:"code_config"`
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

func textOK(name string, v *string, max int) error {
	if v != nil && len(*v) > max {
		return apierr.InvalidPayload(fmt.Sprintf("%s is at most %d characters", name, max))
	}
	return nil
}

// Apply checks r and writes what it sets into v (a new voucher, or the
// one a PUT changes).
func (r Request) Apply(v *Voucher, creating bool) error {
	for _, t := range []struct {
		name string
		v    *string
		max  int
	}{{"category", r.Category, 200}, {"category_id", r.CategoryID, 200}, {"additional_info", r.AdditionalInfo, 1000}} {
		if err := textOK(t.name, t.v, t.max); err != nil {
			return err
		}
	}
	if present(r.LoyaltyCard) || (r.Type != nil && *r.Type == "LOYALTY_CARD") {
		return apierr.InvalidPayload("type LOYALTY_CARD: loyalty cards are made in loyalty campaigns (POST /v1/loyalties/{campaignId}/members)")
	}
	if creating {
		if r.Type != nil && *r.Type != Discount && *r.Type != Gift {
			return apierr.InvalidPayload("type must be DISCOUNT_VOUCHER or GIFT_VOUCHER")
		}
		if r.Type != nil {
			v.Type = *r.Type
		}
	} else if r.Type != nil && *r.Type != v.Type {
		return apierr.InvalidPayload("type cannot change; this voucher is a " + v.Type)
	}
	a := &v.Attrs
	switch {
	case present(r.Discount):
		if v.Type != Discount {
			return apierr.InvalidPayload("discount applies to DISCOUNT_VOUCHER vouchers only")
		}
		d, err := CheckDiscount(r.Discount, "discount")
		if err != nil {
			return err
		}
		a.Discount = d
	case creating && v.Type == Discount && a.Discount == nil:
		return apierr.InvalidPayload("discount is required for a DISCOUNT_VOUCHER")
	}
	switch {
	case present(r.Gift):
		if v.Type != Gift {
			return apierr.InvalidPayload("gift applies to GIFT_VOUCHER vouchers only")
		}
		if !creating {
			return apierr.InvalidPayload("gift: a gift card's amount changes by its balance (POST /v1/vouchers/{code}/balance), not by an update")
		}
		g, err := CheckGift(r.Gift, "gift")
		if err != nil {
			return err
		}
		a.Gift = g
	case creating && v.Type == Gift && a.Gift == nil:
		return apierr.InvalidPayload("gift is required for a GIFT_VOUCHER: gift.amount in cents")
	}
	if err := campaigns.CheckValidity(r.ValidityTimeframe, r.ValidityDayOfWeek, r.ValidityHours); err != nil {
		return err
	}
	for _, f := range []struct{ dst, v *json.RawMessage }{{&a.ValidityTimeframe, &r.ValidityTimeframe},
		{&a.ValidityDayOfWeek, &r.ValidityDayOfWeek}, {&a.ValidityHours, &r.ValidityHours}} {
		if present(*f.v) {
			*f.dst = *f.v
		}
	}
	if r.StartDate != nil {
		t := r.StartDate.UTC()
		a.StartDate = &t
	}
	if r.ExpirationDate != nil {
		t := r.ExpirationDate.UTC()
		a.ExpirationDate = &t
	}
	if a.StartDate != nil && a.ExpirationDate != nil && !a.ExpirationDate.After(*a.StartDate) {
		return apierr.InvalidPayload("expiration_date must be after start_date")
	}
	if present(r.Metadata) {
		var m map[string]any
		if r.Metadata[0] != '{' || json.Unmarshal(r.Metadata, &m) != nil {
			return apierr.InvalidPayload("metadata must be an object")
		}
		a.Metadata = m
	}
	if r.AdditionalInfo != nil {
		a.AdditionalInfo = r.AdditionalInfo
	}
	// A category given (by name or id) replaces the one held, once
	// resolved (resolveCategory).
	if r.Category != nil || r.CategoryID != nil {
		v.Category, v.CategoryID, v.Cat = r.Category, r.CategoryID, nil
	}
	if r.Active != nil {
		v.Active = *r.Active
	}
	if r.Redemption != nil {
		if q := r.Redemption.Quantity; q != nil && (*q < 1 || *q > 1_000_000_000) {
			return apierr.InvalidPayload("redemption.quantity must be from 1 to 1000000000, or null for no limit")
		}
		v.Quantity = r.Redemption.Quantity
	}
	return nil
}

// Imported is the voucher an import's item r describes, with code (its
// id new): standalone (a gift card when r gives a gift and no type), or
// of camp, its template with r's own properties, whose type must be the
// campaign's. The error says in words why the item cannot be written.
func Imported(r Request, camp *Campaign, code string, now time.Time) (Voucher, error) {
	v := Voucher{ID: ids.New("v_"), Code: code, Type: Discount, Active: true, CreatedAt: now}
	if camp != nil {
		if r.Type != nil && *r.Type != camp.Attrs.Voucher.Type {
			return v, fmt.Errorf("type must be the campaign's voucher type, %s", camp.Attrs.Voucher.Type)
		}
		v = camp.Attrs.Voucher.voucher(*camp, code, now)
		v.ID = ids.New("v_")
	} else if r.Type == nil && present(r.Gift) {
		r.Type = ptr(Gift)
	}
	r.Code, r.Campaign, r.CampaignID = nil, nil, nil
	if err := r.Apply(&v, camp == nil); err != nil {
		return v, errors.New(apierr.From(err).Details)
	}
	return v, nil
}

// Create makes a voucher: with code (from the path or the body), or with a
// code made from code_config. A code any voucher or card of the project
// holds is 409.
func (s *Service) Create(ctx context.Context, projectID, pathCode string, r Request) (_ View, err error) {
	ctx, span := tracer.Start(ctx, "vouchers.Create")
	defer telemetry.End(span, &err)
	code := pathCode
	if code == "" && r.Code != nil {
		code = *r.Code
	}
	if code != "" {
		if strings.TrimSpace(code) == "" || len(code) > 250 {
			return View{}, apierr.InvalidPayload("code must be 1 to 250 characters, not only spaces")
		}
	}
	cc := codes.Config{}
	if r.CodeConfig != nil {
		cc = *r.CodeConfig
	}
	now := s.now()
	var v Voucher
	var camp *Campaign
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		v, camp = Voucher{ID: ids.New("v_"), Code: code, Type: Discount, Active: true, CreatedAt: now}, nil
		if key := firstOf(r.CampaignID, r.Campaign); key != "" {
			c, err := s.CampaignShared(ctx, tx, projectID, key)
			if err != nil {
				return err
			}
			camp = &c
			v = c.Attrs.Voucher.voucher(c, code, now)
			v.ID = ids.New("v_")
			if r.CodeConfig == nil {
				cc = c.Attrs.Voucher.CodeConfig
			}
		}
		if err := r.Apply(&v, true); err != nil {
			return err
		}
		if err := s.CheckMetadata(ctx, projectID, v.Attrs.Metadata); err != nil {
			return err
		}
		if camp != nil && v.Type != camp.Attrs.Voucher.Type {
			return apierr.InvalidPayload("type must be the campaign's voucher type, " + camp.Attrs.Voucher.Type)
		}
		if err := resolveCategory(ctx, tx, projectID, &v, now); err != nil {
			return err
		}
		if v.Code == "" {
			gen, err := codes.New(cc)
			if err != nil {
				return err
			}
			if err := gen.Check(1); err != nil {
				return err
			}
			for i := 0; ; i++ {
				v.Code = gen.Next()
				took, err := vouchercodes.Take(ctx, tx, vouchercodes.Held{Project: projectID, Code: v.Code, Voucher: v.ID})
				if err != nil {
					return err
				}
				if took {
					break
				}
				if i == 20 {
					return apierr.InvalidPayload("code_config: no free code found in 20 tries; widen the charset or lengthen the code")
				}
			}
		} else if err := registerCode(ctx, tx, vouchercodes.Held{Project: projectID, Code: v.Code, Voucher: v.ID}); err != nil {
			return err
		}
		if err := insertVoucher(ctx, tx, projectID, v); err != nil {
			return err
		}
		b := &pgx.Batch{}
		if g := v.Attrs.Gift; g != nil && g.Amount > 0 {
			campaignID := ""
			if camp != nil {
				campaignID = camp.ID
			}
			loyalty.QueueOpeningEntries(b, projectID, campaignID, []string{v.ID}, g.Amount, openingDetails(v), now)
		}
		if camp != nil {
			if err := campaigns.AddVouchersCount(ctx, tx, projectID, camp.ID, 1); err != nil {
				return err
			}
		}
		return s.queueNotice(ctx, tx, b, projectID, EventVoucherCreated, v)
	})
	if err != nil {
		return View{}, err
	}
	return v.View(), nil
}

// resolveCategory makes the category v names (by name or id, from the
// request or its campaign) one of the project's categories
// (categories.Resolve), in tx.
func resolveCategory(ctx context.Context, tx pgx.Tx, projectID string, v *Voucher, now time.Time) error {
	return categoryCache{}.resolve(ctx, tx, projectID, v, now)
}

// categoryCache is resolveCategory for the many vouchers of one
// transaction (an import's chunk): each name or id is looked up once.
type categoryCache map[[2]string]*categories.Category

func (cc categoryCache) resolve(ctx context.Context, tx pgx.Tx, projectID string, v *Voucher, now time.Time) error {
	key := func(s *string) string {
		if s == nil {
			return "-"
		}
		return "+" + *s
	}
	k := [2]string{key(v.Category), key(v.CategoryID)}
	c, ok := cc[k]
	if !ok {
		var err error
		if c, err = categories.Resolve(ctx, tx, projectID, v.Category, v.CategoryID, now); err != nil {
			return err
		}
		cc[k] = c
	}
	if v.Cat = c; c != nil {
		v.Category, v.CategoryID = &c.Name, &c.ID
	}
	return nil
}

// Webhook event types of vouchers, as the reference names them.
const (
	EventVoucherCreated  = "voucher.created"
	EventVoucherUpdated  = "voucher.updated"
	EventVoucherDeleted  = "voucher.deleted"
	EventVoucherEnabled  = "voucher.enabled"
	EventVoucherDisabled = "voucher.disabled"
	// EventVoucherPublished is raised by publications (and loyalty cards' joins).
	EventVoucherPublished = loyalty.EventVoucherPublished
)

// queueNotice adds a voucher's webhook notice to b and sends b in tx.
func (s *Service) queueNotice(ctx context.Context, tx pgx.Tx, b *pgx.Batch, projectID, event string, v Voucher) error {
	if s.notify != nil {
		if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: event, Entity: v.ID,
			Object: map[string]any{"voucher": v.View()}}); err != nil {
			return err
		}
	}
	return tx.SendBatch(ctx, b).Close()
}

func firstOf(ss ...*string) string {
	for _, s := range ss {
		if s != nil && *s != "" {
			return *s
		}
	}
	return ""
}

// Get returns a voucher by code or id.
func (s *Service) Get(ctx context.Context, projectID, code string) (View, error) {
	v, err := getVoucher(ctx, s.pool, projectID, code, false)
	if err != nil {
		return View{}, err
	}
	return s.viewOf(ctx, projectID, v)
}

// Update changes the properties a PUT names.
func (s *Service) Update(ctx context.Context, projectID, code string, r Request) (View, error) {
	if r.Code != nil && *r.Code != code {
		return View{}, apierr.InvalidPayload("code cannot change")
	}
	if r.CodeConfig != nil {
		return View{}, apierr.InvalidPayload("code_config applies to new vouchers only")
	}
	if r.Campaign != nil || r.CampaignID != nil {
		return View{}, apierr.InvalidPayload("a voucher's campaign cannot change")
	}
	var v Voucher
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if v, err = getVoucher(ctx, tx, projectID, code, true); err != nil {
			return err
		}
		if err := r.Apply(&v, false); err != nil {
			return err
		}
		// A voucher's metadata is replaced whole when sent.
		if present(r.Metadata) {
			if err := s.CheckMetadata(ctx, projectID, v.Attrs.Metadata); err != nil {
				return err
			}
		}
		now := s.now()
		if r.Category != nil || r.CategoryID != nil {
			if err := resolveCategory(ctx, tx, projectID, &v, now); err != nil {
				return err
			}
		}
		v.UpdatedAt = &now
		if err := updateVoucher(ctx, tx, projectID, v); err != nil {
			return err
		}
		return s.queueNotice(ctx, tx, &pgx.Batch{}, projectID, EventVoucherUpdated, v)
	})
	if err != nil {
		return View{}, err
	}
	return s.viewOf(ctx, projectID, v)
}

// SetActive enables or disables a voucher.
func (s *Service) SetActive(ctx context.Context, projectID, code string, active bool) (View, error) {
	var v Voucher
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if v, err = getVoucher(ctx, tx, projectID, code, true); err != nil {
			return err
		}
		now := s.now()
		v.Active, v.UpdatedAt = active, &now
		if err := updateVoucher(ctx, tx, projectID, v); err != nil {
			return err
		}
		return s.queueNotice(ctx, tx, &pgx.Batch{}, projectID, map[bool]string{true: EventVoucherEnabled, false: EventVoucherDisabled}[active], v)
	})
	if err != nil {
		return View{}, err
	}
	return s.viewOf(ctx, projectID, v)
}

// Delete moves a voucher to the bin (its code stays taken until the bin's
// entry is removed) or, with force, deletes it for good and frees its code.
func (s *Service) Delete(ctx context.Context, projectID, code string, force bool) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		v, err := getVoucher(ctx, tx, projectID, code, true)
		if err != nil {
			return err
		}
		if err := s.queueNotice(ctx, tx, &pgx.Batch{}, projectID, EventVoucherDeleted, v); err != nil {
			return err
		}
		if force {
			return deleteForGood(ctx, tx, vouchercodes.Held{Project: projectID, Code: v.Code, Voucher: v.ID})
		}
		e := bin.Entry{ID: bin.NewID(), ResourceType: "voucher", ResourceID: v.ID, ResourceName: &v.Code, CreatedAt: s.now()}
		b := &pgx.Batch{}
		b.Queue(`UPDATE vouchers SET bin_id = $3 WHERE project_id = $1 AND id = $2`, projectID, v.ID, e.ID)
		bin.Put(b, projectID, []bin.Entry{e})
		return tx.SendBatch(ctx, b).Close()
	})
}

func deleteForGood(ctx context.Context, tx pgx.Tx, h vouchercodes.Held) error {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM vouchers WHERE project_id = $1 AND id = $2`, h.Project, h.Voucher)
	vouchercodes.QueueFree(b, h.Project, []string{h.Voucher}, []string{h.Code})
	loyalty.QueueDropEntries(b, h.Project, []string{h.Voucher})
	return tx.SendBatch(ctx, b).Close()
}

// RemoveBinned deletes a binned voucher for good (the bin's Remover of
// vouchers).
func (s *Service) RemoveBinned(ctx context.Context, tx pgx.Tx, projectID string, e bin.Entry) error {
	code := ""
	if e.ResourceName != nil {
		code = *e.ResourceName
	}
	return deleteForGood(ctx, tx, vouchercodes.Held{Project: projectID, Code: code, Voucher: e.ResourceID})
}

// ParseList reads GET /v1/vouchers' query.
func ParseList(q url.Values) (ListQuery, error) {
	var lq ListQuery
	var err error
	if lq.Query, err = listq.Parse(q, listq.Spec{DefaultLimit: 10, Orders: []string{"-created_at", "created_at",
		"updated_at", "-updated_at", "code", "-code"}, Pages: true, MaxPage: 99}); err != nil {
		return lq, err
	}
	lq.CampaignID = firstOf(ptr(q.Get("campaign_id")), ptr(q.Get("campaign")))
	lq.Category, lq.Customer, lq.Code = q.Get("category"), q.Get("customer"), q.Get("code")
	lq.IDs = append(q["ids"], q["ids[]"]...)
	for _, t := range []struct {
		param string
		dst   **time.Time
	}{{"created_at[after]", &lq.CreatedAfter}, {"created_at[before]", &lq.CreatedBefore},
		{"updated_at[after]", &lq.UpdatedAfter}, {"updated_at[before]", &lq.UpdatedBefore}} {
		if s := q.Get(t.param); s != "" {
			v, err := time.Parse(time.RFC3339, s)
			if err != nil {
				if v, err = time.Parse(time.DateOnly, s); err != nil {
					return lq, apierr.InvalidQuery(t.param, "must be a date-time (RFC 3339) or a date")
				}
			}
			*t.dst = &v
		}
	}
	lq.Filter, err = filters.Parse(q, listFields)
	return lq, err
}

func ptr[T any](v T) *T { return &v }

// List returns a page of vouchers.
func (s *Service) List(ctx context.Context, projectID string, lq ListQuery) ([]View, int, bool, string, error) {
	if lq.CampaignID != "" {
		c, err := s.Campaign(ctx, s.pool, projectID, lq.CampaignID, false)
		if err != nil {
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Status != 404 {
				return nil, 0, false, "", err
			}
			return []View{}, 0, false, "", nil // no such campaign: no vouchers
		}
		lq.CampaignID = c.ID
	}
	vs, total, err := listVouchers(ctx, s.pool, projectID, lq, s.now())
	if err != nil {
		return nil, 0, false, "", err
	}
	out, more, next := listq.PageOf(vs, lq.Limit, func(v Voucher) string { return v.ID }, Voucher.View)
	if err := s.counted(ctx, projectID, out); err != nil {
		return nil, 0, false, "", err
	}
	return out, total, more, next, nil
}
