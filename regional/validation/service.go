package validation

import (
	"context"
	"fmt"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/geo"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/rules"
)

// CacheSize is how many compiled rules an instance keeps.
const CacheSize = 2_000

// Service holds the rules of validation rules.
type Service struct {
	pool  *db.Pool
	clock *clock.Clock
	// cache keeps compiled rules by project and id with the version they
	// were compiled from: a rule changed (here or on another instance) has
	// a new version and is compiled again when next evaluated.
	cache      *lru.Cache[string, compiled]
	recompiles atomic.Int64
	locations  Locations
	colls      Collections
}

// Collections marks which of an order's lines are in the product
// collections ids (regional/collections): order.items conditions and
// applicable_to entries that name a products_collection read the marks.
type Collections interface {
	Mark(ctx context.Context, q db.Querier, projectID string, ids []string, o *rules.Order) error
}

// Locations gives the shapes of a project's locations that exist among
// ids ($in_location conditions name them; regional/locations).
type Locations interface {
	Shapes(ctx context.Context, projectID string, ids []string) (map[string]geo.Shape, error)
}

type compiled struct {
	version int64
	prog    *rules.Program
}

// NewService returns the validation rule service; locs gives the shapes
// $in_location conditions test against, colls the product collections
// rules name.
func NewService(pool *db.Pool, clk *clock.Clock, locs Locations, colls Collections) *Service {
	c, err := lru.New[string, compiled](CacheSize)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &Service{pool: pool, clock: clk, cache: c, locations: locs, colls: colls}
}

func cacheKey(projectID, id string) string { return projectID + "/" + id }

// Create stores a new rule, compiled first: a rule that does not compile
// is a 400 naming what is wrong.
func (s *Service) Create(ctx context.Context, projectID string, b Body) (View, error) {
	r := Rule{ID: ids.New("val_"), Version: 1, CreatedAt: s.clock.Now()}
	if err := b.apply(&r, true); err != nil {
		return View{}, err
	}
	prog, err := rules.Compile(r.Rules, r.Error, r.ApplicableTo)
	if err != nil {
		return View{}, err
	}
	if err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error { return insertRule(ctx, tx, projectID, r) }); err != nil {
		return View{}, err
	}
	s.cache.Add(cacheKey(projectID, r.ID), compiled{r.Version, prog})
	return r.View(), nil
}

// CreateIn stores a new rule in the caller's transaction (a campaign made
// from a template takes a copy of the template's rules with it); the
// rule is compiled again on its first evaluation.
func (s *Service) CreateIn(ctx context.Context, tx pgx.Tx, projectID string, b Body) (View, error) {
	r := Rule{ID: ids.New("val_"), Version: 1, CreatedAt: s.clock.Now()}
	if err := b.apply(&r, true); err != nil {
		return View{}, err
	}
	if _, err := rules.Compile(r.Rules, r.Error, r.ApplicableTo); err != nil {
		return View{}, err
	}
	return r.View(), insertRule(ctx, tx, projectID, r)
}

// Get reads a rule.
func (s *Service) Get(ctx context.Context, projectID, id string) (View, error) {
	r, err := getRule(ctx, s.pool, projectID, id, false)
	return r.View(), err
}

// Update changes what the body names; the rule is compiled again, and its
// version moves on so every instance compiles it anew.
func (s *Service) Update(ctx context.Context, projectID, id string, b Body) (View, error) {
	var out Rule
	var prog *rules.Program
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := getRule(ctx, tx, projectID, id, true)
		if err != nil {
			return err
		}
		if err := b.apply(&r, false); err != nil {
			return err
		}
		if prog, err = rules.Compile(r.Rules, r.Error, r.ApplicableTo); err != nil {
			return err
		}
		now := s.clock.Now()
		r.UpdatedAt = &now
		r.Version++
		out = r
		return updateRule(ctx, tx, projectID, r)
	})
	if err != nil {
		return View{}, err
	}
	s.cache.Add(cacheKey(projectID, id), compiled{out.Version, prog})
	return out.View(), nil
}

// Delete removes a rule and its assignments.
func (s *Service) Delete(ctx context.Context, projectID, id string) error {
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := getRule(ctx, tx, projectID, id, true); err != nil {
			return err
		}
		return deleteRule(ctx, tx, projectID, id)
	})
	if err == nil {
		s.cache.Remove(cacheKey(projectID, id))
	}
	return err
}

