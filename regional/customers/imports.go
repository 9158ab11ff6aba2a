package customers

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/runtimex"
	"github.com/tallyhq/tally/regional/async"
)

// The customer jobs of the interface's background-task table: a CSV import
// (upsert by source_id) and the two bulk updates. Each answers 202 with its
// async action; the job writes through UpsertMany (a single write's checks
// and notices) in async's chunks, so a run again after a crash goes on
// after the last committed chunk.
const (
	JobImportCSV      = "CUSTOMERS.IMPORT_CSV"
	JobBulkUpdate     = "CUSTOMERS.BULK_UPDATE"
	JobMetadataUpdate = "CUSTOMERS.METADATA_UPDATE"
)

// MaxInput is the largest file or body a customer job takes, as the
// reference says (and the async inputs of the other jobs).
const MaxInput = 10 << 20

// LargeBodies are the customer jobs' paths, whose bodies may be MaxInput long.
var LargeBodies = []string{"/v1/customers/importCSV", "/v1/customers/bulk/async", "/v1/customers/metadata/async"}

// importChunk is how many rows (or items) a job writes a transaction.
const importChunk = 2000

// failure is a row or item that was not written. Row is the reference's:
// 1 for the first data row (of a bulk update, the item's index + 1); Line
// is the file's line where the row starts (the header is line 1).
type failure struct {
	Row      int     `json:"row"`
	Line     int     `json:"line,omitempty"`
	SourceID *string `json:"source_id,omitempty"`
	Reason   string  `json:"reason"`
}

type progress = async.Chunked[failure]

// HandleJobs registers the customer jobs with reg, which Register's import
// routes start; reports holds the reports of CUSTOMERS.BULK_UPDATE.
func (s *Service) HandleJobs(reg *async.Registry, reports async.Reports) {
	s.wake, s.reports = reg.Wake, reports
	// A retry of an erasure task starts it again; it is parked only after
	// many, and held reads wait for it meanwhile.
	reg.HandleTx(async.ErasureKind, s.eraseLater, async.Policy{MaxAttempts: 100, BackoffCap: 5 * time.Minute})
	reg.HandleJob(JobImportCSV, s.importJob)
	reg.HandleJob(JobBulkUpdate, s.bulkJob(JobBulkUpdate))
	reg.HandleJob(JobMetadataUpdate, s.bulkJob(JobMetadataUpdate))
}

// csvColumns are the CSV file's standard columns (any case, spaces or
// underscores), as the reference's API page and its template name them,
// each as the customer property it sets. As in the reference, any other
// column is a metadata key, named as the header writes it; a column
// metadata.<key> (Tally's addition) sets key, for a key that would
// otherwise read as a standard column.
var csvColumns = map[string]string{"id": "id", "source_id": "source_id", "name": "name", "email": "email", "phone": "phone",
	"birthdate": "birthdate", "birthday": "birthday", "description": "description",
	"address_line_1": "address.line_1", "address_line_2": "address.line_2",
	"address_postal_code": "address.postal_code", "postal_code": "address.postal_code",
	"address_city": "address.city", "city": "address.city", "address_state": "address.state", "state": "address.state",
	"address_country": "address.country", "country": "address.country"}

// csvHeader is what each position of the file's rows sets: a property
// (csvColumns' values) or metadata.<key>, a metadata key.
type csvHeader []string

// readHeader reads and checks the file's first line.
func readHeader(r *csv.Reader) (csvHeader, error) {
	rec, err := r.Read()
	if err != nil {
		return nil, apierr.InvalidPayload("The file must be CSV with a header line first (Source_id,Name,Email,…; any other column is a metadata key).")
	}
	h := make(csvHeader, len(rec))
	seen := map[string]string{}
	for i, col := range rec {
		if !utf8.ValidString(col) || strings.ContainsRune(col, 0) {
			return nil, apierr.InvalidPayload("The file is not CSV text: its header is not UTF-8.")
		}
		name := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(col)), " ", "_")
		prop, ok := csvColumns[name]
		if key, meta := strings.CutPrefix(strings.TrimSpace(col), "metadata."); !ok && meta {
			if key == "" || strings.ContainsFunc(key, func(r rune) bool { return r == ' ' || r == '\t' }) {
				return nil, apierr.InvalidPayload(fmt.Sprintf("Header column %d (%q) names no metadata key.", i+1, col))
			}
			prop, ok = "metadata."+key, true
		}
		if !ok {
			key := strings.TrimSpace(col)
			if key == "" {
				return nil, apierr.InvalidPayload(fmt.Sprintf("Header column %d is empty: name each column (a standard one, or a metadata key).", i+1))
			}
			prop = "metadata." + key
		}
		if prev, twice := seen[prop]; twice {
			return nil, apierr.InvalidPayload(fmt.Sprintf("Header columns %q and %q both set %s.", prev, col, prop))
		}
		seen[prop], h[i] = col, prop
	}
	return h, nil
}

