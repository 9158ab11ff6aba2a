package loyalty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/tallyhq/tally/internal/codes"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/webhooks"
)

// JoinIn gives at.Customer a card of at.Campaign in tx, as Join does
// without a named card: the one they hold, a free one, or (AUTO_UPDATE) a
// new one. Packages that reward customers with points (regional/referrals)
// join them to the program first.
func (s *Service) JoinIn(ctx context.Context, tx pgx.Tx, at campaigns.HolderRef) (Card, Campaign, error) {
	camp, err := s.Campaign(ctx, tx, at.Project, at.Campaign)
	if err != nil {
		return Card{}, Campaign{}, err
	}
	card, err := s.Join(ctx, tx, at.Project, camp, at.Customer, nil, nil)
	return card, camp, err
}

// Join gives custID a card of camp in tx: the one they hold, the one
// voucher names, a free one or a new one (AUTO_UPDATE), with metadata.
func (s *Service) Join(ctx context.Context, tx pgx.Tx, projectID string, camp Campaign, custID string, voucher *string, metadata map[string]any) (Card, error) {
	existing, err := scanCard(tx.QueryRow(ctx, `SELECT `+cardColumns+` FROM loyalty_cards
		WHERE project_id = $1 AND holder_id = $2 AND campaign_id = $3 LIMIT 1`, projectID, custID, camp.ID))
	if err == nil {
		return existing, nil
	}
	if !errors.Is(err, db.ErrNotFound) {
		return Card{}, err
	}
	var card Card
	switch {
	case voucher != nil:
		card, err = getCard(ctx, tx, projectID, *voucher, true)
		if errors.Is(err, db.ErrNotFound) || (err == nil && card.CampaignID != camp.ID) {
			return Card{}, notFoundCard(*voucher)
		}
		if err != nil {
			return Card{}, err
		}
		if card.HolderID != nil {
			return Card{}, apierr.New(http.StatusBadRequest, "voucher_already_published", "Voucher already published",
				fmt.Sprintf("Card %s already belongs to another customer.", card.Code))
		}
	default:
		card, err = scanCard(tx.QueryRow(ctx, `SELECT `+cardColumns+` FROM loyalty_cards
			WHERE project_id = $1 AND holder_id IS NULL AND campaign_id = $2 LIMIT 1 FOR UPDATE SKIP LOCKED`, projectID, camp.ID))
		if errors.Is(err, db.ErrNotFound) {
			if camp.Attrs.Type != "AUTO_UPDATE" {
				return Card{}, apierr.New(http.StatusBadRequest, "no_voucher_suitable_for_publication", "Couldn't find any voucher suitable for publication",
					fmt.Sprintf("Campaign %s has no free cards and is STATIC.", camp.ID))
			}
			gen, gerr := codes.New(camp.Attrs.Voucher.CodeConfig)
			if gerr != nil {
				return Card{}, gerr
			}
			if _, err = s.MakeCards(ctx, tx, projectID, camp, gen, 1, s.Now()); err != nil {
				return Card{}, err
			}
			if err = campaigns.AddVouchersCount(ctx, tx, projectID, camp.ID, 1); err != nil {
				return Card{}, err
			}
			card, err = scanCard(tx.QueryRow(ctx, `SELECT `+cardColumns+` FROM loyalty_cards
				WHERE project_id = $1 AND holder_id IS NULL AND campaign_id = $2 LIMIT 1 FOR UPDATE`, projectID, camp.ID))
		}
		if err != nil {
			return Card{}, err
		}
	}
	now := s.Now()
	card.HolderID, card.UpdatedAt = &custID, &now
	if metadata != nil {
		card.Metadata = metadata
	}
	meta, _ := json.Marshal(card.Metadata)
	// The holder and the activity's publication in one round trip.
	b := &pgx.Batch{}
	b.Queue(`UPDATE loyalty_cards SET holder_id = $3, metadata = $4, updated_at = $5 WHERE project_id = $1 AND id = $2`,
		projectID, card.ID, custID, meta, now)
	queueCardEvent(b, projectID, &card, EventPublishedActivity, map[string]any{}, now)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return Card{}, err
	}
	return card, s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventVoucherPublished, Entity: card.ID,
		Object: card.View(camp)})
}

// GetMember returns the card ref names.
func (s *Service) GetMember(ctx context.Context, ref CardRef) (CardView, error) {
	c, camp, err := s.card(ctx, s.pool, ref, false)
	if err != nil {
		return CardView{}, err
	}
	return c.View(camp), nil
}

// MemberIn reads a card by code or id in q (the caller's transaction) with
// its live campaign, as GetMember does.
func (s *Service) MemberIn(ctx context.Context, q db.Querier, projectID, memberID string) (CardView, error) {
	c, camp, err := s.card(ctx, q, CardRef{Project: projectID, Member: memberID}, false)
	if err != nil {
		return CardView{}, err
	}
	return c.View(camp), nil
}

// QueueCardsByID queues onto b the read of the cards with ids (those of
// deleted campaigns included, as a publication still names them); into
// runs for each found.
func QueueCardsByID(b *pgx.Batch, projectID string, ids []string, into func(Card)) {
	db.QueueEach(b, scanCard, into, `SELECT `+cardColumns+` FROM loyalty_cards WHERE project_id = $1 AND id = ANY($2::TEXT[])`,
		projectID, ids)
}

// MemberFilter narrows a campaign's members as the reference's list does:
// by holder, code, ids, and creation and update times (campaigns.VoucherFilter,
// which the vouchers list reads too).
type MemberFilter = campaigns.VoucherFilter

// ListMembers returns a page of a campaign's cards.
func (s *Service) ListMembers(ctx context.Context, projectID, campaignID string, f MemberFilter, lq listq.Query) ([]CardView, int, bool, string, error) {
	camp, err := s.Campaign(ctx, s.pool, projectID, campaignID)
	if err != nil {
		return nil, 0, false, "", err
	}
	cs, total, err := listCards(ctx, s.pool, projectID, camp.ID, f, lq)
	if err != nil {
		return nil, 0, false, "", err
	}
	out, more, next := listq.PageOf(cs, lq.Limit, func(c Card) string { return c.ID }, func(c Card) CardView { return c.View(camp) })
	return out, total, more, next, nil
}
