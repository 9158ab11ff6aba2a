package products

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/webhooks"
)

// csvSpec is what an imported file's columns mean: the standard ones, of
// which some are required; every other column is a metadata key.
type csvSpec struct {
	what     string
	resource string // the metadata schema its rows' metadata answers to
	standard []string
	required []string
}

var (
	productCSV = csvSpec{what: "products", resource: "product", standard: []string{"name", "source_id", "price", "attributes", "image_url"},
		required: []string{"name"}}
	skuCSV = csvSpec{what: "SKUs", resource: "sku", standard: []string{"product_id", "sku", "source_id", "price", "currency", "image_url", "attributes"},
		required: []string{"product_id", "source_id"}}
)

// csvHeader is a file's first line as the spec reads it.
type csvHeader struct {
	index map[string]int // standard column → its position
	meta  []string       // metadata key of each position, "" for standard columns
	// cell is a metadata cell's value, typed by the project's schema of
	// the rows' resource (a number, a boolean…); nil keeps cells as text.
	cell func(key, v string) any
}

func newReader(b []byte) *csv.Reader {
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1 // a row of the wrong width is that row's failure, not the file's
	r.ReuseRecord = false
	return r
}

// header reads and checks the first line: a bad header is the request's
// 400, before any job starts.
func (s csvSpec) header(b []byte) (csvHeader, error) {
	rec, err := newReader(b).Read()
	if err != nil {
		return csvHeader{}, apierr.InvalidPayload("The file must be CSV with a header line first (" + strings.Join(s.standard, ",") + ").")
	}
	h := csvHeader{index: map[string]int{}, meta: make([]string, len(rec))}
	seen := map[string]bool{}
	for i, col := range rec {
		name := trimLower(col)
		if seen[name] {
			return csvHeader{}, apierr.InvalidPayload(fmt.Sprintf("The header names column %q twice.", col))
		}
		seen[name] = true
		if isStandard(s.standard, name) {
			h.index[name] = i
			continue
		}
		key := strings.TrimSpace(col)
		if key == "" || strings.ContainsFunc(key, unicode.IsSpace) {
			return csvHeader{}, apierr.InvalidPayload(fmt.Sprintf(
				"Header column %d (%q) is not a standard column (%s) and not a metadata key: metadata keys are non-empty and hold no white space.",
				i+1, col, strings.Join(s.standard, ", ")))
		}
		h.meta[i] = key
	}
	for _, r := range s.required {
		if _, ok := h.index[r]; !ok {
			return csvHeader{}, apierr.InvalidPayload(fmt.Sprintf("The header must name the %s column; %s need it.", r, s.what))
		}
	}
	return h, nil
}

func isStandard(standard []string, name string) bool {
	for _, s := range standard {
		if s == name {
			return true
		}
	}
	return false
}

// csvRow is one record: its line in the file, its fields, and why it cannot
// be imported when it cannot.
type csvRow struct {
	line   int
	fields []string
	bad    string
}

// rows reads the records after the header. A record the CSV reader cannot
// make out, or of the wrong width, is kept as a bad row.
func (s csvSpec) rows(b []byte) (csvHeader, []csvRow, error) {
	h, err := s.header(b)
	if err != nil {
		return h, nil, err
	}
	r := newReader(b)
	if _, err := r.Read(); err != nil {
		return h, nil, err
	}
	var out []csvRow
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return h, out, nil
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			out = append(out, csvRow{line: pe.StartLine, bad: "the line is not valid CSV: " + pe.Err.Error()})
			continue
		}
		if err != nil {
			return h, nil, err
		}
		line, _ := r.FieldPos(0)
		row := csvRow{line: line, fields: rec}
		if len(rec) != len(h.meta) {
			row.bad = fmt.Sprintf("the row has %d fields, the header %d", len(rec), len(h.meta))
		}
		out = append(out, row)
	}
}

