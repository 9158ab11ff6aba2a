package loyalty

import (
	"context"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/categories"
)

// SetCategory makes a campaign's category the one name or id names
// (categories.Resolve: an unknown id is 404, an unknown name a new
// category): a's category and category_id become its name and id, or
// none. The campaign keeps them as written; FollowCategory keeps them
// when the category is renamed or deleted.
func SetCategory[V any](ctx context.Context, q db.Querier, projectID string, a *AttrsOf[V], name, id *string, now time.Time) error {
	c, err := categories.Resolve(ctx, q, projectID, name, id, now)
	if err != nil {
		return err
	}
	a.Category, a.CategoryID, a.Cat = nil, nil, c
	if c != nil {
		a.Category, a.CategoryID = &c.Name, &c.ID
	}
	return nil
}

// setChangedCategory is SetCategory for the category a change left in a,
// when it is not the one the campaign had (name, id): a change that does
// not touch the category does not read it.
func setChangedCategory[V any](ctx context.Context, q db.Querier, projectID string, a *AttrsOf[V], name, id *string, now time.Time) error {
	if same(name, a.Category) && same(id, a.CategoryID) {
		return nil
	}
	return SetCategory(ctx, q, projectID, a, a.Category, a.CategoryID, now)
}

func same(a, b *string) bool { return a == b || a != nil && b != nil && *a == *b }
