package templates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/promotions"
	"github.com/tallyhq/tally/regional/validation"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/regional/vouchers/campaign"
)

// setup is what a setup request names once checked: the template it makes
// its object from, the object's name and, for a promotion tier, the
// campaign it joins.
type setup struct {
	Project, Template, Name, Campaign string
}

// nameOf is the request's name, which a setup requires.
func nameOf(req map[string]json.RawMessage, what string) (string, error) {
	var name string
	if raw, ok := req["name"]; !ok || json.Unmarshal(raw, &name) != nil || name == "" {
		return "", apierr.InvalidPayload("name is required: the " + what + "'s name, a string")
	}
	return name, nil
}

// ruleBody is a copy of a template's rule named for what it restricts:
// a rule's name is unique in the project, and the copy is a rule of its
// own that may later be changed apart from its original.
func ruleBody(def map[string]json.RawMessage, owner string) validation.Body {
	b := validation.Body{}
	for k, v := range def {
		b[k] = v
	}
	var name string
	_ = json.Unmarshal(def["name"], &name)
	b["name"], _ = json.Marshal(fmt.Sprintf("%s (%s)", name, owner))
	return b
}

// campaignBody is the template's body as a campaign's: a tier's discount
// becomes a discount campaign's voucher.
func campaignBody(t Template) map[string]json.RawMessage {
	if t.Source == fromCampaign {
		return t.Body
	}
	out := map[string]json.RawMessage{"campaign_type": json.RawMessage(`"DISCOUNT_COUPONS"`)}
	discount := carryOver(t.Body, out, "action")
	out["voucher"], _ = json.Marshal(map[string]any{"type": "DISCOUNT_VOUCHER", "discount": discount})
	return out
}

// carryOver copies a template body's validity windows into out and
// answers the discount its object under key holds (a tier's action, a
// campaign's voucher): what a template keeps when it changes kind.
func carryOver(body, out map[string]json.RawMessage, key string) json.RawMessage {
	for _, k := range windowKeys {
		if v, ok := body[k]; ok {
			out[k] = v
		}
	}
	var holder struct {
		Discount json.RawMessage `json:"discount"`
	}
	_ = json.Unmarshal(body[key], &holder)
	return holder.Discount
}

// carriedIn makes in tx what a copied template carries (plan) and the
// copies of its rules, owned by name: what a setup makes before the
// campaign or tier itself.
func (s *Service) carriedIn(ctx context.Context, tx pgx.Tx, projectID, name string, t Template, plan []planned) ([]Resource, []string, error) {
	created, err := s.makeIn(ctx, tx, projectID, plan)
	if err != nil {
		return nil, nil, err
	}
	ruleIDs, err := s.ruleCopiesIn(ctx, tx, projectID, name, t.Rules, &created)
	return created, ruleIDs, err
}

// tierBody is the template's body as a promotion tier's: a discount
// campaign's voucher discount becomes the tier's action; a gift campaign
// makes no tier.
func tierBody(t Template) (map[string]json.RawMessage, error) {
	if t.Source == fromTier {
		return t.Body, nil
	}
	if t.CampaignType != "DISCOUNT_COUPONS" {
		return nil, unsupported("a promotion tier gives a discount: the template " + t.ID + " keeps a " + t.CampaignType + " campaign")
	}
	out := map[string]json.RawMessage{}
	discount := carryOver(t.Body, out, "voucher")
	out["action"], _ = json.Marshal(map[string]any{"discount": discount})
	return out, nil
}

// placed reads a template for a setup: one copied from another project
// has what it carries matched in projectID or given new ids there (plan),
// and its rules and settings rewritten to name them; what is new is made
// by makeIn in the setup's transaction.
func (s *Service) placed(ctx context.Context, projectID, id string) (Template, []planned, error) {
	t, err := get(ctx, s.pool, projectID, id)
	if err != nil || len(t.Carried) == 0 {
		return t, nil, err
	}
	ids, plan, err := s.plan(ctx, projectID, t.Carried)
	if err != nil {
		return t, nil, err
	}
	if err := json.Unmarshal(rewrite(mustJSON(t.Body), ids), &t.Body); err != nil {
		return t, nil, err
	}
	if err := json.Unmarshal(rewrite(mustJSON(t.Rules), ids), &t.Rules); err != nil {
		return t, nil, err
	}
	return t, plan, nil
}

func mustJSON(v any) json.RawMessage {
	raw, _ := json.Marshal(v)
	return raw
}

// onceMore runs a setup again, planned anew, when another setup made one
// of the objects it carries between its plan and its transaction: the
// refused transaction wrote nothing, and the second plan matches it.
func onceMore[T any](setup func() (T, error)) (T, error) {
	out, err := setup()
	if errors.Is(err, errRaced) {
		return setup()
	}
	return out, err
}

