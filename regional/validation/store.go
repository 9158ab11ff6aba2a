package validation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
)

// This package owns validation_rules and validation_rule_assignments.

const ruleColumns = `id, name, rules, bundle_rules, error, applicable_to, type, context_type, version, created_at, updated_at,
	(SELECT count(*) FROM validation_rule_assignments a
	 WHERE a.project_id = validation_rules.project_id AND a.rule_id = validation_rules.id)`

func scanRule(row pgx.Row) (Rule, error) {
	var r Rule
	var rules string
	var bundle, errDoc, applicable *string
	if err := row.Scan(&r.ID, &r.Name, &rules, &bundle, &errDoc, &applicable, &r.Type, &r.ContextType, &r.Version,
		&r.CreatedAt, &r.UpdatedAt, &r.AssignmentsCount); err != nil {
		return Rule{}, err
	}
	r.Rules = json.RawMessage(rules)
	r.BundleRules, r.Error, r.ApplicableTo = raw(bundle), raw(errDoc), raw(applicable)
	return r, nil
}

func raw(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

func nullText(m json.RawMessage) *string {
	if m == nil {
		return nil
	}
	s := string(m)
	return &s
}

// getRule reads a rule, or answers its 404.
func getRule(ctx context.Context, q db.Querier, projectID, id string, lock bool) (Rule, error) {
	r, err := scanRule(q.QueryRow(ctx, `SELECT `+ruleColumns+` FROM validation_rules
		WHERE project_id = $1 AND id = $2`+db.ForUpdate(lock), projectID, id))
	if errors.Is(err, db.ErrNotFound) {
		return Rule{}, apierr.NotFound("validation_rule", id)
	}
	return r, err
}

func rulesDoc(r Rule) string {
	if r.Rules == nil {
		return string(emptyRules)
	}
	return string(r.Rules)
}

func insertRule(ctx context.Context, q db.Querier, projectID string, r Rule) error {
	_, err := q.Exec(ctx, `INSERT INTO validation_rules (project_id, id, name, rules, bundle_rules, error, applicable_to, type,
		context_type, version, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		projectID, r.ID, r.Name, rulesDoc(r), nullText(r.BundleRules), nullText(r.Error), nullText(r.ApplicableTo), r.Type, r.ContextType,
		r.Version, r.CreatedAt)
	return nameTaken(err, r.Name)
}

func updateRule(ctx context.Context, q db.Querier, projectID string, r Rule) error {
	_, err := q.Exec(ctx, `UPDATE validation_rules SET name = $3, rules = $4, bundle_rules = $5, error = $6, applicable_to = $7,
		type = $8, context_type = $9, version = $10, updated_at = $11 WHERE project_id = $1 AND id = $2`,
		projectID, r.ID, r.Name, rulesDoc(r), nullText(r.BundleRules), nullText(r.Error), nullText(r.ApplicableTo), r.Type, r.ContextType,
		r.Version, r.UpdatedAt)
	return nameTaken(err, r.Name)
}

func nameTaken(err error, name string) error {
	if errors.Is(err, db.ErrConflict) {
		return apierr.Duplicate("validation_rule", fmt.Sprintf("A validation rule named %q exists already; a rule's name is unique in the project.", name))
	}
	return err
}

// deleteRule removes a rule with its assignments.
func deleteRule(ctx context.Context, q db.Querier, projectID, id string) error {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM validation_rule_assignments WHERE project_id = $1 AND rule_id = $2`, projectID, id)
	b.Queue(`DELETE FROM validation_rules WHERE project_id = $1 AND id = $2`, projectID, id)
	return q.SendBatch(ctx, b).Close()
}

// ruleFilter narrows the rule list by creation time.
type ruleFilter struct{ start, end *time.Time }

var ruleSortKeys = map[string]string{"created_at": "id", "updated_at": "COALESCE(updated_at, created_at)", "name": "name"}

func listRules(ctx context.Context, q db.Querier, projectID string, f ruleFilter, lq listq.Query) ([]Rule, int, error) {
	where, args := `project_id = $1`, []any{projectID}
	if f.start != nil {
		args = append(args, *f.start)
		where += fmt.Sprintf(` AND created_at >= $%d`, len(args))
	}
	if f.end != nil {
		args = append(args, *f.end)
		where += fmt.Sprintf(` AND created_at <= $%d`, len(args))
	}
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM validation_rules WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	cond, orderBy, args := lq.Keyset("validation_rules", ruleSortKeys[lq.Key], args)
	args = append(args, lq.Limit+1)
	rs, err := db.Collect(scanRule)(q.Query(ctx, fmt.Sprintf(`SELECT `+ruleColumns+` FROM validation_rules
		WHERE %s%s ORDER BY %s LIMIT $%d%s`, where, cond, orderBy, len(args), lq.OffsetSQL()), args...))
	return rs, total, err
}

// versions reads the current version of each of ids; a rule missing is a 404.
func versions(ctx context.Context, q db.Querier, projectID string, ids []string) (map[string]int64, error) {
	out := make(map[string]int64, len(ids))
	rows, err := q.Query(ctx, `SELECT id, version FROM validation_rules WHERE project_id = $1 AND id = ANY($2)`, projectID, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return nil, err
		}
		out[id] = v
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			return nil, apierr.NotFound("validation_rule", id)
		}
	}
	return out, nil
}

