package referrals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/regional/vouchers/campaign"
	"github.com/tallyhq/tally/regional/webhooks"
	"github.com/tallyhq/tally/tenancy"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/referrals")

// Notifier raises webhook notices in the caller's transaction.
type Notifier interface {
	Emit(ctx context.Context, tx db.Querier, n webhooks.Notice) error
}

// Schemas returns a project's custom event schemas (the directory's,
// through the cached resolver): a program converting on a custom event
// names one of them.
type Schemas func(ctx context.Context, projectID string) ([]tenancy.EventSchema, error)

// Service runs referral programs.
type Service struct {
	pool      *db.Pool
	notify    Notifier
	customers *customers.Service
	loyalty   *loyalty.Service
	vouchers  *vouchers.Service
	codes     *campaign.Service  // the campaigns of referral codes
	camps     *campaigns.Service // the programs' rows and their notices
	schemas   Schemas
	segments  Segments
	clock     *clock.Clock
}

// Segments are the project's customer segments a referral tier may
// require (regional/segments): whether one exists, and which a customer is
// in, as validation rules read it (stored and live).
type Segments interface {
	Exists(ctx context.Context, projectID, id string) error
	Of(ctx context.Context, q db.Querier, projectID string, c customers.Customer) ([]string, error)
}

// NewService returns the referral service (a referral code published to a
// customer makes them its referrer through RecordReferrer, which app.go
// gives vouchers.NewService). What it gives customers is given to them by
// app.go: a customer's answer reads their referrals summary from Summary
// (customers.Referrals), and a deleted customer's holdings and referrals go
// with them (DropCustomer, a customers.Dependent).
func NewService(pool *db.Pool, notify Notifier, camps *campaigns.Service, cust *customers.Service, loy *loyalty.Service, vs *vouchers.Service,
	codes *campaign.Service, schemas Schemas, segs Segments, clk *clock.Clock) *Service {
	s := &Service{pool: pool, notify: notify, camps: camps, customers: cust, loyalty: loy, vouchers: vs, codes: codes, schemas: schemas, segments: segs,
		clock: clk}
	return s
}

