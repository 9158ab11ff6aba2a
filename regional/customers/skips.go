package customers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/regional/async"
)

// errErased is an item of a job that names a customer permanently deleted
// (async.Skips): reported failed, not applied, and without its source_id,
// which is hers.
var errErased = errors.New(async.ErasedItem)

// failedSource is the source_id a failed item is listed with: its own,
// none for an item of an erased customer.
func failedSource(p *Patch, err error) *string {
	if p == nil || errors.Is(err, errErased) {
		return nil
	}
	return p.SourceID
}

// bulkPatches reads the input of CUSTOMERS.BULK_UPDATE (an array of
// customer bodies, each with its source_id) or CUSTOMERS.METADATA_UPDATE
// ({source_ids, metadata}) as the patches it writes; a body that does not
// read is the request's 400, naming the item.
func bulkPatches(jobType string, b []byte) ([]*Patch, error) {
	ps, _, err := bulkItems(jobType, b, func(int) bool { return false })
	return ps, err
}

// bulkItems is bulkPatches for the job, with each item's text (what
// async.Skips.Doc reads): an item a permanent deletion redacted (erased)
// is not checked, as the redaction may have taken what the request
// required (its source_id), and its patch is nil.
func bulkItems(jobType string, b []byte, erased func(int) bool) ([]*Patch, [][]byte, error) {
	if jobType == JobMetadataUpdate {
		var body struct {
			SourceIDs []string       `json:"source_ids"`
			Metadata  map[string]any `json:"metadata"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			return nil, nil, apierr.InvalidPayload("The body must be an object: source_ids (an array of customer source ids) and metadata (an object).")
		}
		if len(body.SourceIDs) == 0 || body.Metadata == nil {
			return nil, nil, apierr.InvalidPayload("Properties source_ids (at least one customer's source_id) and metadata (an object) are required.")
		}
		ps, docs := make([]*Patch, len(body.SourceIDs)), make([][]byte, len(body.SourceIDs))
		for i, src := range body.SourceIDs {
			docs[i], _ = json.Marshal([]any{src, body.Metadata})
			if erased(i) {
				continue
			}
			if strings.TrimSpace(src) == "" {
				return nil, nil, apierr.InvalidPayload(fmt.Sprintf("source_ids[%d] is empty.", i))
			}
			ps[i] = MergeMetadata(src, body.Metadata)
			if _, err := applied(Attrs{}, ps[i]); err != nil {
				return nil, nil, err
			}
		}
		return ps, docs, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil || len(items) == 0 {
		return nil, nil, httpx.ArrayError(b, "customer objects, each with its source_id")
	}
	ps, docs := make([]*Patch, len(items)), make([][]byte, len(items))
	for i, raw := range items {
		docs[i] = raw
		if erased(i) {
			continue
		}
		var p Patch
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, nil, apierr.InvalidPayload(fmt.Sprintf("Item %d is not a customer object: %s", i, Refusal(err)))
		}
		if p.SourceID == nil || strings.TrimSpace(*p.SourceID) == "" {
			return nil, nil, apierr.InvalidPayload(fmt.Sprintf("Item %d: property source_id is required: the customer to update or create.", i))
		}
		// An id in the item would name another customer than its source_id.
		p.ID = nil
		if _, err := applied(Attrs{}, &p); err != nil {
			return nil, nil, apierr.InvalidPayload(fmt.Sprintf("Item %d: %s", i, Refusal(err)))
		}
		ps[i] = &p
	}
	return ps, docs, nil
}

// bulkInput reads a bulk job's input as its patches and their texts. The
// items the erasure marked are read after the input, so that an input
// read redacted is read with its marks.
func (s *Service) bulkInput(ctx context.Context, job *async.Job, jobType string) ([]*Patch, [][]byte, error) {
	in, err := job.Input(ctx)
	if err != nil {
		return nil, nil, err
	}
	sk, err := job.Skips(ctx, s.pool, 0, math.MaxInt32)
	if err != nil {
		return nil, nil, err
	}
	return bulkItems(jobType, in, sk.Marked)
}

// upsertSkipping is UpsertMany for the items [from, from+len(ps)) of job,
// whose texts are docs: an item that names a customer permanently deleted
// or being erased (async.Skips, read in tx) is errErased, not written.
func (s *Service) upsertSkipping(ctx context.Context, tx pgx.Tx, job *async.Job, ps []*Patch, docs [][]byte, from int) ([]error, error) {
	sk, err := job.Skips(ctx, tx, from, from+len(ps))
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(ps))
	var write []*Patch
	var at []int
	for i, p := range ps {
		if p == nil || sk.Doc(from+i, docs[i]) {
			errs[i] = errErased
			continue
		}
		write, at = append(write, p), append(at, i)
	}
	werrs, err := s.UpsertMany(ctx, tx, job.ProjectID, write)
	if err != nil {
		return nil, err
	}
	for k, i := range at {
		errs[i] = werrs[k]
	}
	return errs, nil
}

// erasedIDs are those of ids not in found that name customers permanently
// deleted (read only when one is missing).
func erasedIDs(ctx context.Context, q db.Querier, projectID string, ids []string, found map[string]*Customer) (map[string]bool, error) {
	var missing []string
	for _, id := range ids {
		if found[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT customer_id FROM customer_erasures WHERE project_id = $1 AND customer_id = ANY($2)`, projectID, missing)
	if err != nil {
		return nil, err
	}
	erased, err := pgx.CollectRows(rows, pgx.RowTo[string])
	out := map[string]bool{}
	for _, id := range erased {
		out[id] = true
	}
	return out, err
}

// missing is the refusal of a write that names, by id, no customer: one
// that says so of a customer permanently deleted (erased), whose id is
// not used again.
func missing(id string, erased map[string]bool) error {
	e := apierr.NotFound("customer", id)
	if !erased[id] {
		return e
	}
	e.Message = "Customer deleted"
	e.Details = fmt.Sprintf("The customer %s was permanently deleted; its id is not used again.", id)
	return e
}