// Versions are rules' current versions by id, read in a caller's batch
// (QueueVersions) for PrepareRead.
type Versions map[string]int64

// QueueVersions queues into b the read of the current versions of rules
// ids and of the rules assigned to objectIDs, into out: the version check
// of the rules a request will run, in the round trip that reads which
// rules its objects have.
func QueueVersions(b *pgx.Batch, projectID string, ids, objectIDs []string, out Versions) {
	b.Queue(`SELECT id, version FROM validation_rules WHERE project_id = $1 AND id = ANY($2::TEXT[])
		UNION ALL SELECT r.id, r.version FROM validation_rule_assignments a
		JOIN validation_rules r ON r.project_id = a.project_id AND r.id = a.rule_id
		WHERE a.project_id = $1 AND a.related_object_id = ANY($3::TEXT[])`, projectID, ids, objectIDs).Query(func(rows pgx.Rows) error {
		var id string
		var v int64
		_, err := pgx.ForEachRow(rows, []any{&id, &v}, func() error { out[id] = v; return nil })
		return err
	})
}

// of is the versions of ids, as versions reads them: a rule missing is a
// 404.
func (read Versions) of(ids []string) (map[string]int64, error) {
	for _, id := range ids {
		if _, ok := read[id]; !ok {
			return nil, apierr.NotFound("validation_rule", id)
		}
	}
	return read, nil
}

// sources reads what compiling ids needs: version, rules, error, applicable_to.
func sources(ctx context.Context, q db.Querier, projectID string, ids []string) ([]Rule, error) {
	return db.Collect(func(row pgx.Row) (Rule, error) {
		var r Rule
		var rules string
		var errDoc, applicable *string
		err := row.Scan(&r.ID, &r.Version, &rules, &errDoc, &applicable)
		r.Rules, r.Error, r.ApplicableTo = json.RawMessage(rules), raw(errDoc), raw(applicable)
		return r, err
	})(q.Query(ctx, `SELECT id, version, rules, error, applicable_to FROM validation_rules
		WHERE project_id = $1 AND id = ANY($2)`, projectID, ids))
}

const assignmentColumns = `id, rule_id, related_object_type, related_object_id, created_at`

func scanAssignment(row pgx.Row) (Assignment, error) {
	var a Assignment
	err := row.Scan(&a.ID, &a.RuleID, &a.RelatedObjectType, &a.RelatedObjectID, &a.CreatedAt)
	return a, err
}

// insertAssignment adds an assignment; force replaces the rule's assignment
// to the same object, otherwise that is a 409.
func insertAssignment(ctx context.Context, q db.Querier, projectID string, a Assignment, force bool) error {
	if force {
		if _, err := q.Exec(ctx, `DELETE FROM validation_rule_assignments WHERE project_id = $1 AND rule_id = $2
			AND related_object_type = $3 AND related_object_id = $4`, projectID, a.RuleID, a.RelatedObjectType, a.RelatedObjectID); err != nil {
			return err
		}
	}
	_, err := q.Exec(ctx, `INSERT INTO validation_rule_assignments (project_id, id, rule_id, related_object_type, related_object_id,
		created_at) VALUES ($1, $2, $3, $4, $5, $6)`, projectID, a.ID, a.RuleID, a.RelatedObjectType, a.RelatedObjectID, a.CreatedAt)
	if errors.Is(err, db.ErrConflict) {
		return apierr.Duplicate("validation_rules_assignment", fmt.Sprintf("Validation rule %s is already assigned to %s %s; pass force=true to replace the assignment.",
			a.RuleID, a.RelatedObjectType, a.RelatedObjectID))
	}
	return err
}

// deleteAssignment removes a rule's assignment, or answers its 404.
func deleteAssignment(ctx context.Context, q db.Querier, ref AssignmentRef) error {
	tag, err := q.Exec(ctx, `DELETE FROM validation_rule_assignments WHERE project_id = $1 AND rule_id = $2 AND id = $3`,
		ref.Project, ref.Rule, ref.ID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return apierr.NotFound("validation_rules_assignment", ref.ID)
	}
	return nil
}

// assignmentFilter narrows an assignment list.
type assignmentFilter struct{ ruleID, objectID string }

