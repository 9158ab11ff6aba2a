// Package exports serves asynchronous CSV exports: the export requests of
// the interface (a loyalty campaign's or card's transactions, points
// expiration, orders, and the general /v1/exports), the file made in the
// asynchronous phase from one consistent snapshot and kept in the cluster's
// own database in chunks, and its download.
package exports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dltoken"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/exports/source"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Statuses of an export.
const (
	Scheduled  = "SCHEDULED"
	InProgress = "IN_PROGRESS"
	Done       = "DONE"
	Error      = "ERROR"
)

// ActionType is the async action an export runs as.
const ActionType = "EXPORT.CSV"

// Webhook event types of exports (the reference service has none; receivers
// ignore types they do not know).
const (
	EventCompleted = "export.completed"
	EventFailed    = "export.failed"
)

// Options of the export service.
type Options struct {
	// PartRows is the most rows in one file (default 1,000,000); a larger
	// export is split into parts.
	PartRows int
	// Retention is how long a file is kept (default 30 days).
	Retention time.Duration
	// LinkTTL is how long a download link is good for (default an hour);
	// every read of the export mints a fresh one.
	LinkTTL time.Duration
	// DownloadURL returns the base URL of the cluster's download host
	// (https://download.example.com), where result.url points.
	DownloadURL func(ctx context.Context) (string, error)
	// ChunkBytes is the largest stored chunk (default 256 KiB): an export
	// holds a few chunks' worth, and pgx encodes each into its own
	// buffer to send it.
	ChunkBytes int
	// Concurrent is how many exports one instance makes at once (default
	// 2): each holds two database connections while it runs, a snapshot
	// and a writer, so a burst of requests waits its turn instead of
	// taking the pool that every request needs.
	Concurrent int
}

// Notifier raises an export's webhook notices (export.completed or .failed) in the
// writer's transaction (regional/webhooks).
type Notifier interface {
	Emit(ctx context.Context, tx db.Querier, n webhooks.Notice) error
}

// Service runs exports.
type Service struct {
	pool    *db.Pool
	notify  Notifier
	loyalty *loyalty.Service
	gifts   Gifts
	clock   *clock.Clock
	tokens  dltoken.Keys
	opt     Options
	slots   chan struct{}
	objects map[string]object // what it exports, by name: builtins and the owners' sources
}

