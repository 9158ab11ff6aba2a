package bulk

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/vouchers"
)

// startImport checks the input (JSON array or CSV file) and the campaign,
// and starts the job: 202 with its async action.
func (s *Service) startImport(jobType string, csvFile bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, projectID := c.Request().Context(), httpx.ProjectID(c)
		in := jobInput{}
		if key := c.Param("campaignId"); key != "" {
			camp, err := s.vouchers.CampaignIn(ctx, s.pool, projectID, key)
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
			err = httpx.ArrayError(b, "voucher objects, each with a code")
		}
		if err != nil {
			return err
		}
		return s.startJob(c, jobType, in)
	}
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

// importJob writes the vouchers of an import, chunk by chunk.
func (s *Service) importJob(ctx context.Context, job *async.Job) (any, error) {
	seen := map[string]int{} // a code twice in the input: the later rows fail
	st, err := s.runJob(ctx, job, func(tx pgx.Tx, in *jobInput, next *importState, from, to int) error {
		var camp *vouchers.Campaign
		if in.CampaignID != "" {
			c, err := s.vouchers.CampaignShared(ctx, tx, job.ProjectID, in.CampaignID)
			if err != nil {
				return err
			}
			camp = &c
		}
		vs := make([]vouchers.Voucher, 0, to-from)
		rows := make([]int, 0, to-from)
		now := s.now()
		for i := from; i < to; i++ {
			v, err := importVoucher(in.Items[i], camp, now)
			code := v.Code
			if err == nil {
				if err = s.vouchers.CheckMetadata(ctx, job.ProjectID, v.Attrs.Metadata); err != nil {
					err = errors.New(apierr.From(err).Details)
				}
			}
			if err == nil {
				if first, ok := seen[code]; ok && first != i {
					err = fmt.Errorf("the code is on row %d already", first+1)
				}
			}
			if err != nil {
				next.Fail(importFailure{Row: i + 1, Code: code, Reason: err.Error()})
				continue
			}
			seen[code] = i
			vs, rows = append(vs, v), append(rows, i+1)
		}
		made, err := vouchers.InsertMany(ctx, tx, job.ProjectID, vs)
		if err != nil {
			return err
		}
		for k, v := range vs {
			if !made[v.ID] {
				next.Fail(importFailure{Row: rows[k], Code: v.Code, Reason: "the code is taken by another voucher or loyalty card of the project"})
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
	failed := st.Listed()
	return map[string]any{"message": fmt.Sprintf("%d vouchers imported, %d failed.", st.DoneCount, st.FailedCount),
		"done_count": st.DoneCount, "failed_count": st.FailedCount, "failed": failed}, nil
}

// importVoucher makes the voucher an item describes: standalone, or of
// the campaign (its template, with the item's own code and properties).
func importVoucher(raw json.RawMessage, camp *vouchers.Campaign, now time.Time) (vouchers.Voucher, error) {
	var probe struct {
		Code  *string `json:"code"`
		Error string  `json:"_error"`
	}
	if json.Unmarshal(raw, &probe) != nil {
		return vouchers.Voucher{}, errors.New("the item is not a voucher object")
	}
	if probe.Code == nil || strings.TrimSpace(*probe.Code) == "" || len(*probe.Code) > 250 {
		return vouchers.Voucher{}, errors.New("code is required: 1 to 250 characters")
	}
	code := *probe.Code
	if probe.Error != "" {
		return vouchers.Voucher{Code: code}, errors.New(probe.Error)
	}
	var r vouchers.Request
	if err := json.Unmarshal(raw, &r); err != nil {
		return vouchers.Voucher{Code: code}, fmt.Errorf("the voucher does not read: %v", err)
	}
	return vouchers.Imported(r, camp, code, now)
}