// CampaignSetup makes a campaign from a template: the template's settings
// with the request's fields over them, and copies of its rules assigned to
// the campaign, with what a copied template carries, in the transaction
// that writes it.
func (s *Service) CampaignSetup(ctx context.Context, projectID, id string, req map[string]json.RawMessage) (CampaignSetup, error) {
	name, err := nameOf(req, "campaign")
	if err != nil {
		return CampaignSetup{}, err
	}
	st := setup{Project: projectID, Template: id, Name: name}
	return onceMore(func() (CampaignSetup, error) { return s.campaignSetup(ctx, st, req) })
}

func (s *Service) campaignSetup(ctx context.Context, st setup, req map[string]json.RawMessage) (CampaignSetup, error) {
	t, plan, err := s.placed(ctx, st.Project, st.Template)
	if err != nil {
		return CampaignSetup{}, err
	}
	body := overlay(campaignBody(t), req, "voucher")
	body["campaign_type"], _ = json.Marshal(t.CampaignType)
	raw, _ := json.Marshal(body)
	var r campaign.Request
	if err := campaigns.Decode(raw, &r); err != nil {
		return CampaignSetup{}, err
	}
	var created []Resource
	v, err := s.vcamps.Create(ctx, st.Project, r, func(ctx context.Context, tx pgx.Tx, c vouchers.Campaign) error {
		var ruleIDs []string
		var err error
		if created, ruleIDs, err = s.carriedIn(ctx, tx, st.Project, st.Name, t, plan); err != nil { // a retried transaction starts again
			return err
		}
		_, err = s.rules.AssignIn(ctx, tx, st.Project, validation.Object{Type: "campaign", ID: c.ID}, ruleIDs)
		return err
	})
	if err != nil {
		return CampaignSetup{}, err
	}
	s.madeSegments(st.Project, created)
	return CampaignSetup{CreatedResources: created, Campaign: v, Object: "campaign_setup"}, nil
}

// ruleCopiesIn makes in tx a copy of each of a template's rules for the
// campaign or tier named owner, adds them to created and answers their ids.
func (s *Service) ruleCopiesIn(ctx context.Context, tx pgx.Tx, projectID, owner string, defs []map[string]json.RawMessage,
	created *[]Resource) ([]string, error) {
	ruleIDs := make([]string, 0, len(defs))
	for _, def := range defs {
		rv, err := s.rules.CreateIn(ctx, tx, projectID, ruleBody(def, owner))
		if err != nil {
			return nil, err
		}
		ruleIDs = append(ruleIDs, rv.ID)
		*created = append(*created, Resource{ID: rv.ID, Object: "validation_rules"})
	}
	return ruleIDs, nil
}

// TierSetup adds a promotion tier made from a template to a promotion
// campaign: the tier, copies of the template's rules assigned to it and
// what a copied template carries, in one transaction.
func (s *Service) TierSetup(ctx context.Context, projectID, id string, req map[string]json.RawMessage) (TierSetup, error) {
	name, err := nameOf(req, "promotion tier")
	if err != nil {
		return TierSetup{}, err
	}
	var campaignID string
	if raw, ok := req["campaign_id"]; !ok || json.Unmarshal(raw, &campaignID) != nil || campaignID == "" {
		return TierSetup{}, apierr.InvalidPayload("campaign_id is required: the promotion campaign the tier joins")
	}
	st := setup{Project: projectID, Template: id, Name: name, Campaign: campaignID}
	return onceMore(func() (TierSetup, error) { return s.tierSetup(ctx, st, req) })
}

func (s *Service) tierSetup(ctx context.Context, st setup, req map[string]json.RawMessage) (TierSetup, error) {
	t, plan, err := s.placed(ctx, st.Project, st.Template)
	if err != nil {
		return TierSetup{}, err
	}
	base, err := tierBody(t)
	if err != nil {
		return TierSetup{}, err
	}
	fields := map[string]json.RawMessage{}
	for k, v := range req {
		if k != "campaign_id" {
			fields[k] = v
		}
	}
	raw, _ := json.Marshal(overlay(base, fields, "action"))
	var r promotions.TierRequest
	if err := json.Unmarshal(raw, &r); err != nil {
		return TierSetup{}, apierr.InvalidPayload("the promotion tier does not read: " + err.Error())
	}
	var created []Resource
	var tierID string
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var ruleIDs []string
		var err error
		if created, ruleIDs, err = s.carriedIn(ctx, tx, st.Project, st.Name, t, plan); err != nil { // a retried transaction starts again
			return err
		}
		tr := r
		tr.ValidationRules = append(slices.Clip(r.ValidationRules), ruleIDs...)
		tierID, err = s.promos.AddTierIn(ctx, tx, st.Project, st.Campaign, tr)
		return err
	})
	if err != nil {
		return TierSetup{}, err
	}
	s.madeSegments(st.Project, created)
	tier, err := s.promos.GetTier(ctx, st.Project, tierID)
	if err != nil {
		return TierSetup{}, err
	}
	c, err := s.promos.GetCampaign(ctx, st.Project, tier.CampaignID)
	if err != nil {
		return TierSetup{}, err
	}
	return TierSetup{CreatedResources: created, PromotionTier: tier, Campaign: c, Object: "promotion_tier_setup"}, nil
}
