package events

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
)

// errorsList is the key of a bulk's refusals in its checkpoint and result.
const errorsList = "errors"

// refuse moves a bulk's checkpoint from st past event i (raw, of n), which
// ae refused, in one transaction that also records the customers the
// refusal concerns (async.Job.RecordFailure): listed by its index, it may
// quote a value asked for her (a metadata schema's), and a permanent
// deletion finds it by them once the job is done. The transaction reads
// the job's skips as a chunk does: an event that names a customer whose
// erasure is not finished (or that the erasure marked) is refused as
// async.ErasedItem instead, so that a refusal decided before the erasure
// is not written after it with her value.
func (s *Service) refuse(ctx context.Context, job *async.Job, st bulkState, from any, raw json.RawMessage, i int,
	ae *apierr.Error, n int) (bulkState, error) {
	var next bulkState
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		why, refs := ae, []string(nil)
		if ae.Details != async.ErasedItem {
			sk, err := job.Skips(ctx, tx, i, i+1)
			if err != nil {
				return err
			}
			if sk.Doc(i, raw) {
				why = apierr.InvalidPayload(async.ErasedItem)
			} else {
				refs = bulkCustomers(raw)
			}
		}
		next = st.refused(i, why)
		if err := job.Advance(ctx, tx, from, next, (i+1)*100/n); err != nil {
			return err
		}
		if len(refs) == 0 || len(st.Errors) >= maxReported {
			return nil
		}
		return job.RecordFailure(ctx, tx, errorsList, len(st.Errors), refs...)
	})
	return next, err
}

// bulkCustomers are the ids and source_ids by which an event of a bulk
// named customers (its customer, the referral's referrer), read loosely:
// an event refused for its customer object still names her.
func bulkCustomers(raw json.RawMessage) []string {
	type ref struct {
		ID       any `json:"id"`
		SourceID any `json:"source_id"`
	}
	var r struct {
		Customer *ref `json:"customer"`
		Referral *struct {
			ReferrerID any `json:"referrer_id"`
		} `json:"referral"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return nil
	}
	var vs []any
	if r.Customer != nil {
		vs = append(vs, r.Customer.ID, r.Customer.SourceID)
	}
	if r.Referral != nil {
		vs = append(vs, r.Referral.ReferrerID)
	}
	var out []string
	for _, v := range vs {
		if v, ok := v.(string); ok && v != "" {
			out = append(out, v)
		}
	}
	return out
}
