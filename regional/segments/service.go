package segments

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/targeting"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/locations"
	"github.com/tallyhq/tally/regional/webhooks"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/segments")

// Notifier raises webhook notices in the writer's transaction; Listens
// says whether a notice of a type would be sent anywhere, so that a
// segment's first evaluation reads its entrants only for someone.
type Notifier interface {
	Queue(ctx context.Context, b *pgx.Batch, n webhooks.Notice) error
	Listens(ctx context.Context, projectID, eventType string) bool
}

// EventCounts are the customers' counts of custom events by name
// (regional/events, which owns them), which events.<name>.count compares:
// CountSQL the count of the customers row's events named by a placeholder,
// for the SQL evaluation; Counts those of some customers, for Go's.
type EventCounts interface {
	CountSQL(name string) string
	Counts(ctx context.Context, q db.Querier, projectID string, ids, names []string) (map[string]map[string]int, error)
}

// Service holds the segment rules.
type Service struct {
	pool   *db.Pool
	notify Notifier
	places targeting.Places // the shapes of the locations $in_location names
	counts EventCounts
	// targets are customers.Targets with the events' counts in SQL.
	targets targeting.Schema[customers.Customer]
	clock   *clock.Clock
	wake    func()
	// filters are each project's compiled filter segments, for the live
	// evaluation of a request's customer: read once per project, dropped
	// on a segment's creation or deletion here, and after cacheTTL in case
	// another instance made the change.
	filters *expirable.LRU[string, []compiled]
}

// cacheTTL bounds how long another instance's new or deleted segment goes
// unseen by this one's validations.
const cacheTTL = 5 * time.Second

type compiled struct {
	Segment
	f *Filter
}

// NewService returns the segment service, registering with reg the task
// that follows customers' changes and the job that evaluates a new filter
// segment; places gives the shapes of the locations filters name, counts
// the customers' counts of events.
func NewService(pool *db.Pool, notify Notifier, places targeting.Places, counts EventCounts, reg *async.Registry,
	clk *clock.Clock) *Service {
	targets := customers.Targets
	targets.EventsSQL = counts.CountSQL
	s := &Service{pool: pool, notify: notify, places: places, counts: counts, targets: targets, clock: clk, wake: reg.Wake,
		filters: expirable.NewLRU[string, []compiled](10000, nil, cacheTTL)}
	reg.HandleTx(KindCustomers, s.follow, async.Policy{})
	reg.HandleJob(JobSync, s.syncJob)
	reg.HandleTx(locations.KindChanged, s.relocate, async.Policy{})
	return s
}

// bound are cs with the shapes of the locations their filters name, read
// in one call (the locations' cache holds them for 2 s): what every
// evaluation of a filter holding $in_location works on.
func (s *Service) bound(ctx context.Context, projectID string, cs []compiled) ([]compiled, error) {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.f.Locations()...)
	}
	if len(ids) == 0 {
		return cs, nil
	}
	shapes, err := s.places.Shapes(ctx, projectID, ids)
	if err != nil {
		return nil, err
	}
	out := make([]compiled, len(cs))
	for i, c := range cs {
		out[i] = compiled{Segment: c.Segment, f: c.f.Bind(shapes)}
	}
	return out, nil
}

