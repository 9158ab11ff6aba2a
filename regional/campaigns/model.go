package campaigns

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/categories"
)

// Types are the interface's campaign types.
var Types = []string{"PROMOTION", "GIFT_VOUCHERS", "REFERRAL_PROGRAM", "DISCOUNT_COUPONS", "LOYALTY_PROGRAM"}

const typesList = "PROMOTION, GIFT_VOUCHERS, REFERRAL_PROGRAM, DISCOUNT_COUPONS or LOYALTY_PROGRAM"

// Webhook event types of every campaign type.
const (
	EventCreated  = "campaign.created"
	EventUpdated  = "campaign.updated"
	EventDeleted  = "campaign.deleted"
	EventEnabled  = "campaign.enabled"
	EventDisabled = "campaign.disabled"
	// EventGenerationCompleted is raised when CAMPAIGN.VOUCHERS_GENERATE
	// has made every voucher of a campaign.
	EventGenerationCompleted = "campaign.vouchers.generation.completed"
)

// The async actions of every campaign type: making a campaign's vouchers
// (or cards), and deleting a deleted campaign's for good. Each runs the
// part of the campaign's Kind.
const (
	GenerateJob = "CAMPAIGN.VOUCHERS_GENERATE"
	DeleteJob   = "CAMPAIGN.VOUCHERS_DELETE"
)

// HolderRef names a customer's place in a campaign, in a project: the
// card, gift card or voucher of Campaign that Customer holds or is given.
// Campaign is the campaign's id, or its name where a function says so.
type HolderRef struct {
	Project, Campaign, Customer string
}

// Campaign is a campaign of any type, a row of the campaigns table; V is
// its voucher template, the only part its kind's package adds.
type Campaign[V any] struct {
	ID           string
	Name         string
	CampaignType string
	Attrs        Attrs[V]
	// VouchersCount is the sum of the campaign's counter rows
	// (campaign_voucher_counts): read by Get and the lists, not by the card
	// reads that join the campaign (0 there).
	VouchersCount    int64
	GenerationStatus string
	CreatedAt        time.Time
	UpdatedAt        *time.Time
}

// Attrs are a campaign's properties kept as a document, of any type: V is
// its voucher template.
type Attrs[V any] struct {
	Description *string `json:"description"`
	Type        string  `json:"type"`              // AUTO_UPDATE or STATIC
	Voucher     V       `json:"voucher,omitempty"` // none for PROMOTION campaigns
	Terms
	StartDate      *time.Time     `json:"start_date"`
	ExpirationDate *time.Time     `json:"expiration_date"`
	Active         bool           `json:"active"`
	Metadata       map[string]any `json:"metadata"`
	Category       *string        `json:"category"`
	CategoryID     *string        `json:"category_id"`
	// Cat is the category CategoryID names, as the categories table has it
	// now (read with the campaign, or resolved by SetCategory): the view's
	// categories. Not stored: the document keeps only the name and id.
	Cat *categories.Category `json:"-"`
	// ReferralProgram is a REFERRAL_PROGRAM's conversion and rewards,
	// Promotion a PROMOTION's tiers as created.
	ReferralProgram json.RawMessage `json:"referral_program,omitempty"`
	Promotion       json.RawMessage `json:"promotion,omitempty"`
}

// Terms are how customers join a campaign and when its vouchers may be
// used, stored in its attrs document and shown in its view as they are:
// both embed them, at the same place.
type Terms struct {
	AutoJoin                        bool            `json:"auto_join"`
	JoinOnce                        bool            `json:"join_once"`
	UseVoucherMetadataSchema        bool            `json:"use_voucher_metadata_schema"`
	ValidityTimeframe               json.RawMessage `json:"validity_timeframe,omitempty"`
	ValidityDayOfWeek               json.RawMessage `json:"validity_day_of_week,omitempty"`
	ValidityHours                   json.RawMessage `json:"validity_hours,omitempty"`
	ActivityDurationAfterPublishing *string         `json:"activity_duration_after_publishing"`
}

