package templates

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/jsonx"
)

// Where a template was saved from, which decides how its body reads.
const (
	fromCampaign = "campaign"
	fromTier     = "promotion_tier"
)

// Template is a row of campaign_templates. Body is the create body of its
// source (a POST /v1/campaigns body, or a promotion tier's), without name,
// category and code count; Rules are its validation rules' definitions as
// POST /v1/validation-rules takes them.
type Template struct {
	ID           string
	Name         string
	Description  *string
	CampaignType string
	Source       string
	Body         map[string]json.RawMessage
	Rules        []map[string]json.RawMessage
	// Carried is what a copy from another project carries, made in this
	// one at each setup (carry.go); none for a template saved here.
	Carried   []Carried
	CreatedAt time.Time
	UpdatedAt *time.Time
}

// View is the reference's CampaignTemplate.
type View struct {
	ID           string      `json:"id"`
	Name         string      `json:"name"`
	Description  *string     `json:"description"`
	CampaignType string      `json:"campaign_type"`
	CreatedAt    jsonx.Time  `json:"created_at"`
	UpdatedAt    *jsonx.Time `json:"updated_at"`
	Object       string      `json:"object"`
}

// View renders the template.
func (t Template) View() View {
	return View{ID: t.ID, Name: t.Name, Description: t.Description, CampaignType: t.CampaignType,
		CreatedAt: jsonx.Time{Time: t.CreatedAt}, UpdatedAt: jsonx.Ptr(t.UpdatedAt), Object: "campaign_template"}
}

// CreateRequest is POST /v1/templates/campaigns: a name and one source.
type CreateRequest struct {
	Name            *string `json:"name"`
	Description     *string `json:"description"`
	CampaignID      *string `json:"campaign_id"`
	PromotionTierID *string `json:"promotion_tier_id"`
}

// UpdateRequest is PUT /v1/templates/campaigns/{id}: what it names changes.
type UpdateRequest struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
}

// Resource is an element of a setup's created_resources.
type Resource struct {
	ID     string `json:"id"`
	Object string `json:"object"`
}

// CampaignSetup is campaign-setup's answer.
type CampaignSetup struct {
	CreatedResources []Resource `json:"created_resources"`
	Campaign         any        `json:"campaign"`
	Object           string     `json:"object"`
}

// TierSetup is tier-setup's answer. The reference's schema requires a
// campaign it does not describe: the promotion campaign the tier joined,
// as it reads now, so a strictly typed client takes the answer.
type TierSetup struct {
	CreatedResources []Resource `json:"created_resources"`
	PromotionTier    any        `json:"promotion_tier"`
	Campaign         any        `json:"campaign"`
	Object           string     `json:"object"`
}

func checkName(name *string, required bool) error {
	switch {
	case name == nil && required:
		return apierr.InvalidPayload("name is required: the template's name, unique in the project")
	case name != nil && (*name == "" || len(*name) > 200):
		return apierr.InvalidPayload("name is 1 to 200 characters")
	}
	return nil
}

// unsupported is the reference's refusal of a source a template cannot
// keep.
func unsupported(details string) error {
	return apierr.New(http.StatusBadRequest, "campaign_type_is_not_supported_by_campaign_template",
		"Campaign type is not supported by campaign template", details)
}

// The keys of a source's view a template keeps: its settings, not its
// identity (id, name, category, dates of the record) nor its code count.
var (
	campaignKeys = []string{"description", "type", "voucher", "auto_join", "join_once", "use_voucher_metadata_schema",
		"validity_timeframe", "validity_day_of_week", "validity_hours", "activity_duration_after_publishing",
		"start_date", "expiration_date", "metadata"}
	voucherKeys = []string{"type", "discount", "gift", "code_config", "redemption"}
	// A tier's hierarchy is its place in its own campaign, not a setting:
	// a tier made from a template goes after the campaign's others.
	tierKeys = []string{"banner", "action", "metadata", "active", "start_date", "expiration_date",
		"validity_timeframe", "validity_day_of_week", "validity_hours"}
	ruleKeys = []string{"name", "rules", "bundle_rules", "error", "applicable_to", "type", "context_type"}
	// windowKeys are what a campaign and a tier made from each other's
	// template share besides the discount.
	windowKeys = []string{"metadata", "start_date", "expiration_date", "validity_timeframe", "validity_day_of_week", "validity_hours"}
)

// pick is the keys of a view (a JSON object) given and not null.
func pick(view any, keys []string) (map[string]json.RawMessage, error) {
	raw, err := json.Marshal(view)
	if err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	for _, k := range keys {
		if v, ok := all[k]; ok && string(v) != "null" {
			out[k] = v
		}
	}
	return out, nil
}

// overlay is base with every key of the request's body over it (the
// reference: "the rest of the fields will overwrite the template
// configuration"); an object under deep is merged one level down.
func overlay(base, req map[string]json.RawMessage, deep string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range req {
		if k == deep {
			var b, r map[string]json.RawMessage
			if json.Unmarshal(out[k], &b) == nil && json.Unmarshal(v, &r) == nil && b != nil && r != nil {
				raw, _ := json.Marshal(overlay(b, r, ""))
				out[k] = raw
				continue
			}
		}
		out[k] = v
	}
	return out
}
