package loyalty

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// The program's API for the packages built on it (regional/redemptions):
// the card lock, the ledger's one write path and the rules they price by.

// LockedCard is a card and its live campaign read under the card's lock.
type LockedCard = lockedCard

// Bucket is points on a card that expire together.
type Bucket = bucket

// Kinds of a change of points (LedgerWrite.Add and Take).
const (
	Earned     = earned
	Subtracted = subtracted
	Redeemed   = redeemed
	Refunded   = refunded
)

// PointsKind is what a change of a card's points is.
type PointsKind = pointsKind

// LedgerWrite is the one write path of points (see ledgerWrite).
type LedgerWrite struct{ l *ledgerWrite }

// LedgerWrite starts the writes of points of a transaction onto b.
func (s *Service) LedgerWrite(projectID string, b *pgx.Batch, now time.Time) LedgerWrite {
	return LedgerWrite{s.ledgerWrite(projectID, b, now)}
}

// Add puts points on c's bucket for exp (earned or refunded).
func (w LedgerWrite) Add(c *Card, kind PointsKind, pts int64, exp *time.Time) {
	w.l.add(c, kind, pts, exp)
}

// Take removes points from c's buckets bs (subtracted or redeemed) and
// returns what is left of them.
func (w LedgerWrite) Take(c *Card, kind PointsKind, pts int64, bs []Bucket) ([]Bucket, error) {
	return w.l.take(c, kind, pts, bs)
}

// Record queues ledger entry t of c with its webhook and tier events.
func (w LedgerWrite) Record(ctx context.Context, t Transaction, c *Card, camp Campaign) error {
	return w.l.record(ctx, t, c, camp)
}

// Done queues the figures of every card the write touched and returns the batch.
func (w LedgerWrite) Done() *pgx.Batch { return w.l.done() }

// LockCard locks a card (and, with buckets, reads them) in one batch sent
// with send, also queuing the callers' reads of what the card leads to.
func (s *Service) LockCard(ctx context.Context, send func(*pgx.Batch) error, projectID, campaignID, memberID string,
	buckets *[]Bucket, also ...func(b *pgx.Batch, key string)) (LockedCard, error) {
	return s.lockCard(ctx, send, projectID, campaignID, memberID, buckets, also...)
}

// QueueLockCard queues the locking read of the card named by key into dst.
func (s *Service) QueueLockCard(b *pgx.Batch, projectID, campaignID, key string, dst *LockedCard) {
	queueLockCard(b, s.attrs, projectID, campaignID, key, dst)
}

// CardKeyed is the condition on loyalty_cards c that finds the card named by $2.
func CardKeyed(key string) string { return cardKeyed(key) }

// BalanceAfter is the balance object of a change of delta points on c.
func (c Card) BalanceAfter(delta int64) Balance { return c.balance(delta) }

// PointsExceeded is the error of a card whose balance is short of want.
func PointsExceeded(c Card, want int64) error { return pointsExceeded(c, want) }

// CheckText refuses text longer than the API stores.
func CheckText(name string, v *string) error { return checkText(name, v) }

// TierOf is the tier whose range holds balance, or nil.
func TierOf(tiers []Tier, balance int64) *Tier { return tierOf(tiers, balance) }

// RewardMapping is the tier's mapping of a reward's price.
func (t *Tier) RewardMapping(rewardID string) (Mapping, bool) { return t.rewardMapping(rewardID) }

// Apply maps points.
func (m Mapping) Apply(points int64) int64 { return m.apply(points) }

// AssignmentColumns are the columns ScanAssignment reads.
const AssignmentColumns = assignmentColumns

// ScanAssignment reads a row of AssignmentColumns.
func ScanAssignment(r pgx.Row) (Assignment, error) { return scanAssignment(r) }

// HolderOf is the holder of the card memberID names (of campaignID, when
// given): 404 when there is no such card.
func (s *Service) HolderOf(ctx context.Context, projectID, campaignID, memberID string) (*string, error) {
	c, _, err := s.card(ctx, s.pool, projectID, campaignID, memberID, false)
	return c.HolderID, err
}
