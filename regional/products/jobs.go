package products

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/webhooks"
)

// The product jobs of the interface's background-task table.
const (
	JobBulkUpdate     = "PRODUCTS.BULK_UPDATE"
	JobMetadataUpdate = "PRODUCTS.METADATA_UPDATE"
	JobImportProducts = "PRODUCTS.IMPORT_CSV"
	JobImportSKUs     = "SKUS.IMPORT_CSV"
)

// MaxInput is the largest body a product job takes, as the reference says.
const MaxInput = 10 << 20

// LargeBodies are the paths whose bodies may be MaxInput long; every other
// endpoint keeps the service's 1 MB limit.
var LargeBodies = []string{"/v1/products/bulk/async", "/v1/products/metadata/async", "/v1/products/importCSV", "/v1/skus/importCSV"}

// chunk is how many items a job writes per transaction (and checkpoint).
const chunk = 5000

// failure is a failed item as a job's result shows it. Row is the line of
// the CSV file (the header is line 1); for a bulk update, the item's index.
type failure struct {
	Row      int     `json:"row"`
	SourceID *string `json:"source_id,omitempty"`
	Reason   string  `json:"reason"`
}

// progress is a job's checkpoint: the items committed so far and what
// they left (async's chunked jobs).
type progress = async.Chunked[failure]

// importResult is the async action's result for the imports (the
// reference's AsyncActionResultProductsImportCSV).
func importResult(p progress, what string) map[string]any {
	failed := p.Listed()
	msg := fmt.Sprintf("%d %s imported, %d failed.", p.DoneCount, what, p.FailedCount)
	if p.FailedCount > len(failed) {
		msg += fmt.Sprintf(" The first %d failures are listed.", len(failed))
	}
	return map[string]any{"message": msg, "done_count": p.DoneCount, "failed_count": p.FailedCount, "failed": failed}
}

// bulkResult is the async action's result for the bulk updates (the
// reference's AsyncActionsVoucherCustomerProductBulkUpdateResult).
func bulkResult(p progress) map[string]any {
	errs := make([]map[string]any, len(p.Failed))
	for i, f := range p.Failed {
		errs[i] = map[string]any{"key": "invalid_payload", "message": "Invalid payload", "details": f.Reason, "source_id": f.SourceID}
	}
	return map[string]any{"done_count": p.DoneCount, "failed_count": p.FailedCount, "errors": errs}
}

// startJob records the async action with its input and answers its id
// with status (the reference's: 202 for the bulk updates, 200 for imports).
func (s *Service) startJob(c echo.Context, status int, actionType string, input []byte) error {
	ctx := c.Request().Context()
	var act async.Action
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		act, err = async.StartJobWithInput(ctx, tx, httpx.ProjectID(c), actionType, nil, input)
		return err
	})
	if err != nil {
		return err
	}
	s.wake()
	return c.JSON(status, map[string]string{"async_action_id": act.ID})
}

func readBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(c.Request().Body, MaxInput+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxInput {
		return nil, apierr.New(http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large",
			"A product job takes at most 10 MB.")
	}
	return b, nil
}

// bulkItems reads a bulk update: products named by source_id, each with
// the properties to set.
func bulkItems(b []byte) ([]Patch, error) {
	var items []Patch
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, httpx.ArrayError(b, "product objects, each with a source_id")
	}
	if len(items) == 0 {
		return nil, apierr.InvalidPayload("The body must hold at least one product.")
	}
	for i, it := range items {
		var src *string
		if err := it.text("source_id", &src, true); err != nil || src == nil {
			return nil, apierr.InvalidPayload(fmt.Sprintf("Item %d: property source_id is required: the product to update or create.", i))
		}
		if err := it.ApplyProduct(&Product{}); err != nil {
			e := apierr.From(err)
			return nil, apierr.InvalidPayload(fmt.Sprintf("Item %d: %s", i, e.Details))
		}
	}
	return items, nil
}

func (h Handler) bulkUpdate(c echo.Context) error {
	b, err := readBody(c)
	if err != nil {
		return err
	}
	if _, err := bulkItems(b); err != nil {
		return err
	}
	return h.svc.startJob(c, http.StatusAccepted, JobBulkUpdate, b)
}

type metadataRequest struct {
	SourceIDs []string       `json:"source_ids"`
	Metadata  map[string]any `json:"metadata"`
}