func newCSVReader(r io.Reader) *csv.Reader {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // a row of the wrong width is that row's failure, not the file's
	return cr
}

// patch is a row as the write it asks for. As the reference, it overwrites
// a known customer whole: the properties of the file's columns (an empty
// cell clears one), every other property cleared, and the metadata
// replaced by the metadata columns'. A metadata cell reads as cell says:
// typed by the project's customer schema (metaschemas.Checker.Cells).
func (h csvHeader) patch(rec []string, cell func(key, v string) any) (*Patch, error) {
	if len(rec) != len(h) {
		return nil, fmt.Errorf("the row has %d fields, the header %d", len(rec), len(h))
	}
	var a Attrs
	var id, src *string
	var addr *Address
	strs := map[string]**string{"name": &a.Name, "description": &a.Description, "email": &a.Email, "phone": &a.Phone,
		"birthday": &a.Birthday, "birthdate": &a.Birthdate}
	lines := map[string]**string{}
	for i, prop := range h {
		v := strings.TrimSpace(rec[i])
		var val *string
		if v != "" {
			val = &v
		}
		switch {
		case strings.HasPrefix(prop, "metadata."):
			if a.Metadata == nil {
				a.Metadata = map[string]any{}
			}
			if v != "" {
				key := strings.TrimPrefix(prop, "metadata.")
				a.Metadata[key] = cell(key, v)
			}
		case strings.HasPrefix(prop, "address."):
			if addr == nil {
				addr = &Address{}
				lines = map[string]**string{"city": &addr.City, "state": &addr.State, "line_1": &addr.Line1, "line_2": &addr.Line2,
					"country": &addr.Country, "postal_code": &addr.PostalCode}
			}
			if dst := lines[strings.TrimPrefix(prop, "address.")]; dst != nil {
				*dst = val
			}
		case prop == "id":
			id = val
		case prop == "source_id":
			src = val
		default:
			if dst := strs[prop]; dst != nil {
				*dst = val
			}
		}
	}
	a.Address = addr
	if a.Metadata == nil {
		a.Metadata = map[string]any{}
	}
	// Checked as a single write checks it, so a bad row fails alone.
	return WholePatch(id, src, a)
}

// importCSV streams the `file` field of a multipart body into the job's
// input, checking its header first: the file is never held whole.
func (h Handler) importCSV(c echo.Context) error {
	ctype, params, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if err != nil || ctype != "multipart/form-data" || params["boundary"] == "" {
		return apierr.InvalidPayload("Send the CSV file as the multipart/form-data field named file.")
	}
	mr, err := c.Request().MultipartReader()
	if err != nil {
		return apierr.InvalidPayload("Send the CSV file as the multipart/form-data field named file.")
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return apierr.InvalidPayload("The multipart/form-data body has no field named file: send the CSV file in it.")
		}
		if err != nil {
			return tooLarge(err, apierr.InvalidPayload("The multipart/form-data body does not read: "+err.Error()))
		}
		if part.FormName() != "file" {
			continue
		}
		br := bufio.NewReaderSize(part, 64<<10)
		if bom, _ := br.Peek(3); string(bom) == "\xef\xbb\xbf" {
			br.Discard(3)
		}
		head, _ := br.Peek(64 << 10)
		if len(head) == 64<<10 && !strings.ContainsRune(string(head), '\n') {
			return apierr.InvalidPayload("The file's header line is longer than 64 KB.")
		}
		if _, err := readHeader(newCSVReader(strings.NewReader(string(head)))); err != nil {
			return err
		}
		return h.svc.startJob(c, JobImportCSV, func(ctx context.Context, tx pgx.Tx) (async.Action, error) {
			a, _, err := async.StartJobFrom(ctx, tx, httpx.ProjectID(c), JobImportCSV, nil, br, MaxInput)
			return a, err
		})
	}
}

// tooLarge is 413 when err is the body's limit, else other.
func tooLarge(err error, other error) error {
	var mbe *http.MaxBytesError
	if errors.Is(err, async.ErrInputTooLarge) || errors.As(err, &mbe) || errors.Is(err, echo.ErrStatusRequestEntityTooLarge) {
		return apierr.New(http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large",
			"A customer import or bulk update takes at most 10 MB.")
	}
	return other
}

// startJob records the job's action and input (start, in one transaction)
// and answers 202 with its id.
func (s *Service) startJob(c echo.Context, jobType string, start func(ctx context.Context, tx pgx.Tx) (async.Action, error)) error {
	ctx := c.Request().Context()
	var act async.Action
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		act, err = start(ctx, tx)
		return err
	})
	if err != nil {
		return tooLarge(err, err)
	}
	if s.wake != nil {
		s.wake()
	}
	return c.JSON(http.StatusAccepted, map[string]string{"async_action_id": act.ID})
}

// importJob is CUSTOMERS.IMPORT_CSV: the file read as a stream from the
// last checkpoint's row on, importChunk rows a transaction.
func (s *Service) importJob(ctx context.Context, job *async.Job) (any, error) {
	in, size, err := job.InputReader(ctx)
	if err != nil {
		return nil, err
	}
	r := newCSVReader(in)
	h, err := readHeader(r)
	if err != nil {
		return nil, err
	}
	cell, err := s.meta.Cells(ctx, job.ProjectID, "customer")
	if err != nil {
		return nil, err
	}
	var st progress
	if _, err := job.Resume(ctx, &st); err != nil {
		return nil, err
	}
	rows := &csvRows{r: r, h: h, cell: cell}
	read := rows.next
	for rows.n < st.Next {
		if rw, err := read(); err != nil || rw == nil {
			return nil, fmt.Errorf("customers: the import's input ends before its checkpoint (row %d): %v", st.Next, err)
		}
	}
	// The next chunk is read and parsed while this one is written: the
	// file's parsing (CPU here) and the chunk's transaction (mostly the
	// database's) overlap. One chunk ahead at most.
	type chunk struct {
		rows   []*csvRow
		n, pct int
		err    error
	}
	ahead := make(chan chunk, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(ahead)
		for {
			var c chunk
			c.err = runtimex.Call(func() error {
				for len(c.rows) < importChunk {
					rw, err := read()
					if err != nil || rw == nil {
						return err
					}
					c.rows = append(c.rows, rw)
				}
				return nil
			})
			c.n, c.pct = rows.n, int(r.InputOffset()*100/max(size, 1))
			select {
			case ahead <- c:
			case <-stop:
				return
			}
			if c.err != nil || len(c.rows) < importChunk {
				return
			}
		}
	}()
	for c := range ahead {
		if c.err != nil {
			return nil, c.err
		}
		if len(c.rows) == 0 {
			break
		}
		err := async.CommitChunk(ctx, job, &st, c.n, c.pct, func(ctx context.Context, tx pgx.Tx, st *progress) error {
			return s.importRows(ctx, tx, job, st, c.rows)
		})
		if err != nil {
			return nil, err
		}
	}
	msg := fmt.Sprintf("%d customer(s) imported successfully, %d failed.", st.DoneCount, st.FailedCount)
	if st.FailedCount > len(st.Failed) {
		msg += fmt.Sprintf(" The first %d failures are listed.", len(st.Failed))
	}
	return map[string]any{"message": msg, "done_count": st.DoneCount, "failed_count": st.FailedCount, "failed": st.Listed()}, nil
}

// csvRow is a data row of a customers CSV: its place (n counts data rows
// from 1; line is the file's), its source_id, and the customer it makes
// or why it cannot.
type csvRow struct {
	n, line int
	src     *string
	refs    []string // the id and source_id it names the customer by
	rec     []string // its fields, which Skips.Fields reads
	patch   *Patch
	bad     string
}

// csvRows reads a customers CSV's data rows after its header.
type csvRows struct {
	r    *csv.Reader
	h    csvHeader
	cell func(key, v string) any
	n    int // data rows read
}

// next is the next data row, nil at the end.
func (rs *csvRows) next() (*csvRow, error) {
	rec, err := rs.r.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	rs.n++
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &csvRow{n: rs.n, line: pe.StartLine, bad: "the line is not valid CSV: " + pe.Err.Error()}, nil
	}
	if err != nil {
		return nil, err
	}
	line, _ := rs.r.FieldPos(0)
	rw := &csvRow{n: rs.n, line: line, rec: rec}
	for i, prop := range rs.h {
		if (prop == "source_id" || prop == "id") && i < len(rec) && strings.TrimSpace(rec[i]) != "" {
			v := strings.TrimSpace(rec[i])
			if rw.refs = append(rw.refs, v); prop == "source_id" {
				rw.src = &v
			}
		}
	}
	if rw.patch, err = rs.h.patch(rec, rs.cell); err != nil {
		rw.bad = Refusal(err)
	}
	return rw, nil
}

// importRows writes a chunk of rows in tx, counting each in st: those
// that name a customer permanently deleted (async.Skips) failed without
// their source_id, the bad ones with their reason, the others as
// UpsertMany answers them.
func (s *Service) importRows(ctx context.Context, tx pgx.Tx, job *async.Job, st *progress, rows []*csvRow) error {
	sk, err := job.Skips(ctx, tx, rows[0].n-1, rows[len(rows)-1].n)
	if err != nil {
		return err
	}
	var ps []*Patch
	var of []*csvRow
	for _, rw := range rows {
		if sk.Fields(rw.n-1, rw.rec) {
			st.FailItem(rw.n-1, failure{Row: rw.n, Line: rw.line, Reason: async.ErasedItem})
			continue
		}
		if rw.bad != "" {
			st.FailItemOf(rw.n-1, rw.refs, failure{Row: rw.n, Line: rw.line, SourceID: rw.src, Reason: rw.bad})
			continue
		}
		ps, of = append(ps, rw.patch), append(of, rw)
	}
	errs, err := s.UpsertMany(ctx, tx, job.ProjectID, ps)
	if err != nil {
		return err
	}
	for i, e := range errs {
		if e != nil {
			st.FailItemOf(of[i].n-1, of[i].refs, failure{Row: of[i].n, Line: of[i].line, SourceID: of[i].src, Reason: Refusal(e)})
			continue
		}
		st.DoneCount++
	}
	return nil
}

// readBody reads a bulk update's JSON body, at most MaxInput.
func readBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(c.Request().Body, MaxInput+1))
	if err != nil {
		return nil, tooLarge(err, err)
	}
	if len(b) > MaxInput {
		return nil, tooLarge(async.ErrInputTooLarge, nil)
	}
	return b, nil
}

func (h Handler) bulk(jobType string) echo.HandlerFunc {
	return func(c echo.Context) error {
		b, err := readBody(c)
		if err != nil {
			return err
		}
		if _, err := bulkPatches(jobType, b); err != nil {
			return err
		}
		return h.svc.startJob(c, jobType, func(ctx context.Context, tx pgx.Tx) (async.Action, error) {
			return async.StartJobWithInput(ctx, tx, httpx.ProjectID(c), jobType, nil, b)
		})
	}
}

// bulkJob is CUSTOMERS.BULK_UPDATE and CUSTOMERS.METADATA_UPDATE: each
// item upserts the customer with its source_id; the result is the
// reference's bulk update result.
func (s *Service) bulkJob(jobType string) async.JobFunc {
	return func(ctx context.Context, job *async.Job) (any, error) {
		ps, docs, err := s.bulkInput(ctx, job, jobType)
		if err != nil {
			return nil, err
		}
		var st progress
		if _, err := job.Resume(ctx, &st); err != nil {
			return nil, err
		}
		// Only the bulk update's result has reports in the reference.
		report := jobType == JobBulkUpdate
		err = async.RunChunks(ctx, job, &st, len(ps), importChunk, func(ctx context.Context, tx pgx.Tx, st *progress, from, to int) error {
			errs, err := s.upsertSkipping(ctx, tx, job, ps[from:to], docs[from:to], from)
			if err != nil {
				return err
			}
			var lines [][]string
			for i, e := range errs {
				row := from + i + 1
				if e != nil {
					src := failedSource(ps[from+i], e)
					st.FailItem(row-1, failure{Row: row, SourceID: src, Reason: Refusal(e)})
					lines = append(lines, reportLine(row, src, Refusal(e)))
					continue
				}
				st.DoneCount++
				lines = append(lines, reportLine(row, ps[from+i].SourceID, ""))
			}
			if report {
				err = st.Report(ctx, tx, s.reports, job, "source_id", lines)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		errs := make([]map[string]any, len(st.Failed))
		for i, f := range st.Failed {
			errs[i] = map[string]any{"key": "invalid_payload", "message": "Invalid payload", "details": f.Reason, "source_id": f.SourceID}
		}
		res := map[string]any{"done_count": st.DoneCount, "failed_count": st.FailedCount, "errors": errs}
		if report {
			if err := st.FinishReport(ctx, s.reports, job, res); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
}

// reportLine is an item's line of the bulk update's report.
func reportLine(row int, sourceID *string, reason string) []string {
	src := ""
	if sourceID != nil {
		src = *sourceID
	}
	return async.ReportLine(row, src, reason)
}