// List answers a page of rules.
func (s *Service) List(ctx context.Context, projectID string, f ruleFilter, lq listq.Query) ([]View, int, bool, string, error) {
	rs, total, err := listRules(ctx, s.pool, projectID, f, lq)
	if err != nil {
		return nil, 0, false, "", err
	}
	page, more, next := listq.PageOf(rs, lq.Limit, func(r Rule) string { return r.ID }, Rule.View)
	return page, total, more, next, nil
}

// Assign assigns a rule to an object, kept by the type and id given.
func (s *Service) Assign(ctx context.Context, projectID, ruleID string, b Body, force bool) (AssignmentView, error) {
	typ, objectID, err := b.assignmentOf()
	if err != nil {
		return AssignmentView{}, err
	}
	a := Assignment{ID: ids.New("asgm_"), RuleID: ruleID, RelatedObjectType: typ, RelatedObjectID: objectID, CreatedAt: s.clock.Now()}
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := getRule(ctx, tx, projectID, ruleID, false); err != nil {
			return err
		}
		return insertAssignment(ctx, tx, projectID, a, force)
	})
	return a.View(), err
}

// Unassign removes one of a rule's assignments.
func (s *Service) Unassign(ctx context.Context, ref AssignmentRef) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := getRule(ctx, tx, ref.Project, ref.Rule, false); err != nil {
			return err
		}
		return deleteAssignment(ctx, tx, ref)
	})
}

// Assignments answers a page of assignments: of one rule (404 when it does
// not exist), of one object, or all.
func (s *Service) Assignments(ctx context.Context, projectID string, f assignmentFilter, mustExist bool, lq listq.Query) ([]AssignmentView, int, bool, string, error) {
	if mustExist {
		if _, err := getRule(ctx, s.pool, projectID, f.ruleID, false); err != nil {
			return nil, 0, false, "", err
		}
	}
	as, total, err := listAssignments(ctx, s.pool, projectID, f, lq)
	if err != nil {
		return nil, 0, false, "", err
	}
	page, more, next := listq.PageOf(as, lq.Limit, func(a Assignment) string { return a.ID }, Assignment.View)
	return page, total, more, next, nil
}

// RulesOf returns the ids of the rules assigned to an object (a campaign,
// voucher, promotion tier, earning rule…), in the order they were assigned.
func (s *Service) RulesOf(ctx context.Context, projectID, relatedObjectID string) ([]string, error) {
	return rulesOf(ctx, s.pool, projectID, relatedObjectID)
}

// Evaluate evaluates a rule against in. The rule is compiled once per
// version: the call reads the rule's version (one indexed read) and
// compiles it only when this instance has not seen that version. A rule
// that does not exist is apierr's 404.
func (s *Service) Evaluate(ctx context.Context, projectID, ruleID string, in rules.Input) (rules.Verdict, error) {
	vs, err := s.EvaluateAll(ctx, projectID, []string{ruleID}, in)
	if err != nil {
		return rules.Verdict{}, err
	}
	return vs[0], nil
}

// EvaluateAll evaluates several rules against in with one read of their
// versions: the verdicts are in the order of ruleIDs.
func (s *Service) EvaluateAll(ctx context.Context, projectID string, ruleIDs []string, in rules.Input) ([]rules.Verdict, error) {
	return s.EvaluateAllIn(ctx, s.pool, projectID, ruleIDs, in)
}

// EvaluateAllIn is EvaluateAll reading through q: the caller's transaction
// (a redemption, which must not wait for a second connection). An order
// whose amounts are out of range (Order.Check) is a 400.
func (s *Service) EvaluateAllIn(ctx context.Context, q db.Querier, projectID string, ruleIDs []string, in rules.Input) ([]rules.Verdict, error) {
	if err := in.Order.Check(); err != nil {
		return nil, err
	}
	progs, err := s.programs(ctx, q, projectID, ruleIDs, nil)
	if err != nil {
		return nil, err
	}
	if in.Locations, err = s.shapes(ctx, projectID, progs); err != nil {
		return nil, err
	}
	if err := s.mark(ctx, q, projectID, progs, in.Order); err != nil {
		return nil, err
	}
	out := make([]rules.Verdict, len(ruleIDs))
	for i, id := range ruleIDs {
		out[i] = progs[i].Run(id, &in)
	}
	return out, nil
}