// NewService makes the service and registers the export job. The objects
// exports does not read itself are the sources their owners give: one of
// each exportable object (objectNames) is needed, and any other is refused.
func NewService(pool *db.Pool, notify Notifier, loy *loyalty.Service, gifts Gifts, tasks *async.Registry, clk *clock.Clock,
	tokens dltoken.Keys, o Options, sources ...source.Source) *Service {
	if o.PartRows <= 0 {
		o.PartRows = 1_000_000
	}
	if o.Retention <= 0 {
		o.Retention = 30 * 24 * time.Hour
	}
	if o.LinkTTL <= 0 {
		o.LinkTTL = time.Hour
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 256 << 10
	}
	if o.Concurrent <= 0 {
		o.Concurrent = 2
	}
	s := &Service{pool: pool, notify: notify, loyalty: loy, gifts: gifts, clock: clk, tokens: tokens, opt: o,
		slots: make(chan struct{}, o.Concurrent), objects: maps.Clone(builtins)}
	for _, src := range sources {
		if _, dup := s.objects[src.Name]; dup || !slices.Contains(strings.Split(objectNames, ", "), src.Name) {
			panic(fmt.Sprintf("exports: a source of %q, which is not an exportable object or has one", src.Name))
		}
		s.objects[src.Name] = fromSource(src)
	}
	for _, name := range strings.Split(objectNames, ", ") {
		if _, ok := s.objects[name]; !ok {
			panic(fmt.Sprintf("exports: no source of %q", name))
		}
	}
	tasks.HandleJob(ActionType, s.run)
	return s
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

// Parameters is the normalised request an export runs with, as it echoes it.
type Parameters struct {
	Order          string                     `json:"order"`
	Fields         []string                   `json:"fields"`
	Filters        map[string]json.RawMessage `json:"filters"`
	ResponseFormat string                     `json:"response_format"`
}

// Request is the body of the export requests.
type Request struct {
	ExportedObject *string         `json:"exported_object"`
	Order          json.RawMessage `json:"order"`
	Parameters     *struct {
		Order          json.RawMessage `json:"order"`
		Fields         json.RawMessage `json:"fields"`
		Filters        json.RawMessage `json:"filters"`
		ResponseFormat *string         `json:"response_format"`
	} `json:"parameters"`
}

func invalid(where, problem string) error {
	return &apierr.Error{Status: 400, Key: "invalid_export_params", Message: "Invalid export params", Details: where + ": " + problem}
}

// scope is what an export of one campaign or card is limited to; it is
// added to the filters the export shows and runs with.
type scope struct{ campaignID, cardID string }

// scoped reports whether an export is one of the loyalty endpoints' whose
// columns are the specification's table, which has no campaign_id.
func (sc scope) scoped(o object) bool { return sc != (scope{}) && o.name == VoucherTransactions }

// normalise checks a request against the object's columns and returns the
// parameters to store.
func normalise(o object, r Request, sc scope) (Parameters, filters.Filter, error) {
	p := Parameters{ResponseFormat: "CSV", Order: o.sorts[0].key}
	var rawOrder, rawFields, rawFilters json.RawMessage
	rawOrder = r.Order
	if r.Parameters != nil {
		if len(r.Parameters.Order) > 0 && string(r.Parameters.Order) != "null" {
			rawOrder = r.Parameters.Order
		}
		rawFields, rawFilters = r.Parameters.Fields, r.Parameters.Filters
		if f := r.Parameters.ResponseFormat; f != nil && !strings.EqualFold(*f, "CSV") {
			return p, filters.Filter{}, invalid("parameters.response_format", "only CSV is served, got "+fmt.Sprintf("%q", *f))
		}
	}
	if len(rawOrder) > 0 && string(rawOrder) != "null" {
		var ord string
		if err := json.Unmarshal(rawOrder, &ord); err != nil {
			return p, filters.Filter{}, invalid("order", fmt.Sprintf("must be one of %s, got %s", o.orderNames(), clip(string(rawOrder))))
		}
		if _, ok := o.order(ord); !ok && ord != "" {
			return p, filters.Filter{}, invalid("order", fmt.Sprintf("must be one of %s, got %s", o.orderNames(), clip(string(rawOrder))))
		}
		if ord != "" {
			p.Order = ord
		}
	}
	if len(rawFields) > 0 && string(rawFields) != "null" {
		if err := json.Unmarshal(rawFields, &p.Fields); err != nil {
			return p, filters.Filter{}, invalid("parameters.fields", "must be an array of field names")
		}
		if len(p.Fields) > len(o.columns) {
			return p, filters.Filter{}, invalid("parameters.fields", fmt.Sprintf("at most %d fields", len(o.columns)))
		}
		seen := map[string]bool{}
		for _, f := range p.Fields {
			if _, ok := o.column(f); !ok || (f == "campaign_id" && sc.scoped(o)) {
				return p, filters.Filter{}, invalid("parameters.fields", fmt.Sprintf("%q is not a field of this export; fields: %s",
					clip(f), o.keys(sc.scoped(o))))
			}
			if seen[f] {
				return p, filters.Filter{}, invalid("parameters.fields", fmt.Sprintf("%q is named twice", f))
			}
			seen[f] = true
		}
	}
	if len(p.Fields) == 0 {
		p.Fields = o.defaults
	}
	f, err := filters.FromJSON(rawFilters, o.metadataFilters(rawFilters), "parameters.filters", "invalid_export_params")
	if err != nil {
		return p, f, err
	}
	// The filters are echoed as they were sent (values as arrays or as
	// scalars: the reference types them both ways), with the junction and
	// the export's scope made explicit.
	p.Filters = map[string]json.RawMessage{}
	if len(f.Conds) > 0 {
		if err := json.Unmarshal(rawFilters, &p.Filters); err != nil {
			return p, f, invalid("parameters.filters", "must be an object of filters by field")
		}
	}
	p.Filters["junction"] = json.RawMessage(`"and"`) // as the reference spells it, whatever the case sent
	if f.Or {
		p.Filters["junction"] = json.RawMessage(`"or"`)
	}
	if sc != (scope{}) {
		if f.Or && len(f.Conds) > 0 {
			return p, f, invalid("parameters.filters.junction", "the filters of a campaign's or a card's export are joined with and")
		}
		in := func(id string) json.RawMessage {
			b, _ := json.Marshal(map[string]any{"conditions": map[string]any{"$in": []string{id}}})
			return b
		}
		// The scope replaces any condition of the user's on its field.
		if sc.campaignID != "" {
			p.Filters["campaign_id"] = in(sc.campaignID)
		}
		if sc.cardID != "" {
			p.Filters["voucher_id"] = in(sc.cardID)
		}
		raw, _ := json.Marshal(p.Filters)
		if f, err = filters.FromJSON(raw, o.metadataFilters(raw), "parameters.filters", "invalid_export_params"); err != nil {
			return p, f, err
		}
	}
	return p, f, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// Create validates an export request and schedules it: the export row and
// the job that makes its file commit together, and the answer is SCHEDULED.
func (s *Service) Create(ctx context.Context, projectID, objectName string, r Request, sc scope) (View, error) {
	o, ok := s.objects[objectName]
	if !ok {
		return View{}, invalid("exported_object", fmt.Sprintf("%q cannot be exported; exportable: %s", clip(objectName), objectNames))
	}
	p, _, err := normalise(o, r, sc)
	if err != nil {
		return View{}, err
	}
	params, err := json.Marshal(p)
	if err != nil {
		return View{}, err
	}
	now := s.now()
	e := export{ID: ids.New("exp_"), Object: o.name, Status: Scheduled, Channel: "API", Parameters: params,
		CreatedAt: now, ExpiresAt: now.Add(s.opt.Retention)}
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		a, err := async.StartJob(ctx, tx, projectID, ActionType, jobParams{ExportID: e.ID})
		if err != nil {
			return err
		}
		e.ActionID = &a.ID
		_, err = tx.Exec(ctx, `INSERT INTO exports (project_id, id, exported_object, status, channel, parameters, action_id,
			created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			projectID, e.ID, e.Object, e.Status, e.Channel, e.Parameters, e.ActionID, e.CreatedAt, e.ExpiresAt)
		return err
	})
	if err != nil {
		return View{}, err
	}
	return s.view(ctx, projectID, e)
}

// Gifts names gift campaigns and gift cards (the vouchers package), whose
// credits are in the ledger's table as loyalty points are, so that their
// transactions export as a loyalty campaign's or card's do.
type Gifts interface {
	GiftCampaignID(ctx context.Context, projectID, idOrName string) (string, error)
	GiftCardID(ctx context.Context, projectID, code string) (string, error)
}

// GiftCampaignTransactions schedules the export of a gift campaign's
// transactions (POST /v1/campaigns/{id}/transactions/export, which a
// loyalty campaign answers first).
func (s *Service) GiftCampaignTransactions(ctx context.Context, projectID, campaignID string, r Request) (View, error) {
	id, err := s.gifts.GiftCampaignID(ctx, projectID, campaignID)
	if err != nil {
		return View{}, err
	}
	return s.Create(ctx, projectID, VoucherTransactions, r, scope{campaignID: id})
}

// GiftCardTransactions schedules the export of a gift card's
// transactions (POST /v1/vouchers/{code}/transactions/export, which a
// loyalty card answers first).
func (s *Service) GiftCardTransactions(ctx context.Context, projectID, code string, r Request) (View, error) {
	id, err := s.gifts.GiftCardID(ctx, projectID, code)
	if err != nil {
		return View{}, err
	}
	return s.Create(ctx, projectID, VoucherTransactions, r, scope{cardID: id})
}

// CampaignTransactions schedules the export of a loyalty campaign's
// transactions (campaignID is its id or name).
func (s *Service) CampaignTransactions(ctx context.Context, projectID, campaignID string, r Request) (View, error) {
	id, err := s.loyalty.CampaignID(ctx, s.pool, projectID, campaignID)
	if err != nil {
		return View{}, err
	}
	return s.Create(ctx, projectID, VoucherTransactions, r, scope{campaignID: id})
}

// CardTransactions schedules the export of the transactions of the card ref
// names.
func (s *Service) CardTransactions(ctx context.Context, ref loyalty.CardRef, r Request) (View, error) {
	card, _, err := s.loyalty.Card(ctx, s.pool, ref)
	if err != nil {
		return View{}, err
	}
	return s.Create(ctx, ref.Project, VoucherTransactions, r, scope{cardID: card.ID})
}

// PointsExpiration schedules the export of a campaign's expiring points.
func (s *Service) PointsExpiration(ctx context.Context, projectID, campaignID string, r Request) (View, error) {
	id, err := s.loyalty.CampaignID(ctx, s.pool, projectID, campaignID)
	if err != nil {
		return View{}, err
	}
	return s.Create(ctx, projectID, PointsExpiration, r, scope{campaignID: id})
}

// export is a stored export.
type export struct {
	ID, Object, Status, Channel string
	Parameters                  []byte
	Parts                       []Part
	TotalRows                   *int64
	DoneRows                    int64
	Err                         *Failure
	ActionID, RunID             *string
	CreatedAt                   time.Time
	UpdatedAt                   *time.Time
	ExpiresAt                   time.Time
}

// Part is one file of an export.
type Part struct {
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
}

// Failure is why an export is ERROR.
type Failure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// View is the export object of the interface, with what Tally adds:
// result.urls (every part), error, progress and expires_at.
type View struct {
	ID             string          `json:"id"`
	Object         string          `json:"object"`
	CreatedAt      jsonx.Time      `json:"created_at"`
	UpdatedAt      *jsonx.Time     `json:"updated_at"`
	Status         string          `json:"status"`
	Channel        string          `json:"channel"`
	ExportedObject string          `json:"exported_object"`
	Parameters     json.RawMessage `json:"parameters"`
	Result         *Result         `json:"result"`
	UserID         *string         `json:"user_id"`
	Error          *Failure        `json:"error"`
	Progress       int             `json:"progress"`
	AsyncActionID  *string         `json:"async_action_id"`
	ExpiresAt      jsonx.Time      `json:"expires_at"`
}

// Result is where a DONE export's file is: url is its first part, urls
// all of them, each a signed link good until url_expires_at.
type Result struct {
	URL          string     `json:"url"`
	URLs         []string   `json:"urls"`
	URLExpiresAt jsonx.Time `json:"url_expires_at"`
	Rows         int64      `json:"rows"`
	Parts        []Part     `json:"parts"`
}

func (s *Service) view(ctx context.Context, projectID string, e export) (View, error) {
	v := View{ID: e.ID, Object: "export", CreatedAt: jsonx.Time{Time: e.CreatedAt}, UpdatedAt: jsonx.Ptr(e.UpdatedAt),
		Status: e.Status, Channel: e.Channel, ExportedObject: e.Object, Parameters: e.Parameters, Error: e.Err,
		AsyncActionID: e.ActionID, ExpiresAt: jsonx.Time{Time: e.ExpiresAt}}
	switch {
	case e.Status == Done:
		v.Progress = 100
	case e.TotalRows != nil && *e.TotalRows > 0:
		v.Progress = int(min(99, e.DoneRows*100 / *e.TotalRows))
	}
	if e.Status != Done {
		return v, nil
	}
	base, err := s.opt.DownloadURL(ctx)
	if err != nil {
		return View{}, err
	}
	exp := s.now().Add(s.opt.LinkTTL)
	if e.ExpiresAt.Before(exp) {
		exp = e.ExpiresAt
	}
	token := s.tokens.Sign(projectID, e.ID, exp)
	r := &Result{URLExpiresAt: jsonx.Time{Time: exp.Truncate(time.Second)}, Parts: e.Parts}
	for i, p := range e.Parts {
		u := fmt.Sprintf("%s/v1/exports/%s?token=%s", strings.TrimSuffix(base, "/"), e.ID, token)
		if i > 0 {
			u += fmt.Sprintf("&part=%d", i+1)
		}
		r.URLs = append(r.URLs, u)
		r.Rows += p.Rows
	}
	if len(r.URLs) > 0 {
		r.URL = r.URLs[0]
	}
	v.Result = r
	return v, nil
}

const exportColumns = `id, exported_object, status, channel, parameters, parts, total_rows, done_rows, error, action_id,
	run_id, created_at, updated_at, expires_at`

func scanExport(r pgx.Row) (export, error) {
	var e export
	var parts, failure []byte
	if err := r.Scan(&e.ID, &e.Object, &e.Status, &e.Channel, &e.Parameters, &parts, &e.TotalRows, &e.DoneRows, &failure,
		&e.ActionID, &e.RunID, &e.CreatedAt, &e.UpdatedAt, &e.ExpiresAt); err != nil {
		return export{}, err
	}
	if parts != nil {
		if err := json.Unmarshal(parts, &e.Parts); err != nil {
			return export{}, fmt.Errorf("exports: parts of %s: %w", e.ID, err)
		}
	}
	if failure != nil {
		e.Err = &Failure{}
		if err := json.Unmarshal(failure, e.Err); err != nil {
			return export{}, fmt.Errorf("exports: error of %s: %w", e.ID, err)
		}
	}
	return e, nil
}

func (s *Service) get(ctx context.Context, q db.Querier, projectID, id string) (export, error) {
	e, err := scanExport(q.QueryRow(ctx, `SELECT `+exportColumns+` FROM exports WHERE project_id = $1 AND id = $2`, projectID, id))
	if errors.Is(err, db.ErrNotFound) {
		return export{}, apierr.NotFound("export", id)
	}
	return e, err
}

// Get returns one of the project's exports.
func (s *Service) Get(ctx context.Context, projectID, id string) (View, error) {
	e, err := s.get(ctx, s.pool, projectID, id)
	if err != nil {
		return View{}, err
	}
	if e.Object == ReportObject {
		return View{}, apierr.NotFound("export", id)
	}
	return s.view(ctx, projectID, e)
}

// List returns a page of the project's exports and their number.
func (s *Service) List(ctx context.Context, projectID string, lq listq.Query) ([]View, int, bool, string, error) {
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM exports WHERE project_id = $1 AND exported_object <> $2`, projectID, ReportObject).Scan(&total); err != nil {
		return nil, 0, false, "", err
	}
	cond, orderBy, args := lq.Keyset("exports", lq.Key, []any{projectID, ReportObject})
	args = append(args, lq.Limit+1)
	es, err := db.Collect(scanExport)(s.pool.Query(ctx, `SELECT `+exportColumns+` FROM exports WHERE project_id = $1 AND exported_object <> $2`+cond+
		` ORDER BY `+orderBy+fmt.Sprintf(` LIMIT $%d`, len(args))+lq.OffsetSQL(), args...))
	if err != nil {
		return nil, 0, false, "", err
	}
	page, more, next := listq.Page(es, lq.Limit, func(e export) string { return e.ID })
	vs := make([]View, 0, len(page))
	for _, e := range page {
		v, err := s.view(ctx, projectID, e)
		if err != nil {
			return nil, 0, false, "", err
		}
		vs = append(vs, v)
	}
	return vs, total, more, next, nil
}

// Delete removes an export and its file at once. A job still running
// finds its export gone and stops.
func (s *Service) Delete(ctx context.Context, projectID, id string) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM exports WHERE project_id = $1 AND id = $2 AND exported_object <> $3`,
			projectID, id, ReportObject)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return apierr.NotFound("export", id)
		}
		_, err = tx.Exec(ctx, `DELETE FROM export_chunks WHERE project_id = $1 AND export_id = $2`, projectID, id)
		return err
	})
}

// Run removes expired exports every interval until ctx ends.
func (s *Service) Run(ctx context.Context, interval time.Duration, log func(error)) {
	if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
		log(err)
	}
	s.clock.Every(ctx, interval, log, s.Sweep)
}

// Sweep removes the exports whose retention has passed, with their files,
// a hundred exports at a time. A file may be gigabytes in thousands of
// chunks, so each export's chunks go first in batches (db.Sweep, each its
// own transaction), then the export: one cut short is found again by the
// next sweep. Its links never outlive its retention, so nobody is reading
// the file meanwhile.
func (s *Service) Sweep(ctx context.Context) error {
	for {
		start := time.Now()
		rows, err := s.pool.Query(ctx, `SELECT project_id, id FROM exports WHERE expires_at <= $1 ORDER BY expires_at LIMIT 100`, s.now())
		if err != nil {
			return err
		}
		type key struct{ p, id string }
		due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (key, error) {
			var k key
			return k, r.Scan(&k.p, &k.id)
		})
		if err != nil {
			return err
		}
		for _, k := range due {
			if _, err := (db.Sweep{Table: "export_chunks", Where: `project_id = $1 AND export_id = $2`, Args: []any{k.p, k.id},
				Order: []string{"project_id", "export_id", "run_id", "part", "offset_bytes"},
				Key:   []string{"project_id", "export_id", "run_id", "part", "offset_bytes"}, Batch: sweepChunks}).Run(ctx, s.pool); err != nil {
				return err
			}
			if err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
				b := &pgx.Batch{}
				b.Queue(`DELETE FROM exports WHERE project_id = $1 AND id = $2`, k.p, k.id)
				// Nothing, unless a run of the job wrote a chunk meanwhile.
				b.Queue(`DELETE FROM export_chunks WHERE project_id = $1 AND export_id = $2`, k.p, k.id)
				return tx.SendBatch(ctx, b).Close()
			}); err != nil {
				return err
			}
		}
		if len(due) < 100 {
			return nil
		}
		if err := db.Rest(ctx, time.Since(start)); err != nil {
			return err
		}
	}
}

// sweepChunks is how many chunks of an expired export's file one statement
// of the sweep deletes.
const sweepChunks = 100