// get is a standard column's value, trimmed ("" when the file or the row
// lacks it). A bad row may have fewer fields than the header, or none at all
// when the CSV reader could not make the line out, and its failure record
// still asks for its source_id.
func (h csvHeader) get(r csvRow, col string) string {
	if i, ok := h.index[col]; ok && i < len(r.fields) {
		return strings.TrimSpace(r.fields[i])
	}
	return ""
}

// text is get for a property: nil when empty, else checked.
func (h csvHeader) text(r csvRow, col string) (*string, error) {
	v := h.get(r, col)
	if v == "" {
		return nil, nil
	}
	if err := checkText(col, v, true); err != nil {
		return nil, err
	}
	return &v, nil
}

// common reads the columns products and SKUs share: price, image_url and
// the metadata columns.
func (h csvHeader) common(r csvRow) (price *int64, img *string, meta map[string]any, err error) {
	if v := h.get(r, "price"); v != "" {
		n, err := parsePrice(v)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("price %w", err)
		}
		price = &n
	}
	if img, err = h.text(r, "image_url"); err != nil {
		return nil, nil, nil, err
	}
	if img != nil {
		if err := checkURL(*img); err != nil {
			return nil, nil, nil, err
		}
	}
	meta = map[string]any{}
	for i, key := range h.meta {
		if key != "" && strings.TrimSpace(r.fields[i]) != "" {
			if err := checkText(key, r.fields[i], false); err != nil {
				return nil, nil, nil, err
			}
			meta[key] = r.fields[i]
			if h.cell != nil {
				meta[key] = h.cell(key, r.fields[i])
			}
		}
	}
	return price, img, meta, nil
}

// reason is an error as a failed row's reason.
func reason(err error) string {
	var e *apierr.Error
	if errors.As(err, &e) {
		return e.Details
	}
	return err.Error()
}

// duplicates marks each row whose source_id an earlier row of the file has.
func duplicates(h csvHeader, rows []csvRow) {
	first := map[string]int{}
	for i := range rows {
		r := &rows[i]
		if r.bad != "" {
			continue
		}
		src := h.get(*r, "source_id")
		if src == "" {
			continue
		}
		if line, ok := first[src]; ok {
			r.bad = fmt.Sprintf("source_id %q is already on line %d of the file", src, line)
			continue
		}
		first[src] = r.line
	}
}

// importProductsJob is PRODUCTS.IMPORT_CSV: a row whose source_id is a live
// product's renames it (the only property an import changes, as the
// reference says); every other row creates a product.
func (s *Service) importProductsJob(ctx context.Context, job *async.Job) (any, error) {
	return s.runImport(ctx, job, productCSV, s.importProducts)
}

// importChunk imports rows of a file in tx, recording what they leave in st.
type importChunk func(ctx context.Context, tx pgx.Tx, projectID string, h csvHeader, rows []csvRow, st *progress) error

// runImport reads the job's file as spec says and imports its rows a chunk
// per transaction, from the last checkpoint on.
func (s *Service) runImport(ctx context.Context, job *async.Job, spec csvSpec, write importChunk) (any, error) {
	in, err := job.Input(ctx)
	if err != nil {
		return nil, err
	}
	h, rows, err := spec.rows(in)
	if err != nil {
		return nil, err
	}
	if h.cell, err = s.meta.Cells(ctx, job.ProjectID, spec.resource); err != nil {
		return nil, err
	}
	duplicates(h, rows)
	var st progress
	if _, err := job.Resume(ctx, &st); err != nil {
		return nil, err
	}
	err = async.RunChunks(ctx, job, &st, len(rows), chunk, func(ctx context.Context, tx pgx.Tx, st *progress, from, to int) error {
		return write(ctx, tx, job.ProjectID, h, rows[from:to], st)
	})
	if err != nil {
		return nil, err
	}
	return importResult(st, spec.what), nil
}

