package clientapi

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
)

// The promotion engine's client-side twins: qualifications and validations
// for the customer (a bound token's, or the one named), redemptions only
// where the project enables client_redeem_enabled.
func (a *api) registerEngine(g *echo.Group) {
	g.POST("/qualifications", a.serve("/v1/qualifications", func(k *call) error { return k.bindField("customer") }))
	g.POST("/validations", a.serve("/v1/validations", func(k *call) error {
		if err := k.cardsNeedTheirHolder(); err != nil {
			return err
		}
		return k.bindField("customer")
	}))
	g.POST("/redemptions", a.serve("/v1/redemptions", func(k *call) error {
		if err := need(k.project.Settings.ClientRedeemEnabled, "client_redeem_enabled", "Redeeming"); err != nil {
			return err
		}
		if err := k.cardsNeedTheirHolder(); err != nil {
			return err
		}
		return k.bindField("customer")
	}))
}

// cardsNeedTheirHolder refuses a client-side request that pays with a
// loyalty card (a redeemable with a reward) without a customer-bound token:
// neither a card's code nor its holder's source_id is a secret, so from a
// browser only the holder's own token spends its points (the engine holds
// the bound customer to be the card's holder).
func (k *call) cardsNeedTheirHolder() error {
	if k.bound != "" || k.body == nil {
		return nil
	}
	var rs []struct {
		Reward json.RawMessage `json:"reward"`
	}
	if json.Unmarshal(k.body["redeemables"], &rs) != nil {
		return nil // the twin refuses it
	}
	for _, r := range rs {
		if !absent(r.Reward) {
			return apierr.New(http.StatusForbidden, "customer_token_required", "Customer-bound token required",
				"Paying with a loyalty card from the client side takes a token bound to the card's holder "+
					"(POST /v1/oauth/token with customer, from the merchant's server).")
		}
	}
	return nil
}
