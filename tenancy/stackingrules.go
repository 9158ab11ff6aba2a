package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tallyhq/tally/internal/db"
)

// ChangeStackingRules is logged when a project's stacking rules change.
const ChangeStackingRules = "stacking_rules"

// StackingRules are how a project's redeemables stack in one validation or
// redemption (the reference's stacking rules).
type StackingRules struct {
	ExclusiveCategories                            []string       `json:"exclusive_categories"`
	JointCategories                                []string       `json:"joint_categories"`
	RedeemablesLimit                               int            `json:"redeemables_limit"`
	ApplicableRedeemablesLimit                     int            `json:"applicable_redeemables_limit"`
	ApplicableRedeemablesPerCategoryLimit          int            `json:"applicable_redeemables_per_category_limit"`
	ApplicableRedeemablesCategoryLimits            map[string]int `json:"applicable_redeemables_category_limits"`
	ApplicableExclusiveRedeemablesLimit            int            `json:"applicable_exclusive_redeemables_limit"`
	ApplicableExclusiveRedeemablesPerCategoryLimit int            `json:"applicable_exclusive_redeemables_per_category_limit"`
	DiscountCalculationMode                        string         `json:"discount_calculation_mode"`
	InitialAmountModeCategories                    []string       `json:"initial_amount_mode_categories"`
	DiscountedAmountModeCategories                 []string       `json:"discounted_amount_mode_categories"`
	RedeemablesApplicationMode                     string         `json:"redeemables_application_mode"`
	RedeemablesSortingRule                         string         `json:"redeemables_sorting_rule"`
	RedeemablesProductsApplicationMode             string         `json:"redeemables_products_application_mode"`
	RedeemablesNoEffectRule                        string         `json:"redeemables_no_effect_rule"`
	NoEffectSkipCategories                         []string       `json:"no_effect_skip_categories"`
	NoEffectRedeemAnywayCategories                 []string       `json:"no_effect_redeem_anyway_categories"`
	RedeemablesRollbackOrderMode                   string         `json:"redeemables_rollback_order_mode"`
}

// DefaultStackingRules are a project's stacking rules until it customises them.
func DefaultStackingRules() StackingRules {
	return StackingRules{ExclusiveCategories: []string{}, JointCategories: []string{}, RedeemablesLimit: 30,
		ApplicableRedeemablesLimit: 5, ApplicableRedeemablesPerCategoryLimit: 1, ApplicableRedeemablesCategoryLimits: map[string]int{},
		ApplicableExclusiveRedeemablesLimit: 1, ApplicableExclusiveRedeemablesPerCategoryLimit: 1,
		DiscountCalculationMode: "DISCOUNTED_AMOUNT", InitialAmountModeCategories: []string{}, DiscountedAmountModeCategories: []string{},
		RedeemablesApplicationMode: "ALL", RedeemablesSortingRule: "REQUESTED_ORDER", RedeemablesProductsApplicationMode: "STACK",
		RedeemablesNoEffectRule: "REDEEM_ANYWAY", NoEffectSkipCategories: []string{}, NoEffectRedeemAnywayCategories: []string{},
		RedeemablesRollbackOrderMode: "WITH_ORDER"}
}

// StoredStackingRules is a project's customised stacking rules.
type StoredStackingRules struct {
	ID        string
	Rules     StackingRules
	CreatedAt time.Time
	UpdatedAt *time.Time
}

// GetStackingRules reads a project's customised rules; found is false for
// a project with the defaults.
func GetStackingRules(ctx context.Context, q db.Querier, projectID string) (s StoredStackingRules, found bool, err error) {
	var raw []byte
	err = q.QueryRow(ctx, `SELECT id, rules, created_at, updated_at FROM stacking_rules WHERE project_id = $1`, projectID).
		Scan(&s.ID, &raw, &s.CreatedAt, &s.UpdatedAt)
	if errors.Is(err, db.ErrNotFound) {
		return StoredStackingRules{}, false, nil
	}
	if err != nil {
		return s, false, err
	}
	s.Rules = DefaultStackingRules()
	return s, true, json.Unmarshal(raw, &s.Rules)
}

// PutStackingRules writes a project's customised rules (insert when
// created is set, else update) and logs the change.
func PutStackingRules(ctx context.Context, q db.Querier, projectID string, s StoredStackingRules, insert bool) error {
	raw, err := json.Marshal(s.Rules)
	if err != nil {
		return err
	}
	if insert {
		_, err = q.Exec(ctx, `INSERT INTO stacking_rules (project_id, id, rules, created_at) VALUES ($1, $2, $3, $4)`,
			projectID, s.ID, raw, s.CreatedAt)
	} else {
		_, err = q.Exec(ctx, `UPDATE stacking_rules SET rules = $2, updated_at = $3 WHERE project_id = $1`, projectID, raw, s.UpdatedAt)
	}
	if err != nil {
		return err
	}
	return RecordChange(ctx, q, ChangeStackingRules, projectID)
}

// DeleteStackingRules restores a project's default rules.
func DeleteStackingRules(ctx context.Context, q db.Querier, projectID string) error {
	if _, err := q.Exec(ctx, `DELETE FROM stacking_rules WHERE project_id = $1`, projectID); err != nil {
		return err
	}
	return RecordChange(ctx, q, ChangeStackingRules, projectID)
}
