package qualifications

import (
	"context"

	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/categories"
	"github.com/tallyhq/tally/regional/validation"
	"github.com/tallyhq/tally/tenancy"
)

// expansions reads what options.expand adds to the page's redeemables, in
// one query each, and returns what adds it to one's view: category, its
// category (its own, else its campaign's) with the stacking rules' type;
// validation_rules, the assignments of its rules (to it and to its
// campaign), each VALID since it qualified. redeemable adds nothing: every
// redeemable is shown with its own fields (id, object, name, campaign,
// metadata, created_at) already.
func (s *Service) expansions(ctx context.Context, projectID string, page []*offer, expand map[string]bool,
	rules tenancy.StackingRules) (func(*offer, map[string]any), error) {
	var cats map[string]categories.Category
	if expand["category"] {
		var ids []string
		for _, c := range page {
			if id := c.categoryID; id != "" {
				ids = append(ids, id)
			}
		}
		var err error
		if cats, err = categories.ByID(ctx, s.engine.Pool, projectID, ids); err != nil {
			return nil, err
		}
	}
	var asg map[string][]validation.AssignmentView
	if expand["validation_rules"] {
		var objects []string
		for _, c := range page {
			objects = append(objects, c.objectID)
			if id := c.campaignID(); id != "" {
				objects = append(objects, id)
			}
		}
		var err error
		if asg, err = validation.AssignmentsOf(ctx, s.engine.Pool, projectID, objects); err != nil {
			return nil, err
		}
	}
	return func(c *offer, v map[string]any) {
		if cats != nil {
			v["categories"] = categoryList(cats, c.categoryID, rules)
		}
		if asg != nil {
			v["validation_rules_assignments"] = assignmentList(asg, c)
		}
	}, nil
}

// categoryList is the offer's category, if it has one, with the stacking
// rules' type.
func categoryList(cats map[string]categories.Category, id string, rules tenancy.StackingRules) []any {
	list := []any{}
	if k, ok := cats[id]; ok {
		view := map[string]any{"id": k.ID, "name": k.Name, "hierarchy": k.Hierarchy, "object": "category",
			"created_at": jsonx.Time{Time: k.CreatedAt}, "updated_at": jsonx.Ptr(k.UpdatedAt)}
		switch {
		case contains(rules.ExclusiveCategories, k.ID):
			view["stacking_rules_type"] = "EXCLUSIVE"
		case contains(rules.JointCategories, k.ID):
			view["stacking_rules_type"] = "JOINT"
		}
		list = append(list, view)
	}
	return list
}

// assignmentList are the assignments of the offer's rules and of its
// campaign's.
func assignmentList(asg map[string][]validation.AssignmentView, c *offer) map[string]any {
	data := []any{}
	for _, o := range []string{c.objectID, c.campaignID()} {
		if o == "" {
			continue
		}
		for _, a := range asg[o] {
			data = append(data, map[string]any{"id": a.ID, "rule_id": a.RuleID, "related_object_id": a.RelatedObjectID,
				"related_object_type": a.RelatedObjectType, "created_at": a.CreatedAt, "object": a.Object, "validation_status": "VALID"})
		}
	}
	return map[string]any{"object": "list", "data_ref": "data", "data": data, "total": len(data)}
}