// View is the reference shape of a campaign, of any type: V is its
// voucher template (a loyalty card's, a discount or gift voucher's).
type View[V any] struct {
	ID           string  `json:"id"`
	Name         string  `json:"name"`
	Description  *string `json:"description"`
	CampaignType string  `json:"campaign_type"`
	Type         string  `json:"type"`
	Voucher      V       `json:"voucher,omitempty"` // none for PROMOTION campaigns
	Terms
	VouchersCount            int64             `json:"vouchers_count"`
	StartDate                *jsonx.Time       `json:"start_date"`
	ExpirationDate           *jsonx.Time       `json:"expiration_date"`
	Active                   bool              `json:"active"`
	Metadata                 map[string]any    `json:"metadata"`
	CreatedAt                jsonx.Time        `json:"created_at"`
	UpdatedAt                *jsonx.Time       `json:"updated_at"`
	Category                 *string           `json:"category"`
	CategoryID               *string           `json:"category_id"`
	Categories               []categories.View `json:"categories"`
	CreationStatus           string            `json:"creation_status"`
	VouchersGenerationStatus string            `json:"vouchers_generation_status"`
	ReferralProgram          json.RawMessage   `json:"referral_program,omitempty"`
	Promotion                json.RawMessage   `json:"promotion,omitempty"`
	Readonly                 bool              `json:"readonly"`
	Protected                bool              `json:"protected"`
	Object                   string            `json:"object"`
	AsyncActionID            *string           `json:"async_action_id,omitempty"`
}

// ViewOf renders the campaign.
func (c Campaign[V]) ViewOf() View[V] {
	a := c.Attrs
	meta := a.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	return View[V]{ID: c.ID, Name: c.Name, Description: a.Description, CampaignType: c.CampaignType, Type: a.Type,
		Voucher: a.Voucher, Terms: a.Terms, VouchersCount: c.VouchersCount,
		StartDate: jsonx.Ptr(a.StartDate), ExpirationDate: jsonx.Ptr(a.ExpirationDate), Active: a.Active, Metadata: meta,
		CreatedAt: jsonx.Time{Time: c.CreatedAt}, UpdatedAt: jsonx.Ptr(c.UpdatedAt), Category: a.Category,
		CategoryID: a.CategoryID, Categories: a.categories(), CreationStatus: "DONE", VouchersGenerationStatus: c.GenerationStatus,
		ReferralProgram: a.ReferralProgram, Promotion: a.Promotion, Object: "campaign"}
}

// categories is the campaign's categories array: its category, or none.
func (a Attrs[V]) categories() []categories.View {
	if a.Cat == nil {
		return []categories.View{}
	}
	return []categories.View{a.Cat.View()}
}

// Window is what deciding whether a campaign admits use needs of it: read
// without its attrs document's voucher template and metadata.
type Window struct {
	ID, Name, CampaignType string
	CategoryID             string // "" for none
	Validity
}

// Validity is when a campaign, a voucher or a promotion tier may be used:
// active, between its start and expiration dates, and within its validity
// timeframe, days of the week and hours. The engine's Window checks it.
type Validity struct {
	Active            bool
	StartDate         *time.Time
	ExpirationDate    *time.Time
	ValidityTimeframe json.RawMessage
	ValidityDayOfWeek json.RawMessage
	ValidityHours     json.RawMessage
}

// CommonUpdate are the properties of PUT /v1/campaigns/{campaignId} (and PUT
// /v1/loyalties/{campaignId}) that every campaign type has: those present
// replace the stored ones.
type CommonUpdate struct {
	Description *string `json:"description"`
	Type        *string `json:"type"`
	AutoJoin    *bool   `json:"auto_join"`
	JoinOnce    *bool   `json:"join_once"`
	WindowUpdate
	ActivityDurationAfterPublishing *string        `json:"activity_duration_after_publishing"`
	Metadata                        map[string]any `json:"metadata"`
	Category                        *string        `json:"category"`
	CategoryID                      *string        `json:"category_id"`
}

