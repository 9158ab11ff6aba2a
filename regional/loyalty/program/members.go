package program

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
)

// MemberRequest is the body of POST /v1/loyalties/{campaignId}/members.
type MemberRequest struct {
	Voucher  *string         `json:"voucher"`
	SourceID *string         `json:"source_id"`
	Customer json.RawMessage `json:"customer"`
	Metadata map[string]any  `json:"metadata"`
	Channel  *string         `json:"channel"`
}

// AddMember gives a customer a card of the campaign: the named one, a free
// one, or (AUTO_UPDATE campaigns) a new one. A customer already holding a
// card of the campaign gets that card back: a program is joined once.
func (s *Service) AddMember(ctx context.Context, projectID, campaignID string, r MemberRequest) (_ loyalty.CardView, err error) {
	ctx, span := tracer.Start(ctx, "loyalty.AddMember")
	defer telemetry.End(span, &err)
	if len(r.Customer) == 0 || string(r.Customer) == "null" {
		return loyalty.CardView{}, apierr.InvalidPayload("customer is required: a customer id, or an object with id, source_id or the customer's data")
	}
	// A card is a voucher: the metadata it is given is the voucher's.
	if r.Metadata != nil {
		if err := s.camps.CheckMetadata(ctx, projectID, "voucher", r.Metadata); err != nil {
			return loyalty.CardView{}, err
		}
	}
	var custRef string
	var patch *customers.Patch
	if err := json.Unmarshal(r.Customer, &custRef); err != nil {
		patch = &customers.Patch{}
		if err := json.Unmarshal(r.Customer, patch); err != nil {
			return loyalty.CardView{}, apierr.InvalidPayload("customer must be a customer id or a customer object: " + err.Error())
		}
	}
	var card loyalty.Card
	var camp loyalty.Campaign
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if camp, err = s.cards.Campaign(ctx, tx, projectID, campaignID); err != nil {
			return err
		}
		var custID string
		if patch != nil {
			cust, _, err := s.customers.UpsertIn(ctx, tx, projectID, patch)
			if err != nil {
				return err
			}
			custID = cust.ID
		} else {
			cust, err := s.customers.GetIn(ctx, tx, projectID, custRef)
			if err != nil {
				return err
			}
			custID = cust.ID
		}
		card, err = s.cards.Join(ctx, tx, projectID, camp, custID, r.Voucher, r.Metadata)
		return err
	})
	if err != nil {
		return loyalty.CardView{}, err
	}
	return card.View(camp), nil
}