// shapes reads the shapes of the locations progs name, in one call: none
// when they name none.
func (s *Service) shapes(ctx context.Context, projectID string, progs []*rules.Program) (map[string]geo.Shape, error) {
	var ids []string
	for _, p := range progs {
		ids = append(ids, p.Locations()...)
	}
	if len(ids) == 0 || s.locations == nil {
		return nil, nil
	}
	return s.locations.Shapes(ctx, projectID, ids)
}

// programs returns the compiled rules of ids, compiling those whose stored
// version this instance has not compiled; the versions are read unless
// the caller read them already (read, nil for none).
func (s *Service) programs(ctx context.Context, q db.Querier, projectID string, ruleIDs []string, read Versions) ([]*rules.Program, error) {
	if len(ruleIDs) == 0 {
		return nil, nil
	}
	var current map[string]int64
	var err error
	if read != nil {
		current, err = read.of(ruleIDs)
	} else {
		current, err = versions(ctx, q, projectID, ruleIDs)
	}
	if err != nil {
		return nil, err
	}
	out := make([]*rules.Program, len(ruleIDs))
	var stale []string
	for i, id := range ruleIDs {
		if c, ok := s.cache.Get(cacheKey(projectID, id)); ok && c.version == current[id] {
			out[i] = c.prog
		} else {
			stale = append(stale, id)
		}
	}
	if len(stale) == 0 {
		return out, nil
	}
	rs, err := sources(ctx, q, projectID, stale)
	if err != nil {
		return nil, err
	}
	fresh := make(map[string]*rules.Program, len(rs))
	for _, r := range rs {
		prog, err := rules.Compile(r.Rules, r.Error, r.ApplicableTo)
		if err != nil {
			return nil, fmt.Errorf("validation: stored rule %s does not compile: %w", r.ID, err)
		}
		s.recompiles.Add(1)
		fresh[r.ID] = prog
		s.cache.Add(cacheKey(projectID, r.ID), compiled{r.Version, prog})
	}
	for i, id := range ruleIDs {
		if out[i] != nil {
			continue
		}
		if out[i] = fresh[id]; out[i] == nil { // deleted between the two reads
			return nil, apierr.NotFound("validation_rule", id)
		}
	}
	return out, nil
}

// Compiled is a rule as compiled at a version.
type Compiled struct {
	Version int64
	Program *rules.Program
}

// ProgramsSince are the compiled rules of ids by id, read with one version
// check: those of kept (the caller's from before) whose version is
// current, the instance's cached ones, and the others compiled, which it
// does not cache: qualifications' catalogue holds a project's every tier
// rule, more than the cache may, and would evict what validations use.
// A rule deleted meanwhile is left out.
func (s *Service) ProgramsSince(ctx context.Context, q db.Querier, projectID string, ids []string,
	kept map[string]Compiled) (map[string]Compiled, error) {
	current, err := versions(ctx, q, projectID, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Compiled, len(ids))
	var stale []string
	for _, id := range ids {
		if k, ok := kept[id]; ok && k.Version == current[id] {
			out[id] = k
		} else if c, ok := s.cache.Get(cacheKey(projectID, id)); ok && c.version == current[id] {
			out[id] = Compiled{c.version, c.prog}
		} else {
			stale = append(stale, id)
		}
	}
	if len(stale) == 0 {
		return out, nil
	}
	rs, err := sources(ctx, q, projectID, stale)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		prog, err := rules.Compile(r.Rules, r.Error, r.ApplicableTo)
		if err != nil {
			return nil, fmt.Errorf("validation: stored rule %s does not compile: %w", r.ID, err)
		}
		s.recompiles.Add(1)
		out[r.ID] = Compiled{r.Version, prog}
	}
	return out, nil
}

// Recompiles counts the rules this instance compiled when evaluating, for
// a version it had not seen (those written here were compiled then).
func (s *Service) Recompiles() int64 { return s.recompiles.Load() }

// Prepared are compiled rules read with one version check, to run against
// many inputs (a request's many redeemables), and the shapes of the
// locations they name.
type Prepared struct {
	progs map[string]*rules.Program
	locs  map[string]geo.Shape
}