// ApplyCommon writes the properties present in r into a.
func ApplyCommon[V any](a *Attrs[V], r CommonUpdate) error {
	if r.Type != nil && *r.Type != "AUTO_UPDATE" && *r.Type != "STATIC" {
		return apierr.InvalidPayload("type must be AUTO_UPDATE or STATIC")
	}
	if err := CheckText("description", r.Description); err != nil {
		return err
	}
	set := func(dst **string, v *string) {
		if v != nil {
			*dst = v
		}
	}
	set(&a.Description, r.Description)
	set(&a.ActivityDurationAfterPublishing, r.ActivityDurationAfterPublishing)
	// A category by name or by id replaces the one held (resolved by
	// Service.Change).
	if r.Category != nil || r.CategoryID != nil {
		a.Category, a.CategoryID = r.Category, r.CategoryID
	}
	if r.Type != nil {
		a.Type = *r.Type
	}
	for _, b := range []struct{ dst, v *bool }{{&a.AutoJoin, r.AutoJoin}, {&a.JoinOnce, r.JoinOnce}} {
		if b.v != nil {
			*b.dst = *b.v
		}
	}
	if err := r.WindowUpdate.Apply(&a.StartDate, &a.ExpirationDate, &a.ValidityTimeframe, &a.ValidityDayOfWeek, &a.ValidityHours, NullClears); err != nil {
		return err
	}
	if r.Metadata != nil {
		a.Metadata = r.Metadata
	}
	return nil
}

// WindowUpdate is the dates and validity (timeframe, days of the week,
// hours) a campaign's creation or update or a promotion tier's body gives,
// each nil when absent: all three embed it.
type WindowUpdate struct {
	StartDate         *time.Time      `json:"start_date"`
	ExpirationDate    *time.Time      `json:"expiration_date"`
	ValidityTimeframe json.RawMessage `json:"validity_timeframe"`
	ValidityDayOfWeek json.RawMessage `json:"validity_day_of_week"`
	ValidityHours     json.RawMessage `json:"validity_hours"`
}

// NullValidity is what a validity given as JSON null does to the one held.
type NullValidity bool

const (
	// NullClears keeps the null as given, so the view shows null (a
	// campaign's).
	NullClears NullValidity = true
	// NullIgnored leaves the one held (a promotion tier's).
	NullIgnored NullValidity = false
)

// Apply writes the dates and validity present in u onto those held, and
// refuses an expiration_date not after the start_date that results.
func (u WindowUpdate) Apply(start, expiration **time.Time, timeframe, dayOfWeek, hours *json.RawMessage, null NullValidity) error {
	if u.StartDate != nil {
		*start = u.StartDate
	}
	if u.ExpirationDate != nil {
		*expiration = u.ExpirationDate
	}
	if *start != nil && *expiration != nil && !(*expiration).After(**start) {
		return apierr.InvalidPayload("expiration_date must be after start_date")
	}
	for _, f := range []struct {
		dst *json.RawMessage
		v   json.RawMessage
	}{{timeframe, u.ValidityTimeframe}, {dayOfWeek, u.ValidityDayOfWeek}, {hours, u.ValidityHours}} {
		if len(f.v) > 0 && (null == NullClears || string(f.v) != "null") {
			*f.dst = f.v
		}
	}
	return nil
}

// CheckText refuses text longer than the API stores.
func CheckText(name string, v *string) error {
	if v != nil && len(*v) > 1000 {
		return apierr.InvalidPayload(name + " is at most 1000 characters")
	}
	return nil
}

// Period is the span of a campaign summary: from (inclusive) and to
// (exclusive), either open.
type Period struct{ From, To *time.Time }

// Cond is the condition that col is within p, its bounds appended to args.
func (p Period) Cond(col string, args []any) (string, []any) {
	args = append(args, p.From, p.To)
	f, t := len(args)-1, len(args)
	return fmt.Sprintf(` AND ($%d::TIMESTAMPTZ IS NULL OR %s >= $%d) AND ($%d::TIMESTAMPTZ IS NULL OR %s < $%d)`,
		f, col, f, t, col, t), args
}

// GenerateParams are CAMPAIGN.VOUCHERS_GENERATE's (and, CampaignID alone,
// CAMPAIGN.VOUCHERS_DELETE's): the campaign, and how many vouchers (or
// cards) this job makes. Count is 0 in a job queued before it was
// recorded: the job then makes what the campaign's count still lacks, as
// all jobs once did.
type GenerateParams struct {
	CampaignID string `json:"campaign_id"`
	Count      int64  `json:"count,omitempty"`
}