// withCounts loads into custs their counts of the events cs's filters
// compare (none read when no filter names events).
func (s *Service) withCounts(ctx context.Context, q db.Querier, projectID string, cs []compiled, custs []*customers.Customer) error {
	var names, ids []string
	for _, c := range cs {
		for _, n := range c.f.EventNames() {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 || len(custs) == 0 {
		return nil
	}
	for _, c := range custs {
		ids = append(ids, c.ID)
	}
	counts, err := s.counts.Counts(ctx, q, projectID, ids, names)
	if err != nil {
		return err
	}
	for _, c := range custs {
		c.EventCounts = counts[c.ID]
	}
	return nil
}

func compile(seg Segment) (compiled, error) {
	f, err := targeting.Parse(seg.Filter, customers.Targets, "filter")
	if err != nil {
		return compiled{}, fmt.Errorf("segments: the stored filter of %s: %w", seg.ID, err)
	}
	return compiled{Segment: seg, f: f}, nil
}

// Create makes a segment: a static one with its customers (ids or
// source_ids of the project's customers), a filter one with the job that
// first evaluates it.
func (s *Service) Create(ctx context.Context, projectID string, b Body) (v View, err error) {
	ctx, span := tracer.Start(ctx, "segments.Create")
	defer telemetry.End(span, &err)
	if _, _, err := b.check(); err != nil { // a bad body is refused before a transaction
		return View{}, err
	}
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		v, err = s.CreateIn(ctx, tx, projectID, ids.New("seg_"), b)
		return err
	})
	if err != nil {
		return View{}, err
	}
	s.Made(projectID)
	return v, nil
}

// Made tells this instance that segments were made in a caller's
// transaction that has committed (CreateIn): the project's filter segments
// are read again and the job that first evaluates a filter is woken.
func (s *Service) Made(projectID string) {
	s.filters.Remove(projectID)
	s.wake()
}

// CreateIn makes a segment with the id given in the caller's transaction,
// who calls Made once it commits: what a campaign template copied from
// another project carries is made in the transaction of the campaign or
// tier set up from it (regional/templates).
func (s *Service) CreateIn(ctx context.Context, tx pgx.Tx, projectID, id string, b Body) (View, error) {
	typ, f, err := b.check()
	if err != nil {
		return View{}, err
	}
	seg := Segment{ID: id, Name: *b.Name, Type: typ, CreatedAt: s.clock.Now()}
	if f != nil {
		seg.Filter = f.Raw()
	}
	if typ == Static {
		if err := insert(ctx, tx, projectID, seg); err != nil {
			return View{}, err
		}
		return seg.view(SyncDone), s.addStatic(ctx, tx, projectID, seg.ID, b.Customers)
	}
	if err := s.startFilter(ctx, tx, projectID, &seg, f); err != nil {
		return View{}, err
	}
	return seg.view(SyncInProgress), nil
}

// startFilter writes a filter segment with the job that first evaluates
// it.
func (s *Service) startFilter(ctx context.Context, tx pgx.Tx, projectID string, seg *Segment, f *Filter) error {
	n, err := countFilterSegments(ctx, tx, projectID)
	if err != nil {
		return err
	}
	if n >= MaxFilterSegments {
		return apierr.InvalidPayload(fmt.Sprintf("type: a project holds at most %d auto-update and passive segments, and this one has %d; delete one first.",
			MaxFilterSegments, n))
	}
	// A filter counting events is first evaluated once every instance
	// has seen it (cacheTTL, and a second for an event's transaction
	// under way): until then another instance's events path does not
	// know to evaluate the customer of an event it stores, and only
	// an evaluation that reads the stored counts after it finds them.
	var after time.Time
	if f != nil && len(f.EventNames()) > 0 {
		after = time.Now().Add(cacheTTL + time.Second)
	}
	a, err := async.StartJobAfter(ctx, tx, projectID, JobSync, syncParams{SegmentID: seg.ID}, after)
	if err != nil {
		return err
	}
	seg.SyncActionID = &a.ID
	return insert(ctx, tx, projectID, *seg)
}

func (s *Service) addStatic(ctx context.Context, tx pgx.Tx, projectID, segmentID string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	found, err := customers.Resolve(ctx, tx, projectID, names)
	if err != nil {
		return err
	}
	members := make([]string, 0, len(names))
	for i, n := range names {
		id, ok := found[n]
		if !ok {
			return apierr.InvalidPayload(fmt.Sprintf("customers[%d]: no customer has the id or source_id %q.", i, n))
		}
		members = append(members, id)
	}
	_, err = addMembers(ctx, tx, projectID, segmentID, members)
	return err
}