// DropCustomer deletes a deleted customer's holdings and the referrals
// that converted them, in the customer's deletion (a customers.Dependent).
func DropCustomer(ctx context.Context, tx pgx.Tx, projectID, customerID string) error {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM referral_holders WHERE project_id = $1 AND customer_id = $2`, projectID, customerID)
	b.Queue(`DELETE FROM referrals WHERE project_id = $1 AND referee_id = $2`, projectID, customerID)
	return tx.SendBatch(ctx, b).Close()
}

// The limits of a program.
const (
	maxTiers  = 10
	maxAmount = 1_000_000_000 // points, or cents
)

// rewardInput is a reward as a request writes it.
type rewardInput struct {
	RelatedObjectParent *struct {
		ID *string `json:"id"`
	} `json:"related_object_parent"`
	Type   *string `json:"type"`
	Amount *int64  `json:"amount"`
}

// programInput is referral_program as a request writes it.
type programInput struct {
	ConversionEventType *string `json:"conversion_event_type"`
	CustomEvent         *struct {
		ID   *string `json:"id"`
		Name *string `json:"name"`
	} `json:"custom_event"`
	RefereeReward *rewardInput `json:"referee_reward"`
	ReferralTiers []struct {
		ID         *string `json:"id"`
		Banner     *string `json:"banner"`
		Parameters *struct {
			Type     *string      `json:"type"`
			Referees *int64       `json:"referees"`
			Reward   *rewardInput `json:"reward"`
			Segment  *struct {
				ID *string `json:"id"`
			} `json:"segment"`
		} `json:"parameters"`
	} `json:"referral_tiers"`
}

// checkProgram reads a request's referral_program: the custom event names
// one of the project's event schemas, rewards name live loyalty or gift
// campaigns of the project, and tiers keep the ids of old's tiers that they
// name (an update's) or get new ones.
func (s *Service) checkProgram(ctx context.Context, q db.Querier, projectID string, raw json.RawMessage, old *Program) (Program, error) {
	var in programInput
	if len(raw) == 0 || raw[0] != '{' {
		return Program{}, apierr.InvalidPayload("referral_program must be an object: {conversion_event_type, custom_event, referee_reward, referral_tiers}")
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return Program{}, apierr.InvalidPayload("referral_program does not read: " + err.Error())
	}
	var p Program
	switch t := in.ConversionEventType; {
	case t == nil:
		return Program{}, apierr.InvalidPayload("referral_program.conversion_event_type is required: redemption or custom_event")
	case *t == ViaRedemption:
		if in.CustomEvent != nil {
			return Program{}, apierr.InvalidPayload("referral_program.custom_event goes with conversion_event_type custom_event")
		}
	case *t == ViaCustomEvent:
		if in.CustomEvent == nil || (in.CustomEvent.ID == nil && in.CustomEvent.Name == nil) {
			return Program{}, apierr.InvalidPayload("referral_program.custom_event is required with conversion_event_type custom_event: {id or name of an event schema}")
		}
		ce, err := s.customEvent(ctx, projectID, in.CustomEvent.ID, in.CustomEvent.Name)
		if err != nil {
			return Program{}, err
		}
		p.CustomEvent = &ce
	default:
		return Program{}, apierr.InvalidPayload("referral_program.conversion_event_type must be redemption or custom_event")
	}
	p.ConversionEventType = *in.ConversionEventType
	if in.RefereeReward != nil {
		rw, err := checkReward(ctx, q, projectID, in.RefereeReward, "referral_program.referee_reward")
		if err != nil {
			return Program{}, err
		}
		p.RefereeReward = &rw
	}
	if len(in.ReferralTiers) > maxTiers {
		return Program{}, apierr.InvalidPayload(fmt.Sprintf("referral_program.referral_tiers has at most %d tiers", maxTiers))
	}
	for i, t := range in.ReferralTiers {
		at := fmt.Sprintf("referral_program.referral_tiers[%d]", i)
		if err := loyalty.CheckText(at+".banner", t.Banner); err != nil {
			return Program{}, err
		}
		tp := t.Parameters
		if tp == nil || tp.Reward == nil {
			return Program{}, apierr.InvalidPayload(at + ".parameters is required: {type, referees, reward}")
		}
		tier := Tier{ID: ids.New("rt_"), Banner: t.Banner, Parameters: TierParameters{Referees: 1}}
		if t.ID != nil && old != nil && slices.ContainsFunc(old.ReferralTiers, func(o Tier) bool { return o.ID == *t.ID }) {
			tier.ID = *t.ID
		}
		switch {
		case tp.Type == nil || (*tp.Type != EachReferee && *tp.Type != EveryNReferees):
			return Program{}, apierr.InvalidPayload(at + ".parameters.type must be EACH_REFEREE or EVERY_N_REFEREES")
		case *tp.Type == EveryNReferees && (tp.Referees == nil || *tp.Referees < 1 || *tp.Referees > 1_000_000):
			return Program{}, apierr.InvalidPayload(at + ".parameters.referees is required with EVERY_N_REFEREES: from 1 to 1000000")
		case *tp.Type == EachReferee && tp.Referees != nil && *tp.Referees != 1:
			return Program{}, apierr.InvalidPayload(at + ".parameters.referees is 1 (or absent) with EACH_REFEREE")
		case *tp.Type == EveryNReferees:
			tier.Parameters.Referees = *tp.Referees
		}
		tier.Parameters.Type = *tp.Type
		rw, err := checkReward(ctx, q, projectID, tp.Reward, at+".parameters.reward")
		if err != nil {
			return Program{}, err
		}
		tier.Parameters.Reward = rw
		if sg := tp.Segment; sg != nil {
			if sg.ID == nil || *sg.ID == "" {
				return Program{}, apierr.InvalidPayload(at + ".parameters.segment.id is required: the segment a referee must be in to count")
			}
			if err := s.segments.Exists(ctx, projectID, *sg.ID); err != nil {
				return Program{}, err
			}
			tier.Parameters.Segment = &SegmentRef{ID: *sg.ID}
		}
		p.ReferralTiers = append(p.ReferralTiers, tier)
	}
	return p, nil
}

// customEvent finds the event schema a program converts on, by id or name.
func (s *Service) customEvent(ctx context.Context, projectID string, id, name *string) (CustomEvent, error) {
	if s.schemas == nil {
		return CustomEvent{}, apierr.Unavailable("Custom event schemas cannot be read on this instance.")
	}
	all, err := s.schemas(ctx, projectID)
	if err != nil {
		return CustomEvent{}, err
	}
	for _, sc := range all {
		if (id == nil || sc.ID == *id) && (name == nil || sc.Name == *name) {
			return CustomEvent{ID: &sc.ID, Name: sc.Name}, nil
		}
	}
	return CustomEvent{}, apierr.InvalidPayload("referral_program.custom_event names no event schema of this project (by its id and name); " +
		"define it with POST /management/v1/projects/{projectId}/custom-event-schemas")
}

// checkReward reads a reward: its campaign a live loyalty program (points)
// or gift campaign (credits) of the project, and its amount.
func checkReward(ctx context.Context, q db.Querier, projectID string, in *rewardInput, at string) (Reward, error) {
	types := map[string]string{LoyaltyCard: "LOYALTY_PROGRAM", GiftVoucher: "GIFT_VOUCHERS"}
	if in.Type == nil || types[*in.Type] == "" {
		return Reward{}, apierr.InvalidPayload(at + ".type must be LOYALTY_CARD (points) or GIFT_VOUCHER (credits)")
	}
	if in.Amount == nil || *in.Amount < 1 || *in.Amount > maxAmount {
		return Reward{}, apierr.InvalidPayload(fmt.Sprintf("%s.amount must be from 1 to %d: points, or credits in cents", at, maxAmount))
	}
	if in.RelatedObjectParent == nil || in.RelatedObjectParent.ID == nil {
		return Reward{}, apierr.InvalidPayload(at + ".related_object_parent.id is required: the campaign the reward comes from")
	}
	c, err := campaigns.Get[json.RawMessage](ctx, q, projectID, *in.RelatedObjectParent.ID, false, types[*in.Type])
	if errors.Is(err, db.ErrNotFound) {
		return Reward{}, apierr.InvalidPayload(fmt.Sprintf("%s.related_object_parent.id: no %s campaign %q in this project",
			at, types[*in.Type], *in.RelatedObjectParent.ID))
	}
	if err != nil {
		return Reward{}, err
	}
	return Reward{RelatedObjectParent: Parent{ID: c.ID, Name: c.Name, Object: "CAMPAIGN"}, Type: *in.Type, Amount: *in.Amount}, nil
}

// programOf reads a referral campaign's stored program.
func programOf(c vouchers.Campaign) (Program, error) {
	var p Program
	err := json.Unmarshal(c.Attrs.ReferralProgram, &p)
	return p, err
}

// CreateCampaign creates a REFERRAL_PROGRAM campaign (POST /v1/campaigns):
// its referral_program checked here, the campaign and its referral codes
// made by regional/vouchers/campaign.
func (s *Service) CreateCampaign(ctx context.Context, projectID string, raw json.RawMessage) (any, error) {
	var r struct {
		campaign.Request
		ReferralProgram json.RawMessage `json:"referral_program"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, apierr.InvalidPayload("the campaign does not read: " + err.Error())
	}
	if len(r.ReferralProgram) == 0 || string(r.ReferralProgram) == "null" {
		return nil, apierr.InvalidPayload("referral_program is required: how referees convert (conversion_event_type) and what they earn")
	}
	p, err := s.checkProgram(ctx, s.pool, projectID, r.ReferralProgram, nil)
	if err != nil {
		return nil, err
	}
	if r.Request.ReferralProgram, err = json.Marshal(p); err != nil {
		return nil, err
	}
	// The program's tiers are announced after campaign.created.
	return s.codes.Create(ctx, projectID, r.Request, func(ctx context.Context, tx pgx.Tx, c vouchers.Campaign) error {
		return s.tierNotices(ctx, tx, projectID, c, nil, p.ReferralTiers)
	})
}