func parseMetadataRequest(b []byte) (metadataRequest, error) {
	var r metadataRequest
	if err := json.Unmarshal(b, &r); err != nil {
		return r, apierr.InvalidPayload("The body must be an object: source_ids (an array of product source ids) and metadata (an object).")
	}
	if len(r.SourceIDs) == 0 {
		return r, apierr.InvalidPayload("Property source_ids must name at least one product.")
	}
	for i, s := range r.SourceIDs {
		if err := checkText(fmt.Sprintf("source_ids[%d]", i), s, true); err != nil {
			return r, err
		}
	}
	if r.Metadata == nil {
		return r, apierr.InvalidPayload("Property metadata is required: the keys every product receives.")
	}
	return r, nil
}

func (h Handler) metadataUpdate(c echo.Context) error {
	b, err := readBody(c)
	if err != nil {
		return err
	}
	if _, err := parseMetadataRequest(b); err != nil {
		return err
	}
	return h.svc.startJob(c, http.StatusAccepted, JobMetadataUpdate, b)
}

// bulkUpdateJob is PRODUCTS.BULK_UPDATE: each item updates the live product
// with its source_id, or creates one.
func (s *Service) bulkUpdateJob(ctx context.Context, job *async.Job) (any, error) {
	in, err := job.Input(ctx)
	if err != nil {
		return nil, err
	}
	items, err := bulkItems(in)
	if err != nil {
		return nil, err
	}
	var st progress
	if _, err := job.Resume(ctx, &st); err != nil {
		return nil, err
	}
	err = async.RunChunks(ctx, job, &st, len(items), chunk, func(ctx context.Context, tx pgx.Tx, st *progress, from, to int) error {
		var lines [][]string
		err := s.upsertBySourceID(ctx, tx, job.ProjectID, st, items[from:to], from, func(p *Product, it Patch) error {
			return it.ApplyProduct(p)
		}, &lines)
		if err != nil {
			return err
		}
		return st.Report(ctx, tx, s.reports, job, "source_id", lines)
	})
	if err != nil {
		return nil, err
	}
	// The reference's PRODUCTS.BULK_UPDATE result links the report; the
	// metadata update's has none.
	res := bulkResult(st)
	return res, st.FinishReport(ctx, s.reports, job, res)
}

// metadataUpdateJob is PRODUCTS.METADATA_UPDATE: every named product gets
// the metadata keys (others it has are kept); unknown source_ids are created.
func (s *Service) metadataUpdateJob(ctx context.Context, job *async.Job) (any, error) {
	in, err := job.Input(ctx)
	if err != nil {
		return nil, err
	}
	r, err := parseMetadataRequest(in)
	if err != nil {
		return nil, err
	}
	items := make([]Patch, len(r.SourceIDs))
	for i, src := range r.SourceIDs {
		b, _ := json.Marshal(src)
		items[i] = Patch{"source_id": b}
	}
	var st progress
	if _, err := job.Resume(ctx, &st); err != nil {
		return nil, err
	}
	err = async.RunChunks(ctx, job, &st, len(items), chunk, func(ctx context.Context, tx pgx.Tx, st *progress, from, to int) error {
		return s.upsertBySourceID(ctx, tx, job.ProjectID, st, items[from:to], from, func(p *Product, _ Patch) error {
			if p.Metadata == nil {
				p.Metadata = map[string]any{}
			}
			for k, v := range r.Metadata {
				p.Metadata[k] = v
			}
			return nil
		}, nil)
	})
	if err != nil {
		return nil, err
	}
	return bulkResult(st), nil
}

