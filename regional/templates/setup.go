package templates

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/promotions"
	"github.com/tallyhq/tally/regional/validation"
	"github.com/tallyhq/tally/regional/vouchers"
)

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
	for _, k := range windowKeys {
		if v, ok := t.Body[k]; ok {
			out[k] = v
		}
	}
	var action struct {
		Discount json.RawMessage `json:"discount"`
	}
	_ = json.Unmarshal(t.Body["action"], &action)
	out["voucher"], _ = json.Marshal(map[string]any{"type": "DISCOUNT_VOUCHER", "discount": action.Discount})
	return out
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
	for _, k := range windowKeys {
		if v, ok := t.Body[k]; ok {
			out[k] = v
		}
	}
	var voucher struct {
		Discount json.RawMessage `json:"discount"`
	}
	_ = json.Unmarshal(t.Body["voucher"], &voucher)
	out["action"], _ = json.Marshal(map[string]any{"discount": voucher.Discount})
	return out, nil
}

// placed reads a template for a setup: one copied from another project
// has what it carries made or matched in projectID first, and its rules
// and settings rewritten to name them; made lists what was made.
func (s *Service) placed(ctx context.Context, projectID, id string) (Template, []Resource, error) {
	t, err := get(ctx, s.pool, projectID, id)
	if err != nil || len(t.Carried) == 0 {
		return t, nil, err
	}
	ids, made, err := s.place(ctx, projectID, t.Carried)
	if err != nil {
		return t, nil, err
	}
	if err := json.Unmarshal(rewrite(mustJSON(t.Body), ids), &t.Body); err != nil {
		return t, nil, err
	}
	if err := json.Unmarshal(rewrite(mustJSON(t.Rules), ids), &t.Rules); err != nil {
		return t, nil, err
	}
	return t, made, nil
}

func mustJSON(v any) json.RawMessage {
	raw, _ := json.Marshal(v)
	return raw
}

// CampaignSetup makes a campaign from a template: the template's settings
// with the request's fields over them, and copies of its rules assigned to
// the campaign in the transaction that writes it.
func (s *Service) CampaignSetup(ctx context.Context, projectID, id string, req map[string]json.RawMessage) (CampaignSetup, error) {
	name, err := nameOf(req, "campaign")
	if err != nil {
		return CampaignSetup{}, err
	}
	t, made, err := s.placed(ctx, projectID, id)
	if err != nil {
		return CampaignSetup{}, err
	}
	body := overlay(campaignBody(t), req, "voucher")
	body["campaign_type"], _ = json.Marshal(t.CampaignType)
	raw, _ := json.Marshal(body)
	var r vouchers.CampaignRequest
	if err := campaigns.Decode(raw, &r); err != nil {
		return CampaignSetup{}, err
	}
	created := []Resource{}
	v, err := s.vouchers.CreateCampaign(ctx, projectID, r, func(ctx context.Context, tx pgx.Tx, c vouchers.Campaign) error {
		created = append(created[:0], made...) // a retried transaction starts again
		ruleIDs := make([]string, 0, len(t.Rules))
		for _, def := range t.Rules {
			rv, err := s.rules.CreateIn(ctx, tx, projectID, ruleBody(def, name))
			if err != nil {
				return err
			}
			ruleIDs = append(ruleIDs, rv.ID)
			created = append(created, Resource{ID: rv.ID, Object: "validation_rules"})
		}
		_, err := s.rules.AssignIn(ctx, tx, projectID, "campaign", c.ID, ruleIDs)
		return err
	})
	if err != nil {
		return CampaignSetup{}, err
	}
	return CampaignSetup{CreatedResources: created, Campaign: v, Object: "campaign_setup"}, nil
}

// TierSetup adds a promotion tier made from a template to a promotion
// campaign. The tier's owner writes it in a transaction of its own, so the
// rule copies are made first and removed again if the tier is refused.
func (s *Service) TierSetup(ctx context.Context, projectID, id string, req map[string]json.RawMessage) (TierSetup, error) {
	name, err := nameOf(req, "promotion tier")
	if err != nil {
		return TierSetup{}, err
	}
	var campaignID string
	if raw, ok := req["campaign_id"]; !ok || json.Unmarshal(raw, &campaignID) != nil || campaignID == "" {
		return TierSetup{}, apierr.InvalidPayload("campaign_id is required: the promotion campaign the tier joins")
	}
	t, made, err := s.placed(ctx, projectID, id)
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
	created := append([]Resource{}, made...)
	undo := func() {
		for _, c := range created {
			if c.Object == "validation_rules" {
				_ = s.rules.Delete(context.WithoutCancel(ctx), projectID, c.ID)
			}
		}
	}
	for _, def := range t.Rules {
		rv, err := s.rules.Create(ctx, projectID, ruleBody(def, name))
		if err != nil {
			undo()
			return TierSetup{}, err
		}
		r.ValidationRules = append(r.ValidationRules, rv.ID)
		created = append(created, Resource{ID: rv.ID, Object: "validation_rules"})
	}
	tier, err := s.promos.AddTier(ctx, projectID, campaignID, r)
	if err != nil {
		undo()
		return TierSetup{}, err
	}
	c, err := s.promos.GetCampaign(ctx, projectID, tier.CampaignID)
	if err != nil {
		return TierSetup{}, err
	}
	return TierSetup{CreatedResources: created, PromotionTier: tier, Campaign: c, Object: "promotion_tier_setup"}, nil
}
