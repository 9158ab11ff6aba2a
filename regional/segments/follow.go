package segments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/webhooks"
)

// KindCustomers is the task a customer write queues (Changed): evaluate
// its customers against the project's filter segments.
const KindCustomers = "segments.customers"

// JobSync is the async action that first evaluates a filter segment over
// every customer of its project.
const JobSync = "SEGMENT.SYNC"

// syncChunk is how many customers a chunk of JobSync reads: one INSERT …
// SELECT over that range of ids per transaction (the tests make it small,
// so that every first evaluation they run takes several chunks).
var syncChunk = 10000

// KindEntered is queued for every customer that enters an auto-update
// segment, in the transaction that records the entry: what loyalty
// programs' earning rules on customer.segment.entered earn by
// (regional/earning handles it).
const KindEntered = "segments.entered"

// EnteredTask is a customer's entry into an auto-update segment: its id
// (what an accrual is made once for) and when. It holds ids only, no
// personal data, which a permanent deletion would have to find in the
// outbox.
type EnteredTask struct {
	ID         string    `json:"id"`
	CustomerID string    `json:"customer_id"`
	SegmentID  string    `json:"segment_id"`
	Segment    string    `json:"segment_name"`
	At         time.Time `json:"at"`
}

// Webhook event types of membership (auto-update segments only).
const (
	Entered = "customer.segment.entered"
	Left    = "customer.segment.left"
)

type followTask struct {
	Customers []string `json:"customers"`
}

// Changed queues, in the write's transaction, the evaluation of the
// customers it created, updated or deleted (customers.Watcher).
func (s *Service) Changed(ctx context.Context, b *pgx.Batch, projectID string, ids []string) error {
	_, err := async.Queue(ctx, b, projectID, async.NewTask{Kind: KindCustomers, Payload: followTask{Customers: ids}})
	return err
}

// follow evaluates a write's customers against every filter segment of
// the project, as they are now: those that now match and were not in enter,
// those that no longer match leave (an auto-update segment raising its
// notices), and a deleted customer leaves every segment, static ones too.
func (s *Service) follow(ctx context.Context, tx pgx.Tx, t async.Task) error {
	var p followTask
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return fmt.Errorf("segments: task %s: %w", t.ID, err)
	}
	return s.evaluate(ctx, tx, t.ProjectID, p.Customers)
}

// evaluate is follow for the customers ids of projectID.
func (s *Service) evaluate(ctx context.Context, tx pgx.Tx, projectID string, customerIDs []string) error {
	segs, err := filterSegments(ctx, tx, projectID)
	if err != nil {
		return err
	}
	cs := make([]compiled, 0, len(segs))
	for _, seg := range segs {
		c, err := compile(seg)
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	if cs, err = s.bound(ctx, projectID, cs); err != nil {
		return err
	}
	byID := map[string]compiled{}
	for _, c := range cs {
		byID[c.ID] = c
	}
	have, err := membersOf(ctx, tx, projectID, customerIDs)
	if err != nil {
		return err
	}
	if len(segs) == 0 && len(have) == 0 {
		// No filter to evaluate, no membership to end: an import into a
		// project without filter segments reads none of its customers.
		return nil
	}
	found, err := customers.Many(ctx, tx, projectID, customerIDs)
	if err != nil {
		return err
	}
	ptrs := make([]*customers.Customer, len(found))
	for i := range found {
		ptrs[i] = &found[i]
	}
	if err := s.withCounts(ctx, tx, projectID, cs, ptrs); err != nil {
		return err
	}
	custs := map[string]customers.Customer{}
	for _, c := range found {
		custs[c.ID] = c
	}
	now := s.clock.Now()
	var entered, left []change
	for _, id := range customerIDs {
		c, exists := custs[id]
		for _, seg := range segs {
			want := exists && byID[seg.ID].f.Match(c, now, s.targets)
			switch in := have[id][seg.ID]; {
			case want && !in:
				entered = append(entered, change{id, seg.ID})
			case !want && in:
				left = append(left, change{id, seg.ID})
			}
			delete(have[id], seg.ID)
		}
		if !exists {
			for segID := range have[id] { // static ones
				left = append(left, change{id, segID})
			}
		}
	}
	b := &pgx.Batch{}
	queueChanges(b, projectID, entered, left)
	for _, w := range []struct {
		typ string
		cs  []change
	}{{Entered, entered}, {Left, left}} {
		for _, ch := range w.cs {
			seg, ok := byID[ch.segment]
			if !ok || seg.Type != AutoUpdate {
				continue
			}
			var c *customers.Customer // nil: deleted
			if found, ok := custs[ch.customer]; ok {
				c = &found
				if w.typ == Entered {
					if _, err := async.Queue(ctx, b, projectID, async.NewTask{Kind: KindEntered, Payload: EnteredTask{
						ID: ids.New("sge_"), CustomerID: c.ID, SegmentID: seg.ID, Segment: seg.Name, At: now,
					}}); err != nil {
						return err
					}
				}
			}
			if err := s.queueNotice(ctx, b, projectID, w.typ, seg.Segment, ch.customer, c); err != nil {
				return err
			}
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// queueNotice queues on b the webhook notice of a customer's entry into
// or exit from an auto-update segment, with the customer (c, or its bare
// id when deleted) and the segment.
func (s *Service) queueNotice(ctx context.Context, b *pgx.Batch, projectID, typ string, seg Segment, customerID string,
	c *customers.Customer) error {
	var cust any = map[string]any{"id": customerID, "object": "customer"}
	if c != nil {
		cust = c.View()
	}
	return s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: typ, Entity: customerID,
		Object: map[string]any{"customer": cust, "segment": seg.simple()}})
}

type syncParams struct {
	SegmentID string `json:"segment_id"`
}

// syncState is the job's checkpoint: the customers read so far (by id),
// how many, and how many joined.
type syncState struct {
	After   string `json:"after"`
	Read    int    `json:"read"`
	Members int64  `json:"members"`
	Total   int    `json:"total"`
}

// syncJob evaluates a new filter segment over every customer of its
// project, a chunk of customer ids a transaction (one INSERT … SELECT with
// the filter's SQL), each committed with the job's checkpoint; run again,
// it goes on after the last committed chunk. Customers written meanwhile
// are evaluated by their own tasks too; both insert idempotently.
func (s *Service) syncJob(ctx context.Context, job *async.Job) (any, error) {
	var p syncParams
	if err := json.Unmarshal(job.Params, &p); err != nil {
		return nil, err
	}
	var st syncState
	if _, err := job.Resume(ctx, &st); err != nil {
		return nil, err
	}
	if st.Total == 0 {
		n, err := customers.Count(ctx, s.pool, job.ProjectID)
		if err != nil {
			return nil, err
		}
		st.Total = n
	}
	for {
		var next syncState
		var n int
		gone := false
		err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
			seg, err := get(ctx, tx, job.ProjectID, p.SegmentID)
			if errors.Is(err, db.ErrNotFound) {
				gone = true // deleted while it was evaluated
				return nil
			}
			if err != nil {
				return err
			}
			c, err := compile(seg)
			if err != nil {
				return err
			}
			var end string
			if end, n, err = customers.ChunkEnd(ctx, tx, job.ProjectID, st.After, syncChunk); err != nil || n == 0 {
				return err
			}
			added, err := s.syncChunk(ctx, tx, job.ProjectID, c, st.After, end)
			if err != nil {
				return err
			}
			next = syncState{After: end, Read: st.Read + n, Members: st.Members + int64(added), Total: max(st.Total, st.Read+n)}
			return job.Checkpoint(ctx, tx, next, next.Read*100/max(1, next.Total))
		})
		if err != nil {
			return nil, err
		}
		if gone || n == 0 {
			break
		}
		st = next
	}
	return map[string]any{"segment_id": p.SegmentID, "customers_evaluated": st.Read, "members_added": st.Members}, nil
}