// GetCampaign reads a referral campaign.
func (s *Service) GetCampaign(ctx context.Context, projectID, id string) (any, error) {
	return s.codes.Get(ctx, projectID, id)
}

// UpdateCampaign updates a referral campaign (PUT /v1/campaigns/{id}): the
// common properties, the codes' discount, and referral_program, which
// replaces the stored one whole (tiers keep the ids they name).
func (s *Service) UpdateCampaign(ctx context.Context, projectID, id string, raw json.RawMessage) (any, error) {
	var r struct {
		campaigns.CommonUpdate
		campaign.TemplateUpdate
		ReferralProgram json.RawMessage `json:"referral_program"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, apierr.InvalidPayload("the campaign does not read: " + err.Error())
	}
	c, err := campaigns.Change(ctx, s.camps, projectID, id, campaigns.EventUpdated, []string{"REFERRAL_PROGRAM"},
		func(tx pgx.Tx, c *vouchers.Campaign) error {
			if err := campaigns.ApplyCommon(&c.Attrs, r.CommonUpdate); err != nil {
				return err
			}
			if err := r.TemplateUpdate.Apply(&c.Attrs.Voucher); err != nil {
				return err
			}
			if len(r.ReferralProgram) == 0 || string(r.ReferralProgram) == "null" {
				return nil
			}
			old, err := programOf(*c)
			if err != nil {
				return err
			}
			p, err := s.checkProgram(ctx, tx, projectID, r.ReferralProgram, &old)
			if err != nil {
				return err
			}
			if c.Attrs.ReferralProgram, err = json.Marshal(p); err != nil {
				return err
			}
			return s.tierNotices(ctx, tx, projectID, *c, old.ReferralTiers, p.ReferralTiers)
		})
	if err != nil {
		return nil, err
	}
	return c.ViewOf(), nil
}

// tierNotices raises campaign.referral_tier.created, .updated and .deleted
// for the referrer tiers a program's change adds, changes or removes (by
// tier id), in the change's transaction.
func (s *Service) tierNotices(ctx context.Context, tx pgx.Tx, projectID string, c vouchers.Campaign, before, after []Tier) error {
	if s.notify == nil {
		return nil
	}
	was := map[string]Tier{}
	for _, t := range before {
		was[t.ID] = t
	}
	emit := func(event string, t Tier) error {
		return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: event, Entity: t.ID,
			Object: map[string]any{"referral_tier": t.simple(c.ID), "campaign": simpleCampaign(c)}})
	}
	for _, t := range after {
		old, ok := was[t.ID]
		delete(was, t.ID)
		switch {
		case !ok:
			if err := emit(EventTierCreated, t); err != nil {
				return err
			}
		case !sameTier(old, t):
			if err := emit(EventTierUpdated, t); err != nil {
				return err
			}
		}
	}
	for _, t := range before {
		if _, gone := was[t.ID]; gone {
			if err := emit(EventTierDeleted, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// sameTier says whether a tier is unchanged: the reward's parent campaign
// by id (its name is read fresh, and a renamed campaign changes no tier).
func sameTier(a, b Tier) bool {
	a.Parameters.Reward.RelatedObjectParent.Name, b.Parameters.Reward.RelatedObjectParent.Name = "", ""
	return reflect.DeepEqual(a, b)
}