// Get returns a segment.
func (s *Service) Get(ctx context.Context, projectID, id string) (View, error) {
	seg, err := get(ctx, s.pool, projectID, id)
	if errors.Is(err, db.ErrNotFound) {
		return View{}, apierr.NotFound("segment", id)
	}
	if err != nil {
		return View{}, err
	}
	st, err := s.statuses(ctx, projectID, []Segment{seg})
	if err != nil {
		return View{}, err
	}
	return seg.view(st[0]), nil
}

// statuses are the initial sync statuses of segs: a filter segment's
// job's, DONE once it is.
func (s *Service) statuses(ctx context.Context, projectID string, segs []Segment) ([]string, error) {
	out := make([]string, len(segs))
	for i, seg := range segs {
		out[i] = SyncDone
		if seg.SyncActionID == nil {
			continue
		}
		a, err := async.GetAction(ctx, s.pool, projectID, *seg.SyncActionID)
		if err != nil && !errors.Is(err, db.ErrNotFound) {
			return nil, err
		}
		switch {
		case err != nil: // the action was purged long after it finished
		case a.Status == async.Failed:
			out[i] = async.Failed
		case a.Status != async.Done:
			out[i] = SyncInProgress
		}
	}
	return out, nil
}

// List returns a page of segments and how many match.
func (s *Service) List(ctx context.Context, projectID string, lq listQuery) ([]View, int, bool, error) {
	segs, total, err := list(ctx, s.pool, projectID, lq)
	if err != nil {
		return nil, 0, false, err
	}
	more := len(segs) > lq.Limit
	if more {
		segs = segs[:lq.Limit]
	}
	st, err := s.statuses(ctx, projectID, segs)
	if err != nil {
		return nil, 0, false, err
	}
	out := make([]View, len(segs))
	for i, seg := range segs {
		out[i] = seg.view(st[i])
	}
	return out, total, more, nil
}

// Exists answers nil when the project has segment id, else its 404.
func (s *Service) Exists(ctx context.Context, projectID, id string) error {
	_, err := s.Get(ctx, projectID, id)
	return err
}

// Delete removes a segment and its members; those of a large segment are
// deleted a batch a transaction first, so no transaction holds a million.
func (s *Service) Delete(ctx context.Context, projectID, id string) error {
	if _, err := get(ctx, s.pool, projectID, id); errors.Is(err, db.ErrNotFound) {
		return apierr.NotFound("segment", id)
	} else if err != nil {
		return err
	}
	for {
		n, err := dropMembers(ctx, s.pool, projectID, id, 10000)
		if err != nil {
			return db.Classify(err)
		}
		if n < 10000 {
			break
		}
	}
	var found bool
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if found, err = remove(ctx, tx, projectID, id); err != nil || !found {
			return err
		}
		_, err = dropMembers(ctx, tx, projectID, id, 1<<30)
		return err
	})
	s.filters.Remove(projectID)
	if err == nil && !found {
		return apierr.NotFound("segment", id)
	}
	return err
}

// Members is the customers list's condition for segment_id
// (customers.MemberFilter).
func (s *Service) Members(ctx context.Context, projectID, segmentID string, arg func(any) string) (string, error) {
	if _, err := get(ctx, s.pool, projectID, segmentID); errors.Is(err, db.ErrNotFound) {
		return "", apierr.NotFound("segment", segmentID)
	} else if err != nil {
		return "", err
	}
	return membersCond(arg(segmentID)), nil
}

// CountsEvent says whether a filter segment of the project counts custom
// events of name (events.<name>.count), from the filters' cache
// (events.CountWatcher). A segment made on another instance is seen
// within cacheTTL: an event stored meanwhile is counted, and its customer
// is evaluated by the segment's first evaluation, which waits for it (Create).
func (s *Service) CountsEvent(ctx context.Context, projectID, name string) (bool, error) {
	cs, err := s.compiledOf(ctx, projectID)
	if err != nil {
		return false, err
	}
	for _, c := range cs {
		if slices.Contains(c.f.EventNames(), name) {
			return true, nil
		}
	}
	return false, nil
}