func listAssignments(ctx context.Context, q db.Querier, projectID string, f assignmentFilter, lq listq.Query) ([]Assignment, int, error) {
	where, args := `project_id = $1`, []any{projectID}
	if f.ruleID != "" {
		args = append(args, f.ruleID)
		where += fmt.Sprintf(` AND rule_id = $%d`, len(args))
	}
	if f.objectID != "" {
		args = append(args, f.objectID)
		where += fmt.Sprintf(` AND related_object_id = $%d`, len(args))
	}
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM validation_rule_assignments WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	cond, orderBy, args := lq.Keyset("validation_rule_assignments", "id", args)
	args = append(args, lq.Limit+1)
	as, err := db.Collect(scanAssignment)(q.Query(ctx, fmt.Sprintf(`SELECT `+assignmentColumns+` FROM validation_rule_assignments
		WHERE %s%s ORDER BY %s LIMIT $%d%s`, where, cond, orderBy, len(args), lq.OffsetSQL()), args...))
	return as, total, err
}

// rulesOf lists the rules assigned to an object, in assignment order.
func rulesOf(ctx context.Context, q db.Querier, projectID, objectID string) ([]string, error) {
	return db.Collect(func(row pgx.Row) (string, error) {
		var id string
		return id, row.Scan(&id)
	})(q.Query(ctx, `SELECT rule_id FROM validation_rule_assignments WHERE project_id = $1 AND related_object_id = $2
		ORDER BY id`, projectID, objectID))
}

// RulesOfAll returns the ids of the rules assigned to each of objectIDs, in
// assignment order, in one read: the validation engine asks for a request's
// vouchers, tiers and campaigns at once.
func (s *Service) RulesOfAll(ctx context.Context, q db.Querier, projectID string, objectIDs []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(objectIDs) == 0 {
		return out, nil
	}
	b := &pgx.Batch{}
	QueueRulesOf(b, projectID, objectIDs, out)
	return out, q.SendBatch(ctx, b).Close()
}

// QueueRulesOf queues RulesOfAll's read into b, its answers into out.
func QueueRulesOf(b *pgx.Batch, projectID string, objectIDs []string, out map[string][]string) {
	b.Queue(`SELECT related_object_id, rule_id FROM validation_rule_assignments
		WHERE project_id = $1 AND related_object_id = ANY($2::TEXT[]) ORDER BY id`, projectID, objectIDs).Query(func(rows pgx.Rows) error {
		var obj, rule string
		_, err := pgx.ForEachRow(rows, []any{&obj, &rule}, func() error { out[obj] = append(out[obj], rule); return nil })
		return err
	})
}

// ExportRuleIDs is the ids of the rules assigned to the object of project
// $1 that idSQL names, comma-separated in assignment order (a scalar
// subquery, NULL for none): the validation_rules_id column of the voucher
// export.
func ExportRuleIDs(idSQL string) string {
	return `(SELECT string_agg(a.rule_id, ',' ORDER BY a.id) FROM validation_rule_assignments a
		WHERE a.project_id = $1 AND a.related_object_id = ` + idSQL + `)`
}

// AssignIn assigns rules to obj in the caller's transaction (a promotion
// tier created with its rules): each rule must exist.
func (s *Service) AssignIn(ctx context.Context, tx pgx.Tx, projectID string, obj Object, ruleIDs []string) ([]AssignmentView, error) {
	out := make([]AssignmentView, 0, len(ruleIDs))
	for _, id := range ruleIDs {
		if _, err := getRule(ctx, tx, projectID, id, false); err != nil {
			return nil, err
		}
		a := Assignment{ID: ids.New("asgm_"), RuleID: id, RelatedObjectType: obj.Type, RelatedObjectID: obj.ID, CreatedAt: s.clock.Now()}
		if err := insertAssignment(ctx, tx, projectID, a, false); err != nil {
			return nil, err
		}
		out = append(out, a.View())
	}
	return out, nil
}

// AssignmentsOf are the assignments of each of objectIDs, in assignment
// order, in one read.
func AssignmentsOf(ctx context.Context, q db.Querier, projectID string, objectIDs []string) (map[string][]AssignmentView, error) {
	out := map[string][]AssignmentView{}
	as, err := db.Collect(scanAssignment)(q.Query(ctx, `SELECT `+assignmentColumns+` FROM validation_rule_assignments
		WHERE project_id = $1 AND related_object_id = ANY($2::TEXT[]) ORDER BY id`, projectID, objectIDs))
	for _, a := range as {
		out[a.RelatedObjectID] = append(out[a.RelatedObjectID], a.View())
	}
	return out, err
}

// DropAssignmentsIn removes the assignments of deleted objects.
func DropAssignmentsIn(ctx context.Context, q db.Querier, projectID string, objectIDs []string) error {
	_, err := q.Exec(ctx, `DELETE FROM validation_rule_assignments WHERE project_id = $1 AND related_object_id = ANY($2::TEXT[])`,
		projectID, objectIDs)
	return err
}
