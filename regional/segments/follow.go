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
	segs, err := filterSegments(ctx, tx, t.ProjectID)
	if err != nil {
		return err
	}
	byID := map[string]compiled{}
	for _, seg := range segs {
		c, err := compile(seg)
		if err != nil {
			return err
		}
		byID[seg.ID] = c
	}
	have, err := membersOf(ctx, tx, t.ProjectID, p.Customers)
	if err != nil {
		return err
	}
	if len(segs) == 0 && len(have) == 0 {
		// No filter to evaluate, no membership to end: an import into a
		// project without filter segments reads none of its customers.
		return nil
	}
	found, err := customers.Many(ctx, tx, t.ProjectID, p.Customers)
	if err != nil {
		return err
	}
	custs := map[string]customers.Customer{}
	for _, c := range found {
		custs[c.ID] = c
	}
	now := s.clock.Now()
	var entered, left []change
	for _, id := range p.Customers {
		c, exists := custs[id]
		for _, seg := range segs {
			want := exists && byID[seg.ID].f.Match(c, now, customers.Targets)
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
	queueChanges(b, t.ProjectID, entered, left)
	for _, w := range []struct {
		typ string
		cs  []change
	}{{Entered, entered}, {Left, left}} {
		for _, ch := range w.cs {
			seg, ok := byID[ch.segment]
			if !ok || seg.Type != AutoUpdate {
				continue
			}
			var cust any = map[string]any{"id": ch.customer, "object": "customer"} // deleted
			c, ok := custs[ch.customer]
			if ok {
				cust = c.View()
			}
			if ok && w.typ == Entered {
				if _, err := async.Queue(ctx, b, t.ProjectID, async.NewTask{Kind: KindEntered, Payload: EnteredTask{
					ID: ids.New("sge_"), CustomerID: c.ID, SegmentID: seg.ID, Segment: seg.Name, At: now,
				}}); err != nil {
					return err
				}
			}
			if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: t.ProjectID, Type: w.typ, Entity: ch.customer,
				Object: map[string]any{"customer": cust, "segment": seg.simple()}}); err != nil {
				return err
			}
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
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
			args := []any{job.ProjectID, st.After, end}
			arg := func(v any) string {
				args = append(args, v)
				return fmt.Sprintf("$%d", len(args))
			}
			where := c.f.Where(arg, s.clock.Now(), customers.Targets)
			added, err := insertMatching(ctx, tx, customers.Matching(where), arg(seg.ID), args)
			if err != nil {
				return err
			}
			next = syncState{After: end, Read: st.Read + n, Members: st.Members + added, Total: max(st.Total, st.Read+n)}
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
