package segments

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/listq"
)

const columns = `id, name, type, filter, sync_action_id, created_at`

func scan(r pgx.Row) (Segment, error) {
	var s Segment
	var filter []byte
	if err := r.Scan(&s.ID, &s.Name, &s.Type, &filter, &s.SyncActionID, &s.CreatedAt); err != nil {
		return Segment{}, err
	}
	if filter != nil {
		s.Filter = filter
	}
	return s, nil
}

func insert(ctx context.Context, q db.Querier, projectID string, s Segment) error {
	var filter any
	if s.Filter != nil {
		filter = string(s.Filter)
	}
	_, err := q.Exec(ctx, `INSERT INTO segments (project_id, id, name, type, filter, sync_action_id, created_at)
		VALUES ($1, $2, $3, $4, $5::JSONB, $6, $7)`, projectID, s.ID, s.Name, s.Type, filter, s.SyncActionID, s.CreatedAt)
	return err
}

func get(ctx context.Context, q db.Querier, projectID, id string) (Segment, error) {
	return scan(q.QueryRow(ctx, `SELECT `+columns+` FROM segments WHERE project_id = $1 AND id = $2`, projectID, id))
}

// filterSegments are the project's auto-update and passive segments.
func filterSegments(ctx context.Context, q db.Querier, projectID string) ([]Segment, error) {
	return db.Collect(scan)(q.Query(ctx, `SELECT `+columns+` FROM segments WHERE project_id = $1 AND type <> 'static' ORDER BY id`,
		projectID))
}

// countFilterSegments counts them, locking nothing: the limit is checked
// in a serializable transaction, so two creations past it do not both
// commit.
func countFilterSegments(ctx context.Context, q db.Querier, projectID string) (n int, err error) {
	err = q.QueryRow(ctx, `SELECT count(*) FROM segments WHERE project_id = $1 AND type <> 'static'`, projectID).Scan(&n)
	return n, err
}

// remove deletes a segment and its members; the members of a large one go
// in the same statement's transaction, which the caller keeps short by
// deleting them in batches first (dropMembers).
func remove(ctx context.Context, q db.Querier, projectID, id string) (bool, error) {
	tag, err := q.Exec(ctx, `DELETE FROM segments WHERE project_id = $1 AND id = $2`, projectID, id)
	return tag.RowsAffected() > 0, err
}

