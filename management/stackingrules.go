package management

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/tenancy"
)

// Stacking rules: a project has one set, the defaults until customised
// (POST, which refuses a project that has its own), changed with PUT (the
// arrays sent replace the stored ones) and restored to the defaults with
// DELETE. The regional engine reads them through tenancy.Resolver.

type stackingRulesView struct {
	ID string `json:"id"`
	tenancy.StackingRules
	CreatedAt jsonx.Time  `json:"created_at"`
	UpdatedAt *jsonx.Time `json:"updated_at"`
	Object    string      `json:"object"`
}

// defaultRulesID names the defaults of a project that has not customised them.
func defaultRulesID(projectID string) string { return "stack_rules_default_" + projectID }

func (h handler) stackingRules(c echo.Context) (tenancy.Project, tenancy.StoredStackingRules, bool, error) {
	p, err := h.liveProject(c)
	if err != nil {
		return p, tenancy.StoredStackingRules{}, false, err
	}
	s, found, err := tenancy.GetStackingRules(c.Request().Context(), h.pool, p.ID)
	if err == nil && !found {
		s = tenancy.StoredStackingRules{ID: defaultRulesID(p.ID), Rules: tenancy.DefaultStackingRules(), CreatedAt: p.CreatedAt}
	}
	return p, s, found, err
}

// namedStackingRules is stackingRules for a path that names them by id
// (…/stacking-rules/{rulesId}): 404 when it names any other.
func (h handler) namedStackingRules(c echo.Context) (tenancy.Project, tenancy.StoredStackingRules, bool, error) {
	p, s, found, err := h.stackingRules(c)
	if err == nil && c.Param("rulesId") != s.ID {
		err = apierr.NotFound("stacking_rules", c.Param("rulesId"))
	}
	return p, s, found, err
}

func viewStackingRules(s tenancy.StoredStackingRules) stackingRulesView {
	return stackingRulesView{ID: s.ID, StackingRules: s.Rules, CreatedAt: jsonx.Time{Time: s.CreatedAt}, UpdatedAt: jsonx.Ptr(s.UpdatedAt),
		Object: "stacking_rules"}
}

// readStackingRules decodes a body over base: the properties sent replace
// base's, each checked against the reference's bounds and enums.
func readStackingRules(c echo.Context, base tenancy.StackingRules) (tenancy.StackingRules, error) {
	var raw json.RawMessage
	if err := httpx.Bind(c, &raw); err != nil {
		return base, err
	}
	if len(raw) == 0 || raw[0] != '{' {
		return base, apierr.InvalidPayload("the body must be a stacking rules object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	out := base
	if err := dec.Decode(&out); err != nil {
		return base, apierr.InvalidPayload("the stacking rules do not read: " + err.Error())
	}
	for _, l := range []struct {
		name      string
		v, lo, hi int
	}{{"redeemables_limit", out.RedeemablesLimit, 1, 30}, {"applicable_redeemables_limit", out.ApplicableRedeemablesLimit, 1, 30},
		{"applicable_redeemables_per_category_limit", out.ApplicableRedeemablesPerCategoryLimit, 1, 30},
		{"applicable_exclusive_redeemables_limit", out.ApplicableExclusiveRedeemablesLimit, 1, 5},
		{"applicable_exclusive_redeemables_per_category_limit", out.ApplicableExclusiveRedeemablesPerCategoryLimit, 1, 30}} {
		if l.v < l.lo || l.v > l.hi {
			return base, apierr.InvalidPayload(fmt.Sprintf("%s must be from %d to %d", l.name, l.lo, l.hi))
		}
	}
	for k, v := range out.ApplicableRedeemablesCategoryLimits {
		if v < 1 || v > 10 {
			return base, apierr.InvalidPayload(fmt.Sprintf("applicable_redeemables_category_limits.%s must be from 1 to 10", k))
		}
	}
	for _, e := range []struct {
		name, v string
		allowed []string
	}{{"discount_calculation_mode", out.DiscountCalculationMode, []string{"INITIAL_AMOUNT", "DISCOUNTED_AMOUNT"}},
		{"redeemables_application_mode", out.RedeemablesApplicationMode, []string{"ALL", "PARTIAL"}},
		{"redeemables_sorting_rule", out.RedeemablesSortingRule, []string{"CATEGORY_HIERARCHY", "REQUESTED_ORDER"}},
		{"redeemables_products_application_mode", out.RedeemablesProductsApplicationMode, []string{"STACK", "ONCE"}},
		{"redeemables_no_effect_rule", out.RedeemablesNoEffectRule, []string{"REDEEM_ANYWAY", "SKIP"}},
		{"redeemables_rollback_order_mode", out.RedeemablesRollbackOrderMode, []string{"WITH_ORDER", "WITHOUT_ORDER"}}} {
		if !slices.Contains(e.allowed, e.v) {
			return base, apierr.InvalidPayload(fmt.Sprintf("%s must be one of %v", e.name, e.allowed))
		}
	}
	if out.ApplicableRedeemablesLimit > out.RedeemablesLimit {
		return base, apierr.InvalidPayload("applicable_redeemables_limit must not be above redeemables_limit")
	}
	for _, a := range []*[]string{&out.ExclusiveCategories, &out.JointCategories, &out.InitialAmountModeCategories,
		&out.DiscountedAmountModeCategories, &out.NoEffectSkipCategories, &out.NoEffectRedeemAnywayCategories} {
		if *a == nil {
			*a = []string{}
		}
	}
	if out.ApplicableRedeemablesCategoryLimits == nil {
		out.ApplicableRedeemablesCategoryLimits = map[string]int{}
	}
	return out, nil
}

func (h handler) listStackingRules(c echo.Context) error {
	_, s, _, err := h.stackingRules(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data_ref": "data", "data": []any{viewStackingRules(s)}, "total": 1})
}

func (h handler) createStackingRules(c echo.Context) error {
	p, _, found, err := h.stackingRules(c)
	if err != nil {
		return err
	}
	if found {
		return apierr.Duplicate("stacking_rules", "Project "+p.ID+" has its own stacking rules: change them with PUT, or restore the defaults with DELETE.")
	}
	rules, err := readStackingRules(c, tenancy.DefaultStackingRules())
	if err != nil {
		return err
	}
	s := tenancy.StoredStackingRules{ID: ids.New("stack_rules_"), Rules: rules, CreatedAt: timeNow()}
	ctx := c.Request().Context()
	if err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error { return tenancy.PutStackingRules(ctx, tx, p.ID, s, true) }); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewStackingRules(s))
}

func (h handler) getStackingRules(c echo.Context) error {
	_, s, _, err := h.namedStackingRules(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewStackingRules(s))
}

func (h handler) updateStackingRules(c echo.Context) error {
	p, s, found, err := h.namedStackingRules(c)
	if err != nil {
		return err
	}
	if s.Rules, err = readStackingRules(c, s.Rules); err != nil {
		return err
	}
	now := timeNow()
	if !found {
		s.ID, s.CreatedAt = ids.New("stack_rules_"), now
	} else {
		s.UpdatedAt = &now
	}
	ctx := c.Request().Context()
	if err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error { return tenancy.PutStackingRules(ctx, tx, p.ID, s, !found) }); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewStackingRules(s))
}

func (h handler) deleteStackingRules(c echo.Context) error {
	p, _, _, err := h.namedStackingRules(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error { return tenancy.DeleteStackingRules(ctx, tx, p.ID) }); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func timeNow() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }
