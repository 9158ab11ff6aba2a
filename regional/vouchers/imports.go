package vouchers

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty"
)

// The voucher jobs of the interface's background-task table: imports of
// vouchers (JSON or CSV; standalone or into a campaign, taking its
// template) and bulk metadata updates. Each job reads its input once,
// writes it in chunks of importChunk, one transaction a chunk with its
// checkpoint, so a job run again after a crash goes on after the last
// committed chunk; rows that fail (a taken code, a code twice in the
// input, a bad value) are reported, the others written.
const (
	JobImport         = "VOUCHERS.IMPORT"
	JobImportCSV      = "VOUCHERS.IMPORT_CSV"
	JobBulkUpdate     = "VOUCHERS.BULK_UPDATE"
	JobMetadataUpdate = "VOUCHERS.METADATA_UPDATE"
	JobCampaignImport = "CAMPAIGN.VOUCHERS_IMPORT"
	JobCampaignCSV    = "CAMPAIGN.VOUCHERS_IMPORT_CSV"
)

// MaxInput is the largest input a voucher job takes.
const MaxInput = 10 << 20

// LargeBodies are the voucher jobs' paths, whose bodies may be MaxInput long.
var LargeBodies = []string{"/v1/vouchers/import", "/v1/vouchers/importCSV", "/v1/vouchers/bulk/async",
	"/v1/vouchers/metadata/async", "/v1/campaigns/*/import", "/v1/campaigns/*/importCSV"}

const importChunk = 5000

// jobInput is what a voucher job starts with: the items, as JSON, and the
// campaign they go into ("" for standalone vouchers).
type jobInput struct {
	CampaignID string            `json:"campaign_id,omitempty"`
	Items      []json.RawMessage `json:"items"`
	// Metadata is VOUCHERS.METADATA_UPDATE's: set on every item (a code).
	Metadata map[string]any `json:"metadata,omitempty"`
}

// importFailure is a row that was not written.
type importFailure struct {
	Row    int    `json:"row"`
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason"`
}

type importState struct {
	Next        int             `json:"next"`
	DoneCount   int             `json:"done_count"`
	FailedCount int             `json:"failed_count"`
	Failed      []importFailure `json:"failed"`
}

func (st *importState) fail(row int, code, reason string) {
	st.FailedCount++
	if len(st.Failed) < 1000 {
		st.Failed = append(st.Failed, importFailure{Row: row, Code: code, Reason: reason})
	}
}

// RegisterJobs registers the voucher jobs with reg and mounts their routes.
func (s *Service) RegisterJobs(g *echo.Group, reg *async.Registry, wake func()) {
	s.wake = wake
	for _, t := range []string{JobImport, JobImportCSV, JobCampaignImport, JobCampaignCSV} {
		reg.HandleJob(t, s.importJob)
	}
	reg.HandleJob(JobBulkUpdate, s.metadataJob)
	reg.HandleJob(JobMetadataUpdate, s.metadataJob)
	g.POST("/vouchers/import", s.startImport(JobImport, false))
	g.POST("/vouchers/importCSV", s.startImport(JobImportCSV, true))
	g.POST("/campaigns/:campaignId/import", s.startImport(JobCampaignImport, false))
	g.POST("/campaigns/:campaignId/importCSV", s.startImport(JobCampaignCSV, true))
	g.POST("/vouchers/bulk/async", s.startMetadata(JobBulkUpdate))
	g.POST("/vouchers/metadata/async", s.startMetadata(JobMetadataUpdate))
}

func readInput(c echo.Context, csvFile bool) ([]byte, error) {
	var r io.Reader = c.Request().Body
	if csvFile {
		fh, err := c.FormFile("file")
		if err != nil {
			return nil, apierr.InvalidPayload("Send the CSV file as the multipart/form-data field named file.")
		}
		f, err := fh.Open()
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxInput+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxInput {
		return nil, apierr.New(http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large", "A voucher job takes at most 10 MB.")
	}
	return bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")), nil
}

// startImport checks the input (JSON array or CSV file) and the campaign,
// and starts the job: 202 with its async action.
func (s *Service) startImport(jobType string, csvFile bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, projectID := c.Request().Context(), httpx.ProjectID(c)
		in := jobInput{}
		if key := c.Param("campaignId"); key != "" {
			camp, err := s.campaign(ctx, s.pool, projectID, key, false)
			if err != nil {
				return err
			}
			in.CampaignID = camp.ID
		}
		b, err := readInput(c, csvFile)
		if err != nil {
			return err
		}
		if csvFile {
			in.Items, err = csvItems(b)
		} else if err = json.Unmarshal(b, &in.Items); err != nil || len(in.Items) == 0 {
			err = apierr.InvalidPayload("The body must be a JSON array of voucher objects, each with a code.")
		}
		if err != nil {
			return err
		}
		return s.startJob(c, jobType, in)
	}
}

func (s *Service) startJob(c echo.Context, jobType string, in jobInput) error {
	ctx := c.Request().Context()
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	var act async.Action
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		act, err = async.StartJobWithInput(ctx, tx, httpx.ProjectID(c), jobType, nil, raw)
		return err
	})
	if err != nil {
		return err
	}
	if s.wake != nil {
		s.wake()
	}
	return c.JSON(http.StatusAccepted, map[string]string{"async_action_id": act.ID})
}

// csvColumns are the CSV file's known columns (case and spaces aside);
// every other column is a metadata property.
var csvColumns = map[string]string{"code": "code", "voucher type": "type", "type": "type", "value": "value",
	"discount type": "discount_type", "category": "category", "start date": "start_date", "expiration date": "expiration_date",
	"redemption limit": "quantity", "active": "active", "additional info": "additional_info", "gift amount": "gift_amount"}

// csvItems reads a CSV file of vouchers into voucher objects: Code
// (required), Voucher Type (DISCOUNT_VOUCHER or GIFT_VOUCHER), Discount
// Type (AMOUNT, PERCENT, FIXED) with Value (the amount in the smallest
// currency unit, or the percent), Gift Amount, Category, Start Date,
// Expiration Date, Redemption Limit, Active, Additional Info; every other
// column is metadata.
func csvItems(b []byte) ([]json.RawMessage, error) {
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return nil, apierr.InvalidPayload("The CSV file has no header line.")
	}
	names := make([]string, len(header))
	for i, h := range header {
		k := strings.ToLower(strings.TrimSpace(h))
		if k == "" {
			return nil, apierr.InvalidPayload(fmt.Sprintf("CSV column %d has no name.", i+1))
		}
		if std, ok := csvColumns[k]; ok {
			k = std
		} else {
			k = "metadata." + strings.TrimSpace(h)
		}
		if slices.Contains(names[:i], k) {
			return nil, apierr.InvalidPayload("CSV column " + h + " is named twice.")
		}
		names[i] = k
	}
	if !slices.Contains(names, "code") {
		return nil, apierr.InvalidPayload("The CSV file needs a Code column.")
	}
	var out []json.RawMessage
	for line := 2; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, apierr.InvalidPayload(fmt.Sprintf("The CSV file does not read at line %d: %v", line, err))
		}
		item := map[string]any{}
		meta := map[string]any{}
		var discType, value string
		for i, v := range rec {
			if i >= len(names) || v == "" {
				continue
			}
			switch k := names[i]; {
			case strings.HasPrefix(k, "metadata."):
				meta[strings.TrimPrefix(k, "metadata.")] = v
			case k == "discount_type":
				discType = strings.ToUpper(v)
			case k == "value":
				value = v
			case k == "quantity":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					item["_error"] = "Redemption Limit must be a whole number"
				}
				item["redemption"] = map[string]any{"quantity": n}
			case k == "active":
				item["active"] = strings.EqualFold(v, "true")
			case k == "gift_amount":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					item["_error"] = "Gift Amount must be a whole number"
				}
				item["gift"] = map[string]any{"amount": n}
			case k == "type":
				item["type"] = strings.ToUpper(v)
			default:
				item[k] = v
			}
		}
		if discType != "" || value != "" {
			num, err := strconv.ParseFloat(value, 64)
			if err != nil {
				item["_error"] = "Value must be a number"
			}
			field := map[string]string{"AMOUNT": "amount_off", "PERCENT": "percent_off", "FIXED": "fixed_amount"}[discType]
			if field == "" {
				item["_error"] = "Discount Type must be AMOUNT, PERCENT or FIXED"
			}
			item["discount"] = map[string]any{"type": discType, field: num}
		}
		if len(meta) > 0 {
			item["metadata"] = meta
		}
		raw, _ := json.Marshal(item)
		out = append(out, raw)
	}
	if len(out) == 0 {
		return nil, apierr.InvalidPayload("The CSV file has no vouchers.")
	}
	return out, nil
}

// runJob reads a job's input and checkpoint and runs do on its items in
// chunks of importChunk, each in one transaction that ends with the
// checkpoint, so a rerun goes on after the last committed chunk.
func (s *Service) runJob(ctx context.Context, job *async.Job,
	do func(tx pgx.Tx, in *jobInput, st *importState, from, to int) error) (importState, error) {
	var st importState
	raw, err := job.Input(ctx)
	if err != nil {
		return st, err
	}
	var in jobInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return st, err
	}
	if _, err := job.Resume(ctx, &st); err != nil {
		return st, err
	}
	for st.Next < len(in.Items) {
		from, to := st.Next, min(len(in.Items), st.Next+importChunk)
		var next importState
		err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
			next = st
			next.Failed = slices.Clone(st.Failed)
			if err := do(tx, &in, &next, from, to); err != nil {
				return err
			}
			next.Next = to
			return job.Checkpoint(ctx, tx, next, to*100/len(in.Items))
		})
		if err != nil {
			return st, err
		}
		st = next
	}
	return st, nil
}

// importJob writes the vouchers of an import, chunk by chunk.
func (s *Service) importJob(ctx context.Context, job *async.Job) (any, error) {
	seen := map[string]int{} // a code twice in the input: the later rows fail
	st, err := s.runJob(ctx, job, func(tx pgx.Tx, in *jobInput, next *importState, from, to int) error {
		var camp *Campaign
		if in.CampaignID != "" {
			c, err := s.campaignShared(ctx, tx, job.ProjectID, in.CampaignID)
			if err != nil {
				return err
			}
			camp = &c
		}
		vs := make([]Voucher, 0, to-from)
		rows := make([]int, 0, to-from)
		now := s.now()
		for i := from; i < to; i++ {
			v, err := s.importVoucher(in.Items[i], camp, now)
			code := v.Code
			if err == nil {
				if first, ok := seen[code]; ok && first != i {
					err = fmt.Errorf("the code is on row %d already", first+1)
				}
			}
			if err != nil {
				next.fail(i+1, code, err.Error())
				continue
			}
			seen[code] = i
			vs, rows = append(vs, v), append(rows, i+1)
		}
		made, err := insertVouchers(ctx, tx, job.ProjectID, vs)
		if err != nil {
			return err
		}
		for k, v := range vs {
			if !made[v.ID] {
				next.fail(rows[k], v.Code, "the code is taken by another voucher or loyalty card of the project")
			}
		}
		next.DoneCount += len(made)
		if camp != nil && len(made) > 0 {
			return campaigns.AddVouchersCount(ctx, tx, job.ProjectID, camp.ID, int64(len(made)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	failed := st.Failed
	if failed == nil {
		failed = []importFailure{}
	}
	return map[string]any{"message": fmt.Sprintf("%d vouchers imported, %d failed.", st.DoneCount, st.FailedCount),
		"done_count": st.DoneCount, "failed_count": st.FailedCount, "failed": failed}, nil
}

// importVoucher makes the voucher an item describes: standalone, or of
// the campaign (its template, with the item's own code and properties).
func (s *Service) importVoucher(raw json.RawMessage, camp *Campaign, now time.Time) (Voucher, error) {
	var probe struct {
		Code  *string `json:"code"`
		Error string  `json:"_error"`
	}
	if json.Unmarshal(raw, &probe) != nil {
		return Voucher{}, errors.New("the item is not a voucher object")
	}
	if probe.Code == nil || strings.TrimSpace(*probe.Code) == "" || len(*probe.Code) > 250 {
		return Voucher{}, errors.New("code is required: 1 to 250 characters")
	}
	code := *probe.Code
	if probe.Error != "" {
		return Voucher{Code: code}, errors.New(probe.Error)
	}
	var r Request
	if err := json.Unmarshal(raw, &r); err != nil {
		return Voucher{Code: code}, fmt.Errorf("the voucher does not read: %v", err)
	}
	v := Voucher{ID: ids.New("v_"), Code: code, Type: Discount, Active: true, CreatedAt: now}
	if camp != nil {
		if r.Type != nil && *r.Type != camp.Attrs.Voucher.Type {
			return v, fmt.Errorf("type must be the campaign's voucher type, %s", camp.Attrs.Voucher.Type)
		}
		v = camp.Attrs.Voucher.voucher(*camp, code, now)
		v.ID = ids.New("v_")
	} else if r.Type == nil && present(r.Gift) {
		r.Type = ptr(Gift)
	}
	r.Code, r.Campaign, r.CampaignID = nil, nil, nil
	if err := r.apply(&v, camp == nil); err != nil {
		return v, errors.New(apierr.From(err).Details)
	}
	return v, nil
}

// insertVouchers writes vouchers in two statements (their codes in the
// registry, then the vouchers whose codes were free) and the gift cards'
// opening entries; it answers the ids written.
func insertVouchers(ctx context.Context, tx pgx.Tx, projectID string, vs []Voucher) (map[string]bool, error) {
	made := map[string]bool{}
	if len(vs) == 0 {
		return made, nil
	}
	n := len(vs)
	vids, codes, types, attrs, cats, catIDs, camps := make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]*string, n), make([]*string, n), make([]*string, n)
	active, quantity := make([]bool, n), make([]*int64, n)
	for i, v := range vs {
		a, err := json.Marshal(v.Attrs)
		if err != nil {
			return nil, err
		}
		vids[i], codes[i], types[i], attrs[i], cats[i], catIDs[i], camps[i], active[i], quantity[i] = v.ID, v.Code, v.Type, string(a),
			v.Category, v.CategoryID, v.CampaignID, v.Active, v.Quantity
	}
	rows, err := tx.Query(ctx, `WITH reg AS (
			INSERT INTO voucher_codes (project_id, code, voucher_id)
			SELECT $1, x.code, x.id FROM unnest($2::TEXT[], $3::TEXT[]) AS x(id, code)
			ON CONFLICT (project_id, code) DO NOTHING RETURNING voucher_id)
		INSERT INTO vouchers (project_id, id, code, campaign_id, type, attrs, category, category_id, active, redemption_quantity, created_at)
			SELECT $1, x.id, x.code, x.campaign_id, x.type, x.attrs::JSONB, x.category, x.category_id, x.active, x.quantity, $10
			FROM unnest($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[], $11::TEXT[], $8::BOOL[], $9::INT8[])
				AS x(id, code, campaign_id, type, attrs, category, category_id, active, quantity)
			WHERE x.id IN (SELECT voucher_id FROM reg)
		RETURNING id`, projectID, vids, codes, camps, types, attrs, cats, active, quantity, vs[0].CreatedAt, catIDs)
	if err != nil {
		return nil, err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, id := range got {
		made[id] = true
	}
	// Gift cards open with their amounts: one statement per amount.
	b := &pgx.Batch{}
	byAmount := map[int64][]string{}
	campOf := map[int64]string{}
	details := map[int64][]byte{}
	for _, v := range vs {
		if g := v.Attrs.Gift; made[v.ID] && g != nil && g.Amount > 0 {
			byAmount[g.Amount] = append(byAmount[g.Amount], v.ID)
			if v.CampaignID != nil {
				campOf[g.Amount] = *v.CampaignID
			}
			details[g.Amount] = openingDetails(v)
		}
	}
	for amount, idsOf := range byAmount {
		loyalty.QueueOpeningEntries(b, projectID, campOf[amount], idsOf, amount, details[amount], vs[0].CreatedAt)
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	}
	return made, nil
}

// startMetadata starts VOUCHERS.BULK_UPDATE (an array of {code, metadata})
// or VOUCHERS.METADATA_UPDATE ({codes, metadata}).
func (s *Service) startMetadata(jobType string) echo.HandlerFunc {
	return func(c echo.Context) error {
		b, err := readInput(c, false)
		if err != nil {
			return err
		}
		in := jobInput{}
		if jobType == JobBulkUpdate {
			var items []struct {
				Code     *string        `json:"code"`
				Metadata map[string]any `json:"metadata"`
			}
			if json.Unmarshal(b, &items) != nil || len(items) == 0 {
				return apierr.InvalidPayload("The body must be a JSON array of {code, metadata} objects.")
			}
			for i, it := range items {
				if it.Code == nil || *it.Code == "" || it.Metadata == nil {
					return apierr.InvalidPayload(fmt.Sprintf("Item %d: code and metadata (an object) are required.", i))
				}
				raw, _ := json.Marshal(it)
				in.Items = append(in.Items, raw)
			}
		} else {
			var body struct {
				Codes    []string       `json:"codes"`
				Metadata map[string]any `json:"metadata"`
			}
			if json.Unmarshal(b, &body) != nil || len(body.Codes) == 0 || body.Metadata == nil {
				return apierr.InvalidPayload("The body must be {codes: [voucher codes], metadata: {…}}.")
			}
			for _, code := range body.Codes {
				raw, _ := json.Marshal(map[string]any{"code": code})
				in.Items = append(in.Items, raw)
			}
			in.Metadata = body.Metadata
		}
		return s.startJob(c, jobType, in)
	}
}

// metadataJob sets the metadata properties given on each voucher named,
// chunk by chunk under the vouchers' row locks; a code that names no
// voucher is reported.
func (s *Service) metadataJob(ctx context.Context, job *async.Job) (any, error) {
	st, err := s.runJob(ctx, job, func(tx pgx.Tx, in *jobInput, next *importState, from, to int) error {
		now := s.now()
		b := &pgx.Batch{}
		for i := from; i < to; i++ {
			var it struct {
				Code     string         `json:"code"`
				Metadata map[string]any `json:"metadata"`
			}
			_ = json.Unmarshal(in.Items[i], &it)
			if it.Metadata == nil {
				it.Metadata = in.Metadata
			}
			v, err := getVoucher(ctx, tx, job.ProjectID, it.Code, true)
			if err != nil {
				next.fail(i+1, it.Code, "no voucher has this code")
				continue
			}
			if v.Attrs.Metadata == nil {
				v.Attrs.Metadata = map[string]any{}
			}
			for k, val := range it.Metadata {
				v.Attrs.Metadata[k] = val
			}
			a, err := json.Marshal(v.Attrs)
			if err != nil {
				return err
			}
			b.Queue(`UPDATE vouchers SET attrs = $3, updated_at = $4 WHERE project_id = $1 AND id = $2`, job.ProjectID, v.ID, a, now)
			next.DoneCount++
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, err
	}
	errs := make([]map[string]any, len(st.Failed))
	for i, f := range st.Failed {
		errs[i] = map[string]any{"key": "not_found", "message": "Resource not found", "details": f.Reason, "code": f.Code}
	}
	return map[string]any{"done_count": st.DoneCount, "failed_count": st.FailedCount, "errors": errs}, nil
}