// upsertBySourceID applies apply to the live product of each item's
// source_id, or to a new product with it, in tx; with report, each item's
// line of the job's report is appended to it.
func (s *Service) upsertBySourceID(ctx context.Context, tx pgx.Tx, projectID string, st *progress, items []Patch, offset int,
	apply func(p *Product, it Patch) error, report *[][]string) error {
	srcs := make([]string, len(items))
	for i, it := range items {
		_ = json.Unmarshal(it["source_id"], &srcs[i])
	}
	found, err := lockLiveProducts(ctx, tx, projectID, "source_id", srcs)
	if err != nil {
		return err
	}
	bySource := map[string]*Product{}
	for i := range found {
		bySource[*found[i].SourceID] = &found[i]
	}
	now := s.now()
	created, updated := map[string]bool{}, map[string]bool{}
	for i, it := range items {
		p, known := bySource[srcs[i]]
		if !known {
			src := srcs[i]
			p = &Product{ID: ids.New("prod_"), SourceID: &src, CreatedAt: now}
		}
		// Applied to a copy, so a refused item leaves its product as it was.
		next := *p
		next.Metadata = maps.Clone(p.Metadata)
		err := apply(&next, it)
		// A new product's metadata is checked (its required keys), a known
		// one's when the item changes it.
		if err == nil && (!known || !reflect.DeepEqual(next.Metadata, p.Metadata)) {
			err = s.meta.CheckMetadata(ctx, projectID, "product", next.Metadata)
		}
		if err != nil {
			reason := apierr.From(err).Details
			st.Fail(failure{Row: offset + i, SourceID: &srcs[i], Reason: reason})
			if report != nil {
				*report = append(*report, async.ReportLine(offset+i+1, srcs[i], reason))
			}
			continue
		}
		if report != nil {
			*report = append(*report, async.ReportLine(offset+i+1, srcs[i], ""))
		}
		*p = next
		if !known {
			bySource[srcs[i]] = p
			created[srcs[i]] = true
		} else if !created[srcs[i]] {
			p.UpdatedAt = &now
			updated[srcs[i]] = true
		}
		st.DoneCount++
	}
	var news, olds []Product
	for src, p := range bySource {
		switch {
		case created[src]:
			news = append(news, *p)
		case updated[src]:
			olds = append(olds, *p)
		}
	}
	b := &pgx.Batch{}
	if err := queueInsertProducts(b, projectID, news); err != nil {
		return err
	}
	for _, p := range olds {
		args, err := updateProductArgs(projectID, p)
		if err != nil {
			return err
		}
		b.Queue(updateProductSQL, args...)
	}
	if err := s.queueNotices(ctx, b, projectID, ProductCreated, news); err != nil {
		return err
	}
	if err := s.queueNotices(ctx, b, projectID, ProductUpdated, olds); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}

// queueInsertProducts queues one statement inserting all of ps.
func queueInsertProducts(b *pgx.Batch, projectID string, ps []Product) error {
	if len(ps) == 0 {
		return nil
	}
	n := len(ps)
	id, src, name, attrs, meta, img := make([]string, n), make([]*string, n), make([]*string, n), make([]string, n), make([]string, n), make([]*string, n)
	price := make([]*int64, n)
	at := make([]any, n)
	for i, p := range ps {
		a, m, err := p.documents()
		if err != nil {
			return err
		}
		id[i], src[i], name[i], price[i], img[i], at[i] = p.ID, p.SourceID, p.Name, p.Price, p.ImageURL, p.CreatedAt
		attrs[i], meta[i] = string(a), string(m)
	}
	b.Queue(`INSERT INTO products (project_id, id, source_id, name, price, attributes, metadata, image_url, created_at)
		SELECT $1, v.id, v.src, v.name, v.price, v.attrs::JSONB, v.meta::JSONB, v.img, v.at
		FROM unnest($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::INT8[], $6::TEXT[], $7::TEXT[], $8::TEXT[], $9::TIMESTAMPTZ[])
			AS v(id, src, name, price, attrs, meta, img, at)`, projectID, id, src, name, price, attrs, meta, img, at)
	return nil
}

// queueNotices queues a notice of type typ for each product.
func (s *Service) queueNotices(ctx context.Context, b *pgx.Batch, projectID, typ string, ps []Product) error {
	for _, p := range ps {
		if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: typ, Entity: p.ID, Object: p.View(nil, 0)}); err != nil {
			return err
		}
	}
	return nil
}

// importCSV reads the `file` form field, checks its header and starts the job.
func (h Handler) importCSV(actionType string) echo.HandlerFunc {
	return func(c echo.Context) error {
		fh, err := c.FormFile("file")
		if err != nil {
			return apierr.InvalidPayload("Send the CSV file as the multipart/form-data field named file.")
		}
		if fh.Size > MaxInput {
			return apierr.New(http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large", "An imported file is at most 10 MB.")
		}
		f, err := fh.Open()
		if err != nil {
			return err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		spec := productCSV
		if actionType == JobImportSKUs {
			spec = skuCSV
		}
		if _, err := spec.header(b); err != nil {
			return err
		}
		return h.svc.startJob(c, http.StatusOK, actionType, b)
	}
}

// trimLower is how a CSV header names a standard column.
func trimLower(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