func productRow(h csvHeader, r csvRow) (Product, error) {
	if r.bad != "" {
		return Product{}, errors.New(r.bad)
	}
	var p Product
	var err error
	if p.Name, err = h.text(r, "name"); err != nil {
		return p, err
	}
	if p.Name == nil {
		return p, errors.New("name is required")
	}
	if p.SourceID, err = h.text(r, "source_id"); err != nil {
		return p, err
	}
	if p.Price, p.ImageURL, p.Metadata, err = h.common(r); err != nil {
		return p, err
	}
	for _, a := range strings.Split(h.get(r, "attributes"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			p.Attributes = append(p.Attributes, a)
		}
	}
	return p, nil
}

func (s *Service) importProducts(ctx context.Context, tx pgx.Tx, projectID string, h csvHeader, rows []csvRow, st *progress) error {
	ps := make([]Product, len(rows))
	ok := make([]bool, len(rows))
	var srcs []string
	for i, r := range rows {
		p, err := productRow(h, r)
		if err != nil {
			st.Fail(failure{Row: r.line, SourceID: nilIfEmpty(h.get(r, "source_id")), Reason: reason(err)})
			continue
		}
		ps[i], ok[i] = p, true
		if p.SourceID != nil {
			srcs = append(srcs, *p.SourceID)
		}
	}
	existing := map[string]Product{}
	if len(srcs) > 0 {
		found, err := lockLiveProducts(ctx, tx, projectID, "source_id", srcs)
		if err != nil {
			return err
		}
		for _, p := range found {
			existing[*p.SourceID] = p
		}
	}
	now := s.now()
	var news, renamed []Product
	for i, p := range ps {
		if !ok[i] {
			continue
		}
		if p.SourceID != nil {
			if old, found := existing[*p.SourceID]; found {
				st.DoneCount++
				old.Name, old.UpdatedAt = p.Name, &now
				renamed = append(renamed, old)
				continue
			}
		}
		// A new product's metadata (a known one keeps its own).
		if err := s.meta.CheckMetadata(ctx, projectID, "product", p.Metadata); err != nil {
			st.Fail(failure{Row: rows[i].line, SourceID: p.SourceID, Reason: reason(err)})
			continue
		}
		st.DoneCount++
		p.ID, p.CreatedAt = ids.New("prod_"), now
		news = append(news, p)
	}
	b := &pgx.Batch{}
	if err := queueInsertProducts(b, projectID, news); err != nil {
		return err
	}
	for _, p := range renamed {
		b.Queue(`UPDATE products SET name = $3, updated_at = $4 WHERE project_id = $1 AND id = $2`, projectID, p.ID, p.Name, p.UpdatedAt)
	}
	if err := s.queueNotices(ctx, b, projectID, ProductCreated, news); err != nil {
		return err
	}
	if err := s.queueNotices(ctx, b, projectID, ProductUpdated, renamed); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// importSKUsJob is SKUS.IMPORT_CSV: each row adds a SKU to the live product
// its product_id names (by id or source_id); a row whose source_id is a
// live SKU of that product updates its sku and price.
func (s *Service) importSKUsJob(ctx context.Context, job *async.Job) (any, error) {
	return s.runImport(ctx, job, skuCSV, s.importSKUs)
}

// skuRow reads a row as a SKU and the product reference it names.
func skuRow(h csvHeader, r csvRow) (SKU, string, error) {
	if r.bad != "" {
		return SKU{}, "", errors.New(r.bad)
	}
	var k SKU
	var err error
	product := h.get(r, "product_id")
	if product == "" {
		return k, "", errors.New("product_id is required: the id or source_id of the SKU's product")
	}
	if k.SourceID, err = h.text(r, "source_id"); err != nil {
		return k, "", err
	}
	if k.SourceID == nil {
		return k, "", errors.New("source_id is required")
	}
	if k.SKU, err = h.text(r, "sku"); err != nil {
		return k, "", err
	}
	if k.Currency, err = h.text(r, "currency"); err != nil {
		return k, "", err
	}
	if k.Currency != nil {
		if err := checkCurrency(*k.Currency); err != nil {
			return k, "", fmt.Errorf("currency %w", err)
		}
	}
	if k.Price, k.ImageURL, k.Metadata, err = h.common(r); err != nil {
		return k, "", err
	}
	if a := h.get(r, "attributes"); a != "" {
		if err := json.Unmarshal([]byte(a), &k.Attributes); err != nil {
			// The reference's template writes them with single quotes.
			if err := json.Unmarshal([]byte(strings.ReplaceAll(a, "'", `"`)), &k.Attributes); err != nil {
				return k, "", fmt.Errorf(`attributes must be a JSON object such as {"color":"blue"}, got %q`, a)
			}
		}
	}
	return k, product, nil
}

func (s *Service) importSKUs(ctx context.Context, tx pgx.Tx, projectID string, h csvHeader, rows []csvRow, st *progress) error {
	type item struct {
		row     csvRow
		sku     SKU
		product string
	}
	var items []item
	var refs, srcs []string
	for _, r := range rows {
		k, product, err := skuRow(h, r)
		if err != nil {
			st.Fail(failure{Row: r.line, SourceID: nilIfEmpty(h.get(r, "source_id")), Reason: reason(err)})
			continue
		}
		items = append(items, item{r, k, product})
		refs, srcs = append(refs, product), append(srcs, *k.SourceID)
	}
	// Each reference is a product id or, failing that, a source_id.
	products := map[string]string{}
	refs = distinct(refs)
	byID, err := lockLiveProducts(ctx, tx, projectID, "id", refs)
	if err != nil {
		return err
	}
	for _, p := range byID {
		products[p.ID] = p.ID
	}
	var rest []string
	for _, r := range refs {
		if _, ok := products[r]; !ok {
			rest = append(rest, r)
		}
	}
	bySrc, err := lockLiveProducts(ctx, tx, projectID, "source_id", rest)
	if err != nil {
		return err
	}
	for _, p := range bySrc {
		products[*p.SourceID] = p.ID
	}
	existing, err := lockLiveSKUs(ctx, tx, projectID, srcs)
	if err != nil {
		return err
	}
	bySource := map[string]SKU{}
	for _, k := range existing {
		bySource[*k.SourceID] = k
	}
	now := s.now()
	b := &pgx.Batch{}
	for _, it := range items {
		productID, ok := products[it.product]
		if !ok {
			st.Fail(failure{Row: it.row.line, SourceID: it.sku.SourceID,
				Reason: fmt.Sprintf("product %q is not found: give the id or source_id of a product imported or created before", it.product)})
			continue
		}
		k := it.sku
		if old, found := bySource[*k.SourceID]; found {
			if old.ProductID != productID {
				st.Fail(failure{Row: it.row.line, SourceID: k.SourceID,
					Reason: fmt.Sprintf("source_id %q is a SKU of product %s already", *k.SourceID, old.ProductID)})
				continue
			}
			if k.SKU != nil {
				old.SKU = k.SKU
			}
			if k.Price != nil {
				old.Price = k.Price
			}
			old.UpdatedAt = &now
			b.Queue(`UPDATE skus SET sku = $3, price = $4, updated_at = $5 WHERE project_id = $1 AND id = $2`,
				projectID, old.ID, old.SKU, old.Price, old.UpdatedAt)
			if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: SKUUpdated, Entity: old.ID,
				Object: old.View()}); err != nil {
				return err
			}
		} else {
			if err := s.meta.CheckMetadata(ctx, projectID, "sku", k.Metadata); err != nil {
				st.Fail(failure{Row: it.row.line, SourceID: k.SourceID, Reason: reason(err)})
				continue
			}
			k.ID, k.ProductID, k.CreatedAt = ids.New("sku_"), productID, now
			if err := queueInsertSKU(b, projectID, k); err != nil {
				return err
			}
			if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: SKUCreated, Entity: k.ID,
				Object: k.View()}); err != nil {
				return err
			}
		}
		st.DoneCount++
	}
	return tx.SendBatch(ctx, b).Close()
}

func distinct(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func queueInsertSKU(b *pgx.Batch, projectID string, k SKU) error {
	args, err := skuArgs(projectID, k)
	if err != nil {
		return err
	}
	b.Queue(insertSKUSQL, args...)
	return nil
}
