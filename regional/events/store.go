package events

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/listq"
)

// activityFilter narrows a customer's activities: created within
// [Start, End] (either open when nil) and of Type when it is not empty.
type activityFilter struct {
	Start, End *time.Time
	Type       string
}

// activities is the page lq asks of the activities of customer
// customerID that f lets through, with one more than lq.Limit when more
// follow. Ids are in creation order, so created_at and -created_at read
// the key's order.
func activities(ctx context.Context, q db.Querier, projectID, customerID string, f activityFilter, lq listq.Query) ([]Activity, error) {
	args := []any{projectID, customerID}
	where := `project_id = $1 AND customer_id = $2`
	if f.Start != nil {
		args = append(args, *f.Start)
		where += fmt.Sprintf(" AND created_at >= $%d", len(args))
	}
	if f.End != nil {
		args = append(args, *f.End)
		where += fmt.Sprintf(" AND created_at <= $%d", len(args))
	}
	if f.Type != "" {
		args = append(args, f.Type)
		where += fmt.Sprintf(" AND type = $%d", len(args))
	}
	cond, orderBy, args := lq.Keyset("customer_activities", "id", args)
	args = append(args, lq.Limit+1)
	rows, err := q.Query(ctx, `SELECT id, type, data, created_at, group_id FROM customer_activities WHERE `+where+cond+
		` ORDER BY `+orderBy+fmt.Sprintf(" LIMIT $%d", len(args)), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Activity, error) {
		var a Activity
		var data []byte
		err := r.Scan(&a.ID, &a.Type, &data, &a.CreatedAt.Time, &a.GroupID)
		a.Data = data
		return a, err
	})
}
