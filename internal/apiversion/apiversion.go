// Package apiversion holds the interface's dated API versions, their
// changelog, and the transforms that adapt a route's requests and
// responses between the shapes handlers read and write (the newest) and
// those of an older version. Handlers never see a version: a project is
// pinned to one when it is created, a request may name another in
// X-Voucherify-API-Version, the router puts the effective one in the
// signed identity, and Registry.Middleware applies what differs.
package apiversion

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
)

// Header names a request's version and echoes the effective one.
const Header = "X-Voucherify-API-Version"

// Version is a dated version and what it changed.
type Version struct {
	Name       string   `json:"api_version"`
	Deprecated bool     `json:"deprecated"`
	Changes    []string `json:"changes"`
}

// Versions of the application API, oldest first.
var Versions = []Version{
	{Name: "v2017-04-05", Deprecated: true, Changes: []string{
		"Voucher and campaign lists answer {object: \"list\", total, <data_ref>: […]}.",
		"limit (1-100) and page are validated.",
		"GET voucher and GET campaign render validation rules.",
		"A campaign can be read by its name.",
	}},
	{Name: "v2017-04-20", Deprecated: true, Changes: []string{
		"Publishing a voucher answers a publication (id pub_…, object, created_at, customer_id, tracking_id, channel, metadata, voucher) instead of the voucher.",
	}},
	{Name: "v2018-08-01", Changes: []string{
		"The validation-rules model: promotion tier lists carry validation_rule_assignments instead of conditions.",
		"Promotion Tier, Validation Rule and Validation Rule Assignment objects changed.",
	}},
}

// WebhookVersions are the versions of webhook payloads (a project's
// webhook_version).
var WebhookVersions = []Version{
	{Name: "v2024-01-01", Changes: []string{"Distribution and project-settings webhooks in the v2024 shape."}},
}

// Latest is the newest API version: new projects are pinned to it.
var Latest = Versions[len(Versions)-1].Name

// LatestWebhook is the newest webhook version.
var LatestWebhook = WebhookVersions[len(WebhookVersions)-1].Name

// Known says whether v is an API version.
func Known(v string) bool { return known(Versions, v) }

// KnownWebhook says whether v is a webhook version.
func KnownWebhook(v string) bool { return known(WebhookVersions, v) }

func known(vs []Version, v string) bool {
	for _, x := range vs {
		if x.Name == v {
			return true
		}
	}
	return false
}

func names(vs []Version) string {
	n := make([]string, len(vs))
	for i, v := range vs {
		n[i] = v.Name
	}
	return strings.Join(n, ", ")
}

// Invalid is the 400 for an unknown API version named by where (the
// header, or a property), listing the supported ones.
func Invalid(where, v string) *apierr.Error {
	return apierr.New(http.StatusBadRequest, "invalid_api_version", "Invalid API version",
		fmt.Sprintf("%s names no API version: %q. Supported: %s.", where, v, names(Versions)))
}

// InvalidWebhook is the 400 for an unknown webhook version.
func InvalidWebhook(where, v string) *apierr.Error {
	return apierr.New(http.StatusBadRequest, "invalid_webhook_version", "Invalid webhook version",
		fmt.Sprintf("%s names no webhook version: %q. Supported: %s.", where, v, names(WebhookVersions)))
}

// Before says whether version a is older than b (dated names order as text).
func Before(a, b string) bool { return a < b }
