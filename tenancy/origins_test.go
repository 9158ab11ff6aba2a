package tenancy_test

import (
	"testing"

	"github.com/tallyhq/tally/tenancy"
)

// Exact origins, subdomain patterns, default ports and bare hosts (https),
// and * for any origin; everything else refused.
func TestTrustedDomainsMatchOrigins(t *testing.T) {
	o := tenancy.CompileOrigins([]string{"https://shop.example", "https://*.brand.example", "http://localhost:3000",
		"app.example:8443", "https://[::1]:9000"})
	for origin, want := range map[string]bool{
		"https://shop.example":          true,
		"HTTPS://Shop.Example":          true,
		"https://shop.example:443":      true,
		"shop.example":                  true, // the client SDK in Node sends a bare host
		"http://shop.example":           false,
		"https://shop.example:8443":     false,
		"https://www.shop.example":      false,
		"https://a.brand.example":       true,
		"https://a.b.brand.example":     true,
		"https://brand.example":         false,
		"https://evilbrand.example":     false,
		"https://a.brand.example.evil":  false,
		"http://a.brand.example":        false,
		"http://localhost:3000":         true,
		"http://localhost":              false,
		"https://app.example:8443":      true,
		"https://[::1]:9000":            true,
		"null":                          false,
		"":                              false,
		"https://shop.example/":         false,
		"https://user@shop.example":     false,
		"https://*.brand.example":       false,
		"javascript://shop.example":     false,
		"https://shop.example:99999":    false,
		"https://shop.example:+443":     false,
		"https://shop..example":         false,
		"https://shop.example:443:443":  false,
		"https://\u0441hop.example":     false,
		"https://shop.example\r\nX: y":  false,
		"https://xn--hop-8cd.example":   false,
		"https://sub.shop.example:3000": false,
	} {
		if got := o.Allows(origin); got != want {
			t.Errorf("Allows(%q) = %v, want %v", origin, got, want)
		}
	}
	if !tenancy.CompileOrigins([]string{"*"}).Allows("https://anything.example") || !tenancy.CompileOrigins([]string{"*"}).Allows("") {
		t.Error("* trusts every origin, and requests without one")
	}
	if (tenancy.Origins{}).Allows("https://shop.example") || tenancy.CompileOrigins(nil).Allows("https://shop.example") {
		t.Error("no entries trust nothing")
	}
	for entry, ok := range map[string]bool{"*": true, "https://shop.example": true, "https://*.shop.example": true,
		"shop.example": true, "http://localhost:3000": true, "https://shop.example/": false, "https://*": false,
		"ftp://shop.example": false, "https://sh op.example": false, "**.shop.example": false, "": false,
		"https://a.*.shop.example": false} {
		if err := tenancy.CheckTrustedDomain(entry); (err == nil) != ok {
			t.Errorf("CheckTrustedDomain(%q) = %v", entry, err)
		}
	}
	if !tenancy.SameOrigin("https://Shop.example:443", "shop.example") || tenancy.SameOrigin("https://shop.example", "http://shop.example") {
		t.Error("SameOrigin")
	}
}
