package rewards

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
)

// CampaignReward is what a CAMPAIGN reward gives from another campaign:
// a new voucher of a DISCOUNT_COUPONS campaign, Balance credits on the
// member's gift card of a GIFT_VOUCHERS one, or Balance points on the
// member's card of another LOYALTY_PROGRAM.
type CampaignReward struct {
	ID      string `json:"id"`
	Balance *int64 `json:"balance"`
	Type    string `json:"type"`
}

// The campaign types a CAMPAIGN reward gives from.
const (
	DiscountCoupons = "DISCOUNT_COUPONS"
	GiftVouchers    = "GIFT_VOUCHERS"
	LoyaltyProgram  = "LOYALTY_PROGRAM"
)

type requestParams struct {
	Campaign *campaignRequest `json:"campaign"`
	Product  *Product         `json:"product"`
	Coin     *coinRequest     `json:"coin"`
}

type campaignRequest struct {
	ID      *string    `json:"id"`
	Balance flexNumber `json:"balance"`
}

// coinRequest is a COIN reward's ratios as sent: the reference's request
// schema types both as strings (the official SDKs send "10"), its reward
// as numbers; both are taken, and a reward reads back with numbers.
type coinRequest struct {
	ExchangeRatio flexNumber `json:"exchange_ratio"`
	PointsRatio   flexNumber `json:"points_ratio"`
}

// flexNumber is a JSON number or a string holding one; set says it was
// sent and not null.
type flexNumber struct {
	text string
	set  bool
}

func (f *flexNumber) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*f = flexNumber{}
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(strings.TrimSpace(s))
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("not a number")
	}
	*f = flexNumber{text: n.String(), set: true}
	return nil
}

func (f flexNumber) int() (int64, bool) {
	n, err := strconv.ParseInt(f.text, 10, 64)
	return n, f.set && err == nil
}

func (f flexNumber) float() (float64, bool) {
	n, err := strconv.ParseFloat(f.text, 64)
	return n, f.set && err == nil && !math.IsInf(n, 0) && !math.IsNaN(n)
}

// typeOf finds a campaign's id and type; an error is its 404.
type typeOf func(idOrName string) (id, typ string, err error)

// campaignTypes reads campaigns in q for the check of a CAMPAIGN reward.
func campaignTypes(ctx context.Context, q db.Querier, projectID string) typeOf {
	return func(idOrName string) (string, string, error) {
		id, typ, err := campaigns.TypeOf(ctx, q, projectID, idOrName)
		if errors.Is(err, db.ErrNotFound) {
			return "", "", apierr.NotFound("campaign", idOrName)
		}
		return id, typ, err
	}
}

func (p *requestParams) check(lookup typeOf) (string, Parameters, error) {
	set := 0
	for _, ok := range []bool{p.Campaign != nil, p.Product != nil, p.Coin != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return "", Parameters{}, apierr.InvalidPayload("parameters must hold exactly one of campaign (a CAMPAIGN reward), product (a MATERIAL reward) or coin (a COIN reward)")
	}
	switch {
	case p.Product != nil:
		if strings.TrimSpace(p.Product.ID) == "" || len(p.Product.ID) > 300 {
			return "", Parameters{}, apierr.InvalidPayload("parameters.product.id is required: the product handed over")
		}
		if p.Product.SKUID != nil && (*p.Product.SKUID == "" || len(*p.Product.SKUID) > 300) {
			return "", Parameters{}, apierr.InvalidPayload("parameters.product.sku_id must be a SKU id when given")
		}
		return Material, Parameters{Product: p.Product}, nil
	case p.Coin != nil:
		pr, ok := p.Coin.PointsRatio.int()
		if !ok || pr < 1 || pr > 1_000_000_000 {
			return "", Parameters{}, apierr.InvalidPayload("parameters.coin.points_ratio must be a whole number of points from 1 to 1000000000")
		}
		er, ok := p.Coin.ExchangeRatio.float()
		if !ok || !(er > 0) || er > 1e9 {
			return "", Parameters{}, apierr.InvalidPayload("parameters.coin.exchange_ratio must be a positive amount of the currency")
		}
		return Coin, Parameters{Coin: &CoinRatio{ExchangeRatio: er, PointsRatio: pr}}, nil
	}
	c := p.Campaign
	if c.ID == nil || strings.TrimSpace(*c.ID) == "" {
		return "", Parameters{}, apierr.InvalidPayload("parameters.campaign.id is required: the discount, gift or loyalty campaign the reward gives from")
	}
	id, typ, err := lookup(*c.ID)
	if err != nil {
		return "", Parameters{}, err
	}
	out := CampaignReward{ID: id, Type: typ}
	switch typ {
	case DiscountCoupons:
		if c.Balance.set {
			return "", Parameters{}, apierr.InvalidPayload("parameters.campaign.balance: a DISCOUNT_COUPONS reward gives a voucher, not a balance")
		}
	case GiftVouchers, LoyaltyProgram:
		n, ok := c.Balance.int()
		if !ok || n < 1 || n > 1_000_000_000 {
			what := "points added to the member's card in that loyalty program"
			if typ == GiftVouchers {
				what = "credits (in cents) added to the member's gift card of that campaign"
			}
			return "", Parameters{}, apierr.InvalidPayload("parameters.campaign.balance is required: the " + what + ", 1 to 1000000000")
		}
		out.Balance = &n
	default:
		return "", Parameters{}, apierr.New(http.StatusBadRequest, "invalid_payload", "Invalid payload",
			fmt.Sprintf("parameters.campaign.id: campaign %s is a %s; a CAMPAIGN reward gives from a DISCOUNT_COUPONS, GIFT_VOUCHERS or LOYALTY_PROGRAM campaign", *c.ID, typ))
	}
	return CampaignType, Parameters{Campaign: &out}, nil
}
