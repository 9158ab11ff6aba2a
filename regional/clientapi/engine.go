package clientapi

import "github.com/labstack/echo/v4"

// The promotion engine's client-side twins: qualifications and validations
// for the customer (a bound token's, or the one named), redemptions only
// where the project enables client_redeem_enabled.
func (a *api) registerEngine(g *echo.Group) {
	g.POST("/qualifications", a.serve("/v1/qualifications", func(k *call) error { return k.bindField("customer") }))
	g.POST("/validations", a.serve("/v1/validations", func(k *call) error { return k.bindField("customer") }))
	g.POST("/redemptions", a.serve("/v1/redemptions", func(k *call) error {
		if err := need(k.project.Settings.ClientRedeemEnabled, "client_redeem_enabled", "Redeeming"); err != nil {
			return err
		}
		return k.bindField("customer")
	}))
}
