package async

import (
	"context"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async/concerns"
)

// RecordFailure records in tx, the transaction that lists it, that the
// job's failure at place at of its result's (and checkpoint's) list
// concerns the customers refs (ids or source_ids, as its item gave them):
// for a job that lists failures on its own (a bulk of events), where a
// Chunked job uses FailItemOf.
func (j *Job) RecordFailure(ctx context.Context, tx db.Querier, list string, at int, refs ...string) error {
	return concerns.Record(ctx, tx, concerns.List{ProjectID: j.ProjectID, ActionID: j.ActionID, Name: list},
		[]concerns.Failure{{At: at, Refs: refs}})
}