// dropMembers deletes up to n members of a segment, returning how many.
func dropMembers(ctx context.Context, q db.Querier, projectID, segmentID string, n int) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM segment_members WHERE project_id = $1 AND segment_id = $2 AND customer_id IN
		(SELECT customer_id FROM segment_members WHERE project_id = $1 AND segment_id = $2 LIMIT $3)`, projectID, segmentID, n)
	return tag.RowsAffected(), err
}

// addMembers makes the customers of ids members, answering those that
// were not.
func addMembers(ctx context.Context, q db.Querier, projectID, segmentID string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `INSERT INTO segment_members (project_id, segment_id, customer_id)
		SELECT $1, $2, unnest($3::TEXT[]) ON CONFLICT DO NOTHING RETURNING customer_id`, projectID, segmentID, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// insertMatching makes members of the customers the subquery sub yields
// (customers.Matching: $1 project, $2 and $3 the id range, then its own
// arguments), answering those that were not; segmentArg is the segment
// id's placeholder among them.
func insertMatching(ctx context.Context, q db.Querier, sub, segmentArg string, args []any) ([]string, error) {
	rows, err := q.Query(ctx, `INSERT INTO segment_members (project_id, segment_id, customer_id)
		SELECT $1, `+segmentArg+`, m.id FROM (`+sub+`) AS m ON CONFLICT DO NOTHING RETURNING customer_id`, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// matchingIDs are the ids the subquery sub yields (customers.Matching).
func matchingIDs(ctx context.Context, q db.Querier, sub string, args []any) ([]string, error) {
	rows, err := q.Query(ctx, sub, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// membership is who of customerIDs is in which segment.
type membership map[string]map[string]bool // customer → segment → in

func membersOf(ctx context.Context, q db.Querier, projectID string, customerIDs []string) (membership, error) {
	rows, err := q.Query(ctx, `SELECT customer_id, segment_id FROM segment_members WHERE project_id = $1 AND customer_id = ANY($2)`,
		projectID, customerIDs)
	if err != nil {
		return nil, err
	}
	out := membership{}
	var c, s string
	_, err = pgx.ForEachRow(rows, []any{&c, &s}, func() error {
		if out[c] == nil {
			out[c] = map[string]bool{}
		}
		out[c][s] = true
		return nil
	})
	return out, err
}

// change is one membership entered or left.
type change struct{ customer, segment string }

func queueChanges(b *pgx.Batch, projectID string, entered, left []change) {
	split := func(cs []change) (cust, seg []string) {
		for _, c := range cs {
			cust, seg = append(cust, c.customer), append(seg, c.segment)
		}
		return cust, seg
	}
	if len(entered) > 0 {
		c, s := split(entered)
		b.Queue(`INSERT INTO segment_members (project_id, segment_id, customer_id)
			SELECT $1, v.s, v.c FROM unnest($2::TEXT[], $3::TEXT[]) AS v(s, c) ON CONFLICT DO NOTHING`, projectID, s, c)
	}
	if len(left) > 0 {
		c, s := split(left)
		b.Queue(`DELETE FROM segment_members WHERE project_id = $1 AND (segment_id, customer_id) IN
			(SELECT v.s, v.c FROM unnest($2::TEXT[], $3::TEXT[]) AS v(s, c))`, projectID, s, c)
	}
}

// customerSegments are the segments a customer is in, by name.
func customerSegments(ctx context.Context, q db.Querier, projectID, customerID string) ([]Segment, error) {
	return db.Collect(scan)(q.Query(ctx, `SELECT `+prefixed("s.")+` FROM segments AS s
		JOIN segment_members AS m ON m.project_id = s.project_id AND m.segment_id = s.id
		WHERE s.project_id = $1 AND m.customer_id = $2 ORDER BY s.id`, projectID, customerID))
}

// staticOf are the static segments that customerID is in: what
// a request's live evaluation cannot recompute.
func staticOf(ctx context.Context, q db.Querier, projectID, customerID string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT m.segment_id FROM segment_members AS m
		JOIN segments AS s ON s.project_id = m.project_id AND s.id = m.segment_id
		WHERE m.project_id = $1 AND m.customer_id = $2 AND s.type = 'static'`, projectID, customerID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func prefixed(p string) string {
	cols := strings.Split(columns, ", ")
	for i := range cols {
		cols[i] = p + cols[i]
	}
	return strings.Join(cols, ", ")
}

// listQuery selects a page of segments.
type listQuery struct {
	listq.Query
	IDs   []string
	Where string // a filters condition, with its arguments in Args from $2
	Args  []any
}

var sortKeys = map[string]string{"created_at": "id", "name": "name"}

func list(ctx context.Context, q db.Querier, projectID string, lq listQuery) ([]Segment, int, error) {
	args := append([]any{projectID}, lq.Args...)
	where := []string{"project_id = $1"}
	if lq.Where != "" {
		where = append(where, lq.Where)
	}
	if len(lq.IDs) > 0 {
		args = append(args, lq.IDs)
		where = append(where, fmt.Sprintf("id = ANY($%d)", len(args)))
	}
	countWhere, countArgs := strings.Join(where, " AND "), append([]any(nil), args...)
	cond, orderBy, args := lq.Keyset("segments", sortKeys[lq.Key], args)
	out, err := db.Collect(scan)(q.Query(ctx, `SELECT `+columns+` FROM segments WHERE `+strings.Join(where, " AND ")+cond+
		` ORDER BY `+orderBy+fmt.Sprintf(` LIMIT $%d`, len(args)+1)+lq.OffsetSQL(), append(args, lq.Limit+1)...))
	if err != nil {
		return nil, 0, err
	}
	var total int
	err = q.QueryRow(ctx, `SELECT count(*) FROM segments WHERE `+countWhere, countArgs...).Scan(&total)
	return out, total, err
}

// membersCond is the condition on the customers' id column that keeps a
// segment's members (the customers list's segment_id).
func membersCond(segmentArg string) string {
	return `id IN (SELECT customer_id FROM segment_members WHERE project_id = $1 AND segment_id = ` + segmentArg + `)`
}
