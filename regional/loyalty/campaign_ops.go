package loyalty

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/bin"
)

// The writes every campaign type shares: the common properties of an
// update, enabling and disabling, deletion to the bin or for good. The
// type-specific part of an update is the caller's function.

// Webhook events of every campaign type, beside EventCampaignCreated,
// EventCampaignUpdated and EventCampaignDeleted.
const (
	EventCampaignEnabled  = "campaign.enabled"
	EventCampaignDisabled = "campaign.disabled"
	// EventGenerationCompleted is raised when CAMPAIGN.VOUCHERS_GENERATE
	// has made every voucher of a campaign.
	EventGenerationCompleted = "campaign.vouchers.generation.completed"
)

// CommonUpdate are the properties of PUT /v1/campaigns/{campaignId} (and PUT
// /v1/loyalties/{campaignId}) that every campaign type has: those present
// replace the stored ones.
type CommonUpdate struct {
	Description                     *string         `json:"description"`
	Type                            *string         `json:"type"`
	AutoJoin                        *bool           `json:"auto_join"`
	JoinOnce                        *bool           `json:"join_once"`
	StartDate                       *time.Time      `json:"start_date"`
	ExpirationDate                  *time.Time      `json:"expiration_date"`
	ValidityTimeframe               json.RawMessage `json:"validity_timeframe"`
	ValidityDayOfWeek               json.RawMessage `json:"validity_day_of_week"`
	ValidityHours                   json.RawMessage `json:"validity_hours"`
	ActivityDurationAfterPublishing *string         `json:"activity_duration_after_publishing"`
	Metadata                        map[string]any  `json:"metadata"`
	Category                        *string         `json:"category"`
	CategoryID                      *string         `json:"category_id"`
}

// ApplyCommon writes the properties present in r into a.
func ApplyCommon[V any](a *AttrsOf[V], r CommonUpdate) error {
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
	// ChangeCampaign).
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
	if r.StartDate != nil {
		a.StartDate = r.StartDate
	}
	if r.ExpirationDate != nil {
		a.ExpirationDate = r.ExpirationDate
	}
	if a.StartDate != nil && a.ExpirationDate != nil && !a.ExpirationDate.After(*a.StartDate) {
		return apierr.InvalidPayload("expiration_date must be after start_date")
	}
	for _, f := range []struct{ dst, v *json.RawMessage }{{&a.ValidityTimeframe, &r.ValidityTimeframe},
		{&a.ValidityDayOfWeek, &r.ValidityDayOfWeek}, {&a.ValidityHours, &r.ValidityHours}} {
		if len(*f.v) > 0 {
			*f.dst = *f.v
		}
	}
	if r.Metadata != nil {
		a.Metadata = r.Metadata
	}
	return nil
}

// ChangeCampaign changes a live campaign of one of types (any when none)
// under its row lock: change edits it, and the campaign is written back
// with updated_at now and the webhook event raised in the same transaction.
func ChangeCampaign[V any](ctx context.Context, s *Service, projectID, idOrName, event string, types []string,
	change func(tx pgx.Tx, c *CampaignOf[V]) error) (CampaignOf[V], error) {
	var c CampaignOf[V]
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if c, err = GetCampaignOf[V](ctx, tx, projectID, idOrName, true, types...); errors.Is(err, db.ErrNotFound) {
			return notFoundCampaign(idOrName)
		} else if err != nil {
			return err
		}
		name, id := c.Attrs.Category, c.Attrs.CategoryID
		if err := change(tx, &c); err != nil {
			return err
		}
		now := s.Now().UTC()
		if err := setChangedCategory(ctx, tx, projectID, &c.Attrs, name, id, now); err != nil {
			return err
		}
		c.UpdatedAt = &now
		if err := UpdateCampaignOf(ctx, tx, projectID, c); err != nil {
			return err
		}
		return s.events.Emit(ctx, tx, projectID, event, c.ID, c.ViewOf())
	})
	return c, err
}

// SetCampaignActive enables or disables a campaign of any type.
func (s *Service) SetCampaignActive(ctx context.Context, projectID, idOrName string, active bool) (CampaignViewOf[json.RawMessage], error) {
	event := EventCampaignDisabled
	if active {
		event = EventCampaignEnabled
	}
	c, err := ChangeCampaign(ctx, s, projectID, idOrName, event, nil, func(_ pgx.Tx, c *CampaignOf[json.RawMessage]) error {
		c.Attrs.Active = active
		return nil
	})
	return c.ViewOf(), err
}

// UseCampaignDropper adds fn to what CAMPAIGN.VOUCHERS_DELETE does for a
// deleted campaign beside deleting its loyalty cards: another type's
// vouchers, a promotion's tiers. fn works in its own transactions and may
// be run again after a crash; it answers how many vouchers it deleted.
func (s *Service) UseCampaignDropper(fn func(ctx context.Context, projectID, campaignID string) (int64, error)) {
	s.droppers = append(s.droppers, fn)
}

// RemoveCampaign deletes a campaign of one of types (any when none): at
// once it answers 404 and its name is free. With force its vouchers (or
// cards) go for good in the CAMPAIGN.VOUCHERS_DELETE async action, whose
// id it returns; without, the campaign waits in the bin, and the action
// starts when its bin entry is removed (RemoveBinnedCampaign).
func (s *Service) RemoveCampaign(ctx context.Context, projectID, idOrName string, force bool, types ...string) (*string, error) {
	var actionID *string
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := GetCampaignOf[json.RawMessage](ctx, tx, projectID, idOrName, true, types...)
		if errors.Is(err, db.ErrNotFound) {
			return notFoundCampaign(idOrName)
		} else if err != nil {
			return err
		}
		now := s.Now().UTC()
		if err := MarkCampaignDeleted(ctx, tx, projectID, c.ID, c.Name+" #deleted:"+c.ID, now); err != nil {
			return err
		}
		if force {
			act, err := async.StartJob(ctx, tx, projectID, DeleteJob, generateParams{CampaignID: c.ID})
			if err != nil {
				return err
			}
			actionID = &act.ID
		} else {
			b := &pgx.Batch{}
			bin.Put(b, projectID, []bin.Entry{{ID: bin.NewID(), ResourceType: "campaign", ResourceID: c.ID,
				ResourceName: &c.Name, CreatedAt: now}})
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
		}
		return s.events.Emit(ctx, tx, projectID, EventCampaignDeleted, c.ID, c.ViewOf())
	})
	return actionID, err
}

// RemoveBinnedCampaign is the bin's remover of campaigns: the campaign's
// vouchers go for good in CAMPAIGN.VOUCHERS_DELETE, started in the bin's
// transaction.
func (s *Service) RemoveBinnedCampaign(ctx context.Context, tx pgx.Tx, projectID string, e bin.Entry) error {
	_, err := async.StartJob(ctx, tx, projectID, DeleteJob, generateParams{CampaignID: e.ResourceID})
	return err
}
