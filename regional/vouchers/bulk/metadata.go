package bulk

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/vouchers"
)

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
				return httpx.ArrayError(b, "{code, metadata} objects")
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

const notFoundReason = "no voucher has this code"

// metadataJob sets the metadata properties given on each voucher named,
// chunk by chunk under the vouchers' row locks; a code that names no
// voucher is reported. With report (VOUCHERS.BULK_UPDATE, whose result
// in the reference links one), each item's outcome goes to the job's
// report too.
func (s *Service) metadataJob(report bool) async.JobFunc {
	return func(ctx context.Context, job *async.Job) (any, error) {
		return s.runMetadata(ctx, job, report)
	}
}

func (s *Service) runMetadata(ctx context.Context, job *async.Job, report bool) (any, error) {
	st, err := s.runJob(ctx, job, func(tx pgx.Tx, in *jobInput, next *importState, from, to int) error {
		now := s.now()
		b := &pgx.Batch{}
		var lines [][]string
		fail := func(f importFailure) {
			next.Fail(f)
			lines = append(lines, async.ReportLine(f.Row, f.Code, f.Reason))
		}
		for i := from; i < to; i++ {
			var it struct {
				Code     string         `json:"code"`
				Metadata map[string]any `json:"metadata"`
			}
			_ = json.Unmarshal(in.Items[i], &it)
			if it.Metadata == nil {
				it.Metadata = in.Metadata
			}
			v, err := vouchers.Locked(ctx, tx, job.ProjectID, it.Code)
			if err != nil {
				fail(importFailure{Row: i + 1, Code: it.Code, Reason: notFoundReason})
				continue
			}
			if v.Attrs.Metadata == nil {
				v.Attrs.Metadata = map[string]any{}
			}
			for k, val := range it.Metadata {
				v.Attrs.Metadata[k] = val
			}
			// The merged result, as a single update's.
			if err := s.vouchers.CheckMetadata(ctx, job.ProjectID, v.Attrs.Metadata); err != nil {
				fail(importFailure{Row: i + 1, Code: it.Code, Reason: apierr.From(err).Details})
				continue
			}
			if err := vouchers.QueueAttrs(b, job.ProjectID, v, now); err != nil {
				return err
			}
			next.DoneCount++
			lines = append(lines, async.ReportLine(i+1, it.Code, ""))
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil || !report {
			return err
		}
		return next.Report(ctx, tx, s.reports, job, "code", lines)
	})
	if err != nil {
		return nil, err
	}
	errs := make([]map[string]any, len(st.Failed))
	for i, f := range st.Failed {
		errs[i] = map[string]any{"key": "not_found", "message": "Resource not found", "details": f.Reason, "code": f.Code}
		if f.Reason != notFoundReason {
			errs[i]["key"], errs[i]["message"] = "metadata_validation_failed", "Metadata validation failed"
		}
	}
	res := map[string]any{"done_count": st.DoneCount, "failed_count": st.FailedCount, "errors": errs}
	if !report {
		return res, nil
	}
	return res, st.FinishReport(ctx, s.reports, job, res)
}
