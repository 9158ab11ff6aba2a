package loyalty

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/tiers"
)

// The program's API for the packages built on it (regional/earning,
// regional/redemptions, regional/tiers), besides the card lock (LockCard)
// and the ledger's one write path (LedgerWrite) in ledger.go.

// Earning is what the program's kind asks of earning (regional/earning),
// which is built on it: given to NewKind, which app.go builds after both.
type Earning interface {
	// QueueDropOfCards queues the deletion of what earning keeps of cards
	// that are being deleted, in the transaction that deletes them.
	QueueDropOfCards(b *pgx.Batch, projectID string, cardIDs []string)
	// DropOfCampaign deletes what earning keeps of a deleted campaign.
	DropOfCampaign(ctx context.Context, q db.Querier, projectID, campaignID string) error
}

// CampaignID is the id of the live campaign idOrName names, or its 404
// (tiers.Program).
func (s *Service) CampaignID(ctx context.Context, q db.Querier, projectID, idOrName string) (string, error) {
	c, err := s.Campaign(ctx, q, projectID, idOrName)
	return c.ID, err
}

// CardBalance is the campaign and balance of the card memberID names, or
// its 404 (tiers.Program).
func (s *Service) CardBalance(ctx context.Context, q db.Querier, projectID, memberID string) (string, int64, error) {
	c, _, err := s.card(ctx, q, CardRef{Project: projectID, Member: memberID}, false)
	return c.CampaignID, c.Balance, err
}

// Card reads the card ref names, of a live campaign (ref's, when it names
// one), or answers its 404.
func (s *Service) Card(ctx context.Context, q db.Querier, ref CardRef) (Card, Campaign, error) {
	return s.card(ctx, q, ref, false)
}

// CardsOf are the ids of the cards customerID holds in live campaigns, in
// id order, which is the order they are locked in.
func (s *Service) CardsOf(ctx context.Context, q db.Querier, projectID, customerID string) ([]string, error) {
	return db.Collect(func(r pgx.Row) (id string, err error) { return id, r.Scan(&id) })(q.Query(ctx, `SELECT c.id FROM loyalty_cards c`+campaigns.JoinLive("k", "c")+`
		WHERE c.project_id = $1 AND c.holder_id = $2 ORDER BY c.id`, projectID, customerID))
}

// NewCampaignPart describes a table whose rows belong to a campaign.
func NewCampaignPart[T any](table, columns, resource string, scan func(pgx.Row) (T, error)) CampaignPart[T] {
	return CampaignPart[T]{table: table, columns: columns, resource: resource, scan: scan}
}

// QueueLockCard queues the locking read of the card ref names into dst.
func (s *Service) QueueLockCard(b *pgx.Batch, ref CardRef, dst *LockedCard) {
	queueLockCard(b, s.attrs, ref, dst)
}

// QueueCard queues reading the card key names (its code, or else its id)
// with its live campaign, locked when lock is set, and, when buckets is
// not nil, its buckets with points (soonest-expiring first).
func (s *Service) QueueCard(b *pgx.Batch, projectID, key string, lock bool, dst *LockedCard, buckets *[]Bucket) {
	sql := readCardSQL(key, s.attrs.earnCol)
	if lock {
		sql = lockCardSQL(key, s.attrs.earnCol)
	}
	queueCard(b, s.attrs, sql, CardRef{Project: projectID, Member: key}, dst)
	if buckets != nil {
		queueBuckets(b, projectID, key, buckets)
	}
}

// HolderOf is the holder of the card ref names: 404 when there is no such
// card.
func (s *Service) HolderOf(ctx context.Context, ref CardRef) (*string, error) {
	c, _, err := s.card(ctx, s.pool, ref, false)
	return c.HolderID, err
}

// CardCodes says which of codes name loyalty cards, by code or by id.
func CardCodes(ctx context.Context, q db.Querier, projectID string, codes []string) (map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT code FROM loyalty_cards WHERE project_id = $1 AND code = ANY($2::TEXT[])
		UNION ALL SELECT id FROM loyalty_cards WHERE project_id = $1 AND id = ANY($2::TEXT[])`, projectID, codes)
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	out := map[string]bool{}
	for _, c := range found {
		out[c] = true
	}
	return out, err
}

// QueueCardsHeldBy queues into b the read of the cards a customer holds in live campaigns, with points to spend, newest
// first, at most limit, into out (qualifications' wallet); holderSQL names them as vouchers.QueueHeldBy's does.
func (s *Service) QueueCardsHeldBy(b *pgx.Batch, projectID, holderSQL string, holder any, limit int, out *[]LockedCard) {
	b.Queue(`SELECT `+cardColumnsC+`, `+campaignColumnsK+`, `+tiers.Column+`, `+s.attrs.earnCol+HeldCardsFrom(holderSQL)+`
		ORDER BY c.id DESC LIMIT $3`, projectID, holder, limit).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			c := LockedCard{Found: true}
			if err := scanLocked(rows, s.attrs, &c); err != nil {
				return err
			}
			*out = append(*out, c)
		}
		return rows.Err()
	})
}

// HeldCardsFrom is the FROM and WHERE of QueueCardsHeldBy's cards (c, of campaigns k).
func HeldCardsFrom(holderSQL string) string {
	return ` FROM loyalty_cards c` + campaigns.JoinLive("k", "c") + ` WHERE c.project_id = $1 AND c.holder_id = ` + holderSQL + ` AND c.balance > 0`
}

// HeldCardKey is the id and code of the card at names (the holder's
// first), read without a lock ("" when they hold none): where a
// transaction that locks it beside another card finds which to take first
// (docs/architecture.md, Lock order).
func HeldCardKey(ctx context.Context, q db.Querier, at campaigns.HolderRef) (id, code string, err error) {
	err = q.QueryRow(ctx, `SELECT c.id, c.code FROM loyalty_cards c WHERE c.project_id = $1 AND c.campaign_id = $2 AND c.holder_id = $3
		ORDER BY c.id LIMIT 1`, at.Project, at.Campaign, at.Customer).Scan(&id, &code)
	if errors.Is(err, db.ErrNotFound) {
		return "", "", nil
	}
	return id, code, err
}

// CardCodesOfIDs maps each of names that is the id of a card, and the code
// of none, to that card's code: the key a stacked redemption locks it by
// when a request names it by id (docs/architecture.md, Lock order).
func CardCodesOfIDs(ctx context.Context, q db.Querier, projectID string, names []string) (map[string]string, error) {
	return db.Map(q.Query(ctx, `SELECT w.id, w.code FROM loyalty_cards w WHERE w.project_id = $1 AND w.id = ANY($2::TEXT[])
		AND NOT EXISTS (SELECT 1 FROM loyalty_cards c WHERE c.project_id = $1 AND c.code = w.id)`, projectID, names))
}
