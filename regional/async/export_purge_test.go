package async

import (
	"context"
	"time"

	"github.com/tallyhq/tally/internal/db"
)

// PurgeDone deletes the tasks finished more than keep ago, batch at a
// time, as the worker's hourly purge does.
func PurgeDone(ctx context.Context, q db.Querier, keep time.Duration, batch int) (db.Swept, error) {
	return purgeDone(ctx, q, keep, batch)
}