// mark sets the collections of o's lines that progs name, in one call:
// none when they name none.
func (s *Service) mark(ctx context.Context, q db.Querier, projectID string, progs []*rules.Program, o *rules.Order) error {
	var ids []string
	for _, p := range progs {
		ids = append(ids, p.Collections()...)
	}
	if len(ids) == 0 || s.colls == nil {
		return nil
	}
	return s.colls.Mark(ctx, q, projectID, ids, o)
}

// Prepare compiles (or takes from the cache) the rules of ids, reading
// their versions once through q, and marks the lines of o (the order they
// will be run against) with the product collections they name.
func (s *Service) Prepare(ctx context.Context, q db.Querier, projectID string, ids []string, o *rules.Order) (Prepared, error) {
	return s.PrepareRead(ctx, q, projectID, ids, o, nil)
}

// PrepareRead is Prepare with the rules' versions read already, in the
// caller's batch (QueueVersions): when every rule is cached at its
// version, preparing them reads nothing. read nil reads them.
func (s *Service) PrepareRead(ctx context.Context, q db.Querier, projectID string, ids []string, o *rules.Order,
	read Versions) (Prepared, error) {
	progs, err := s.programs(ctx, q, projectID, ids, read)
	if err != nil {
		return Prepared{}, err
	}
	p := Prepared{progs: make(map[string]*rules.Program, len(ids))}
	for i, id := range ids {
		p.progs[id] = progs[i]
	}
	if p.locs, err = s.shapes(ctx, projectID, progs); err != nil {
		return Prepared{}, err
	}
	if err := s.mark(ctx, q, projectID, progs, o); err != nil {
		return Prepared{}, err
	}
	return p, nil
}

// Run evaluates prepared rules ids (each must have been prepared) against in.
func (p Prepared) Run(ids []string, in rules.Input) []rules.Verdict {
	in.Locations = p.locs
	out := make([]rules.Verdict, len(ids))
	for i, id := range ids {
		out[i] = p.progs[id].Run(id, &in)
	}
	return out
}

// ReadsCounts says whether one of the prepared rules ids reads redemption
// counts (redemption.count.*): only then need they be counted.
func (p Prepared) ReadsCounts(ids []string) bool {
	for _, id := range ids {
		if r := p.progs[id]; r != nil && r.ReadsCounts() {
			return true
		}
	}
	return false
}

// ReadsSegments says whether one of the prepared rules ids reads the
// customer's segments (customer.segment).
func (p Prepared) ReadsSegments(ids []string) bool {
	for _, id := range ids {
		if r := p.progs[id]; r != nil && r.ReadsSegments() {
			return true
		}
	}
	return false
}

// NamesItemOf says whether one of the prepared rules ids requires a
// product, SKU or collection (order.items.any or every) that a line of o
// matches: qualifications' PRODUCTS scenarios.
func (p Prepared) NamesItemOf(ids []string, o *rules.Order) bool {
	for _, id := range ids {
		if pr := p.progs[id]; pr != nil && pr.NamesItemOf(o) {
			return true
		}
	}
	return false
}

// SetAssignmentIn makes ruleID the one rule assigned to the object of
// objectType and objectID, in the caller's transaction q: an earning rule
// names its validation rule by validation_rule_id, and the assignment the
// reference lists beside it follows that name (ruleID "" drops it, as does
// the object's deletion). A rule that does not exist is its 404.
func (s *Service) SetAssignmentIn(ctx context.Context, q db.Querier, projectID, objectType, objectID, ruleID string) error {
	if ruleID != "" {
		if _, err := getRule(ctx, q, projectID, ruleID, false); err != nil {
			return err
		}
	}
	if _, err := q.Exec(ctx, `DELETE FROM validation_rule_assignments WHERE project_id = $1 AND related_object_type = $2
		AND related_object_id = $3`, projectID, objectType, objectID); err != nil || ruleID == "" {
		return err
	}
	a := Assignment{ID: ids.New("asgm_"), RuleID: ruleID, RelatedObjectType: objectType, RelatedObjectID: objectID, CreatedAt: s.clock.Now()}
	return insertAssignment(ctx, q, projectID, a, false)
}
