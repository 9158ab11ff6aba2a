package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Kind is what the package that owns a campaign type adds to the model
// (loyalty programs, discount and gift campaigns, promotions, referral
// programs): creating a campaign of the type from the request body,
// reading one (the view with what hangs off it), updating its
// type-specific part, making its vouchers, dropping what hangs off a
// deleted one, and its figures in the campaign's summary.
type Kind interface {
	Create(ctx context.Context, projectID string, raw json.RawMessage) (any, error)
	Get(ctx context.Context, projectID, id string) (any, error)
	Update(ctx context.Context, projectID, id string, raw json.RawMessage) (any, error)
	// Generate makes the vouchers (or cards) a CAMPAIGN.VOUCHERS_GENERATE
	// job of the campaign counted, in transactions of its own
	// (RunGeneration: a rerun after a crash makes only the rest).
	Generate(ctx context.Context, job *async.Job, p GenerateParams) error
	// Drop deletes what hangs off a deleted campaign for good, in
	// transactions of its own (it may be run again after a crash), and
	// answers how many vouchers it deleted: CAMPAIGN.VOUCHERS_DELETE, job,
	// whose progress it may report.
	Drop(ctx context.Context, job *async.Job, campaignID string) (int64, error)
	// Summary is the type's own figures within p; st are the campaign's
	// stacked redemptions, which the type may show in its shape.
	Summary(ctx context.Context, projectID, campaignID string, p Period, st Stacked) (Summary, error)
}

// Summary is what a kind adds to a campaign's summary.
type Summary struct {
	// Vouchers says the type has vouchers (or cards): the summary shows
	// VouchersCreated and the publications.
	Vouchers        bool
	VouchersCreated int64
	// Redeemed and RolledBack are the type's own redemptions, beside the
	// stacked ones (a loyalty program's reward redemptions).
	Redeemed, RolledBack int64
	// Figures are the type's own fields.
	Figures map[string]any
}

// Stacked are a campaign's stacked redemptions within a period, as its
// summary shows them (regional/engine counts them).
type Stacked struct {
	Redemptions, Succeeded, Failed int64 // children of the campaign's vouchers and tiers
	RolledBack                     int64 // their rollbacks made within the period
	Discounted, RolledBackDiscount int64 // discount amounts redeemed, and of those rolled back
	GiftRedeemed, GiftRolledBack   int64 // gift credits taken, and of those rolled back
}

// Decode reads a campaign's request body into dst, or answers why not.
func Decode(raw json.RawMessage, dst any) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return apierr.InvalidPayload("the campaign does not read: " + err.Error())
	}
	return nil
}

// Registry is the campaign kinds by type, and the async actions every type
// shares, which run the part of the campaign's kind.
type Registry struct {
	svc   *Service
	kinds map[string]Kind
}

// NewRegistry returns the registry of kinds (by campaign type) and
// registers CAMPAIGN.VOUCHERS_GENERATE and CAMPAIGN.VOUCHERS_DELETE in
// reg.
func NewRegistry(s *Service, reg *async.Registry, kinds map[string]Kind) *Registry {
	r := &Registry{svc: s, kinds: kinds}
	reg.HandleJob(GenerateJob, r.generateJob)
	reg.HandleJob(DeleteJob, r.deleteJob)
	return r
}

// kindOf finds a live campaign's type and id, and the type's kind.
func (r *Registry) kindOf(ctx context.Context, projectID, idOrName string) (id, typ string, k Kind, err error) {
	id, typ, err = TypeOf(ctx, r.svc.pool, projectID, idOrName)
	if errors.Is(err, db.ErrNotFound) {
		return "", "", nil, NotFound(idOrName)
	}
	if err != nil {
		return "", "", nil, err
	}
	k, ok := r.kinds[typ]
	if !ok {
		return "", "", nil, apierr.New(http.StatusBadRequest, "feature_not_available", "Feature not available",
			"campaigns of type "+typ+" are not served yet")
	}
	return id, typ, k, nil
}

var deletedMeanwhile = map[string]any{"message": "the campaign was deleted"}

// generateJob is CAMPAIGN.VOUCHERS_GENERATE: the campaign's kind makes the
// vouchers the job counted, and the campaign is then DONE.
func (r *Registry) generateJob(ctx context.Context, job *async.Job) (any, error) {
	var p GenerateParams
	if err := json.Unmarshal(job.Params, &p); err != nil {
		return nil, err
	}
	c, err := Get[json.RawMessage](ctx, r.svc.pool, job.ProjectID, p.CampaignID, false)
	if errors.Is(err, db.ErrNotFound) {
		return deletedMeanwhile, nil
	}
	if err != nil {
		return nil, err
	}
	k, ok := r.kinds[c.CampaignType]
	if !ok {
		return nil, fmt.Errorf("campaigns: no kind makes the vouchers of %s campaigns", c.CampaignType)
	}
	if err := k.Generate(ctx, job, p); err != nil {
		return nil, err
	}
	if err := r.generationDone(ctx, job.ProjectID, c.ID); err != nil {
		return nil, err
	}
	c, err = Get[json.RawMessage](ctx, r.svc.pool, job.ProjectID, c.ID, false)
	if errors.Is(err, db.ErrNotFound) {
		return deletedMeanwhile, nil
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"campaign_id": c.ID, "vouchers_count": c.VouchersCount}, nil
}

// generationDone records a campaign's vouchers made, and raises
// campaign.vouchers.generation.completed with it, in one transaction.
func (r *Registry) generationDone(ctx context.Context, projectID, campaignID string) error {
	return db.InTx(ctx, r.svc.pool, func(tx pgx.Tx) error {
		if err := SetGenerationStatus(ctx, tx, projectID, campaignID, GenerationDone, 0); err != nil {
			return err
		}
		c, err := Get[json.RawMessage](ctx, tx, projectID, campaignID, false)
		if errors.Is(err, db.ErrNotFound) {
			return nil // deleted meanwhile
		} else if err != nil {
			return err
		}
		return r.svc.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventGenerationCompleted, Entity: c.ID,
			Object: c.ViewOf()})
	})
}

// deleteJob is CAMPAIGN.VOUCHERS_DELETE: the deleted campaign's kind drops
// what hangs off it.
func (r *Registry) deleteJob(ctx context.Context, job *async.Job) (any, error) {
	var p GenerateParams
	if err := json.Unmarshal(job.Params, &p); err != nil {
		return nil, err
	}
	var deleted int64
	typ, err := typeOfAny(ctx, r.svc.pool, job.ProjectID, p.CampaignID)
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return nil, err
	}
	if k, ok := r.kinds[typ]; ok {
		if deleted, err = k.Drop(ctx, job, p.CampaignID); err != nil {
			return nil, err
		}
	}
	return map[string]any{"campaign_id": p.CampaignID, "deleted_vouchers": deleted}, nil
}