// syncChunk makes members of the customers with ids in (after, end] that
// c's filter holds, and answers how many joined. An exact filter is one
// INSERT … SELECT; one with $in_location selects by its bounding boxes and
// keeps, read whole, the customers whose geopoint its shapes hold. An
// auto-update segment's entries raise their notices in the same
// transaction, as a customer's change does: the customers already there
// when it is made enter it too, each once (a member the customer's own
// task added first is not inserted again, and not notified again). The
// customers are read for their notices only when a webhook listens, and
// no earning task is queued: a rule on customer.segment.entered names the
// segment only once it exists, and a million entries would otherwise be a
// million earning tasks that almost always find no rule (docs/architecture.md,
// Segments).
func (s *Service) syncChunk(ctx context.Context, tx pgx.Tx, projectID string, c compiled, after, end string) (int, error) {
	cs, err := s.bound(ctx, projectID, []compiled{c})
	if err != nil {
		return 0, err
	}
	c = cs[0]
	now := s.clock.Now()
	args := []any{projectID, after, end}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	sub := customers.Matching(c.f.Where(arg, now, s.targets))
	var added []string
	found := map[string]customers.Customer{}
	if c.f.Exact() {
		if added, err = insertMatching(ctx, tx, sub, arg(c.ID), args); err != nil {
			return 0, err
		}
	} else {
		candidates, err := matchingIDs(ctx, tx, sub, args)
		if err != nil {
			return 0, err
		}
		custs, err := customers.Many(ctx, tx, projectID, candidates)
		if err != nil {
			return 0, err
		}
		ptrs := make([]*customers.Customer, len(custs))
		for i := range custs {
			ptrs[i] = &custs[i]
		}
		if err := s.withCounts(ctx, tx, projectID, []compiled{c}, ptrs); err != nil {
			return 0, err
		}
		var keep []string
		for _, cu := range custs {
			if c.f.Match(cu, now, s.targets) {
				keep = append(keep, cu.ID)
				found[cu.ID] = cu
			}
		}
		if added, err = addMembers(ctx, tx, projectID, c.ID, keep); err != nil {
			return 0, err
		}
	}
	if c.Type != AutoUpdate || len(added) == 0 || !s.notify.Listens(ctx, projectID, Entered) {
		return len(added), nil
	}
	if c.f.Exact() {
		custs, err := customers.Many(ctx, tx, projectID, added)
		if err != nil {
			return 0, err
		}
		for _, cu := range custs {
			found[cu.ID] = cu
		}
	}
	b := &pgx.Batch{}
	for _, id := range added {
		cu, ok := found[id]
		if !ok {
			continue // deleted since: its own task takes it out again
		}
		if err := s.queueNotice(ctx, b, projectID, Entered, c.Segment, id, &cu); err != nil {
			return 0, err
		}
	}
	return len(added), tx.SendBatch(ctx, b).Close()
}
