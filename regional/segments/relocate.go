package segments

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/locations"
)

// relocateTask is a step of the walk that follows a redrawn or deleted
// location: the location, and the last customer evaluated.
type relocateTask struct {
	LocationID string `json:"location_id"`
	After      string `json:"after"`
}

// relocate follows a location's change (locations.KindChanged) into the
// segments whose filters name it: a customer's membership was decided by
// the shape the location had at their last change, so every customer of
// the project is evaluated again, a chunk a task, each task queueing the
// next in its transaction (entries and exits raise their notices as a
// customer's change does). A project none of whose filter segments names
// the location reads no customer.
func (s *Service) relocate(ctx context.Context, tx pgx.Tx, t async.Task) error {
	var p relocateTask
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return fmt.Errorf("segments: task %s: %w", t.ID, err)
	}
	segs, err := filterSegments(ctx, tx, t.ProjectID)
	if err != nil {
		return err
	}
	named := false
	for _, seg := range segs {
		c, err := compile(seg)
		if err != nil {
			return err
		}
		if slices.Contains(c.f.Locations(), p.LocationID) {
			named = true
			break
		}
	}
	if !named {
		return nil
	}
	ids, err := customers.ChunkIDs(ctx, tx, t.ProjectID, p.After, syncChunk)
	if err != nil || len(ids) == 0 {
		return err
	}
	if err := s.evaluate(ctx, tx, t.ProjectID, ids); err != nil {
		return err
	}
	_, err = async.Enqueue(ctx, tx, t.ProjectID, async.NewTask{Kind: locations.KindChanged,
		Payload: relocateTask{LocationID: p.LocationID, After: ids[len(ids)-1]}})
	return err
}