// CreateRequest are the properties of POST /v1/campaigns that every type
// with vouchers has (loyalty programs, discount, gift and referral
// campaigns), which each kind's request embeds with its own (its voucher
// template, its metadata).
type CreateRequest struct {
	Name                     *string `json:"name"`
	Description              *string `json:"description"`
	CampaignType             *string `json:"campaign_type"`
	Type                     *string `json:"type"`
	VouchersCount            *int64  `json:"vouchers_count"`
	AutoJoin                 *bool   `json:"auto_join"`
	JoinOnce                 *bool   `json:"join_once"`
	UseVoucherMetadataSchema *bool   `json:"use_voucher_metadata_schema"`
	WindowUpdate
	ActivityDurationAfterPublishing *string `json:"activity_duration_after_publishing"`
	Category                        *string `json:"category"`
	CategoryID                      *string `json:"category_id"`
}

// New starts a campaign of campaignType, created at now, from the
// properties of r that need no more than reading: its name, AUTO_UPDATE
// and active unless r says otherwise, the flags, description, activity
// duration and vouchers_count. The kind checks and sets the rest (dates
// and validity, metadata, its template).
func New[V any](r CreateRequest, campaignType string, now time.Time) (Campaign[V], error) {
	if r.Name == nil || strings.TrimSpace(*r.Name) == "" {
		return Campaign[V]{}, apierr.InvalidPayload("name is required")
	}
	if len(*r.Name) > 200 {
		return Campaign[V]{}, apierr.InvalidPayload("name is at most 200 characters")
	}
	c := Campaign[V]{ID: ids.New("camp_"), Name: *r.Name, CampaignType: campaignType, GenerationStatus: "DONE", CreatedAt: now}
	a := &c.Attrs
	a.Type, a.Active, a.Description, a.ActivityDurationAfterPublishing = "AUTO_UPDATE", true, r.Description, r.ActivityDurationAfterPublishing
	if r.Type != nil {
		if *r.Type != "AUTO_UPDATE" && *r.Type != "STATIC" {
			return Campaign[V]{}, apierr.InvalidPayload("type must be AUTO_UPDATE or STATIC")
		}
		a.Type = *r.Type
	}
	for _, b := range []struct{ dst, v *bool }{{&a.AutoJoin, r.AutoJoin}, {&a.JoinOnce, r.JoinOnce},
		{&a.UseVoucherMetadataSchema, r.UseVoucherMetadataSchema}} {
		if b.v != nil {
			*b.dst = *b.v
		}
	}
	if r.VouchersCount != nil {
		c.VouchersCount = *r.VouchersCount
	}
	return c, nil
}

// VoucherFilter narrows a list of a campaign's vouchers or of a program's
// members (loyalty cards) as the reference's lists do: by holder (a
// customer id), code, ids, and creation and update times (exclusive
// bounds).
type VoucherFilter struct {
	Customer, Code              string
	IDs                         []string
	CreatedAfter, CreatedBefore *time.Time
	UpdatedAfter, UpdatedBefore *time.Time
}

// Where adds f's conditions through add (a condition with one %d for its
// placeholder, and its value), on the columns of the table alias prefix
// names ("" or "v."): a card's and a voucher's are named alike, so both
// lists read these filters through this one place.
func (f VoucherFilter) Where(prefix string, add func(sql string, v any)) {
	if f.Customer != "" {
		add(prefix+"holder_id = $%d", f.Customer)
	}
	if f.Code != "" {
		add(prefix+"code = $%d", f.Code)
	}
	if len(f.IDs) > 0 {
		add(prefix+"id = ANY($%d::TEXT[])", f.IDs)
	}
	updated := "COALESCE(" + prefix + "updated_at, " + prefix + "created_at)"
	for _, t := range []struct {
		sql string
		v   *time.Time
	}{{prefix + "created_at > $%d", f.CreatedAfter}, {prefix + "created_at < $%d", f.CreatedBefore},
		{updated + " > $%d", f.UpdatedAfter}, {updated + " < $%d", f.UpdatedBefore}} {
		if t.v != nil {
			add(t.sql, *t.v)
		}
	}
}