// compiledOf are the project's filter segments, compiled, from the cache.
func (s *Service) compiledOf(ctx context.Context, projectID string) ([]compiled, error) {
	if cs, ok := s.filters.Get(projectID); ok {
		return cs, nil
	}
	segs, err := filterSegments(ctx, s.pool, projectID)
	if err != nil {
		return nil, err
	}
	cs := make([]compiled, 0, len(segs))
	for _, seg := range segs {
		c, err := compile(seg)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	s.filters.Add(projectID, cs)
	return cs, nil
}

// Of are the segments c is in for a validation: the static ones stored,
// and the filter ones evaluated live on c as the request gives it (stored
// data and the request's), as interface-notes h1 recommends, so a rule
// sees what the request says without waiting for the stored membership.
// One query (the static memberships) and the project's cached filters.
func (s *Service) Of(ctx context.Context, q db.Querier, projectID string, c customers.Customer) ([]string, error) {
	var out []string
	if c.ID != "" {
		var err error
		if out, err = staticOf(ctx, q, projectID, c.ID); err != nil {
			return nil, err
		}
	}
	cs, err := s.compiledOf(ctx, projectID)
	if err != nil {
		return nil, err
	}
	if cs, err = s.bound(ctx, projectID, cs); err != nil {
		return nil, err
	}
	if c.ID != "" {
		if err := s.withCounts(ctx, q, projectID, cs, []*customers.Customer{&c}); err != nil {
			return nil, err
		}
	}
	now := s.clock.Now()
	for _, seg := range cs {
		if seg.f.Match(c, now, s.targets) {
			out = append(out, seg.ID)
		}
	}
	slices.Sort(out)
	return out, nil
}

// OfCustomer are the segments of GET /v1/customers/{id}/segments: the
// stored membership of a known customer; for an id no customer has, the
// filter segments a customer with no data would be in.
func (s *Service) OfCustomer(ctx context.Context, projectID, idOrSource string) ([]Simple, error) {
	found, err := customers.Resolve(ctx, s.pool, projectID, []string{idOrSource})
	if err != nil {
		return nil, db.Classify(err)
	}
	out := []Simple{}
	id, ok := found[idOrSource]
	if !ok {
		cs, err := s.compiledOf(ctx, projectID)
		if err != nil {
			return nil, err
		}
		now := s.clock.Now()
		for _, seg := range cs {
			if seg.f.Match(customers.Customer{}, now, s.targets) {
				out = append(out, seg.simple())
			}
		}
		return out, nil
	}
	segs, err := customerSegments(ctx, s.pool, projectID, id)
	if err != nil {
		return nil, db.Classify(err)
	}
	for _, seg := range segs {
		out = append(out, seg.simple())
	}
	return out, nil
}

// CheckAutoUpdate is nil when id names an auto-update segment of the
// project, else the 4xx that says why: what an earning rule on
// customer.segment.entered must name.
func CheckAutoUpdate(ctx context.Context, q db.Querier, projectID, id string) error {
	seg, err := get(ctx, q, projectID, id)
	if errors.Is(err, db.ErrNotFound) {
		return apierr.NotFound("segment", id)
	}
	if err != nil {
		return err
	}
	if seg.Type != AutoUpdate {
		return apierr.InvalidPayload(fmt.Sprintf("segment.id: %s is a %s segment; customer.segment.entered rules need an auto-update one.", id, seg.Type))
	}
	return nil
}

// IDByName is the id of the project's segment of that name, or "" when it
// has none: a template copied from another project matches its segments by
// name (the oldest, should several share it).
func (s *Service) IDByName(ctx context.Context, projectID, name string) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT id FROM segments WHERE project_id = $1 AND name = $2 ORDER BY created_at, id LIMIT 1`,
		projectID, name).Scan(&id)
	if errors.Is(err, db.ErrNotFound) {
		return "", nil
	}
	return id, err
}
