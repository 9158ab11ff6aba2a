package products

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/jsonx"
)

// Product is a project's product.
type Product struct {
	ID         string
	SourceID   *string
	Name       *string
	Price      *int64
	Attributes []string
	Metadata   map[string]any
	ImageURL   *string
	CreatedAt  time.Time
	UpdatedAt  *time.Time
}

// SKU is a variant of a product.
type SKU struct {
	ID         string
	ProductID  string
	SourceID   *string
	SKU        *string
	Price      *int64
	Currency   *string
	Attributes map[string]any
	Metadata   map[string]any
	ImageURL   *string
	CreatedAt  time.Time
	UpdatedAt  *time.Time
}

// View is the reference's Product: the product (its fields those of a
// ProductWithoutSkus, in the same order) and the first of its SKUs.
type View struct {
	BareView
	SKUs SKUList `json:"skus"`
}

// SKUList is the reference's SkusListForProduct: at most EmbeddedSKUs of
// the product's SKUs, and how many it has.
type SKUList struct {
	Object  string    `json:"object"`
	DataRef string    `json:"data_ref"`
	Data    []SKUView `json:"data"`
	Total   int       `json:"total"`
}

// EmbeddedSKUs is how many SKUs a product's rendering carries; all of them
// are listed, a page at a time, by GET /v1/products/{id}/skus.
const EmbeddedSKUs = 100

// SKUView is the reference's Sku.
type SKUView struct {
	ID         string         `json:"id"`
	SourceID   *string        `json:"source_id"`
	ProductID  string         `json:"product_id"`
	SKU        *string        `json:"sku"`
	Price      *int64         `json:"price"`
	Currency   *string        `json:"currency"`
	Attributes map[string]any `json:"attributes"`
	ImageURL   *string        `json:"image_url"`
	Metadata   map[string]any `json:"metadata"`
	CreatedAt  jsonx.Time     `json:"created_at"`
	UpdatedAt  *jsonx.Time    `json:"updated_at"`
	Object     string         `json:"object"`
}

// View renders p with its SKUs (the first EmbeddedSKUs) and their count.
func (p Product) View(skus []SKU, total int) View {
	v := View{BareView: p.Bare(), SKUs: SKUList{Object: "list", DataRef: "data", Data: make([]SKUView, len(skus)), Total: total}}
	for i, s := range skus {
		v.SKUs.Data[i] = s.View()
	}
	return v
}

// View renders s.
func (s SKU) View() SKUView {
	return SKUView{ID: s.ID, SourceID: s.SourceID, ProductID: s.ProductID, SKU: s.SKU, Price: s.Price, Currency: s.Currency,
		Attributes: orEmpty(s.Attributes), ImageURL: s.ImageURL, Metadata: orEmpty(s.Metadata),
		CreatedAt: jsonx.Time{Time: s.CreatedAt}, UpdatedAt: jsonx.Ptr(s.UpdatedAt), Object: "sku"}
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// maxText is the longest text property accepted.
const maxText = 1000

// Patch is a create or update request: the properties present are set, an
// explicit null clears one, and absent ones are left alone.
type Patch map[string]json.RawMessage

// UnmarshalJSON refuses a body that is not an object.
func (p *Patch) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return apierr.InvalidPayload("The body must be a JSON object.")
	}
	*p = m
	return nil
}

func (p Patch) has(k string) bool { _, ok := p[k]; return ok }

// text sets *dst from property k: a string of at most maxText characters,
// or null. nonEmpty refuses "".
func (p Patch) text(k string, dst **string, nonEmpty bool) error {
	raw, ok := p[k]
	if !ok {
		return nil
	}
	var v *string
	if err := json.Unmarshal(raw, &v); err != nil {
		return apierr.InvalidPayload(fmt.Sprintf("Property %s must be a string or null.", k))
	}
	if v != nil {
		if err := checkText(k, *v, nonEmpty); err != nil {
			return err
		}
	}
	*dst = v
	return nil
}

func checkText(k, v string, nonEmpty bool) error {
	switch {
	case nonEmpty && strings.TrimSpace(v) == "":
		return apierr.InvalidPayload(fmt.Sprintf("Property %s must not be empty.", k))
	case len(v) > maxText:
		return apierr.InvalidPayload(fmt.Sprintf("Property %s is longer than %d characters.", k, maxText))
	}
	return nil
}

// price sets *dst from property price: a whole number of the currency's
// smallest unit (1999 for 19.99), or null.
func (p Patch) price(dst **int64) error {
	raw, ok := p["price"]
	if !ok {
		return nil
	}
	var v *json.Number
	// json.Number takes a quoted number too; the interface's price is a JSON number.
	if err := json.Unmarshal(raw, &v); err != nil || strings.HasPrefix(strings.TrimSpace(string(raw)), `"`) {
		return apierr.InvalidPayload("Property price must be an integer (the amount in the smallest currency unit, 1999 for 19.99) or null.")
	}
	if v == nil {
		*dst = nil
		return nil
	}
	n, err := parsePrice(v.String())
	if err != nil {
		return apierr.InvalidPayload("Property price " + err.Error() + ".")
	}
	*dst = &n
	return nil
}

// parsePrice reads a price as the API and CSV files give it.
func parsePrice(s string) (int64, error) {
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || fmt.Sprint(n) != s {
		return 0, fmt.Errorf("must be an integer amount in the smallest currency unit (1999 for 19.99), got %q", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("must not be negative, got %d", n)
	}
	return n, nil
}

func (p Patch) imageURL(dst **string) error {
	if err := p.text("image_url", dst, true); err != nil || *dst == nil {
		return err
	}
	return checkURL(**dst)
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return apierr.InvalidPayload(fmt.Sprintf("Property image_url must be an absolute http or https URL, got %q.", s))
	}
	return nil
}

func (p Patch) object(k string, dst *map[string]any) error {
	raw, ok := p[k]
	if !ok {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return apierr.InvalidPayload(fmt.Sprintf("Property %s must be an object or null.", k))
	}
	*dst = m
	return nil
}

// noID refuses an id in a create request: ids are assigned here.
func (p Patch) noID() error {
	if raw, ok := p["id"]; ok && string(raw) != "null" {
		return apierr.InvalidPayload("Property id is assigned by the platform; leave it out (use source_id for your own identifier).")
	}
	return nil
}

// ApplyProduct sets the product properties the patch names.
func (p Patch) ApplyProduct(d *Product) error {
	for _, err := range []error{p.text("source_id", &d.SourceID, true), p.text("name", &d.Name, false), p.price(&d.Price),
		p.imageURL(&d.ImageURL), p.object("metadata", &d.Metadata)} {
		if err != nil {
			return err
		}
	}
	if raw, ok := p["attributes"]; ok {
		var a []string
		if err := json.Unmarshal(raw, &a); err != nil {
			return apierr.InvalidPayload("Property attributes must be an array of strings (the attribute names a SKU sets) or null.")
		}
		for _, s := range a {
			if err := checkText("attributes", s, true); err != nil {
				return err
			}
		}
		d.Attributes = a
	}
	return nil
}

// ApplySKU sets the SKU properties the patch names.
func (p Patch) ApplySKU(s *SKU) error {
	for _, err := range []error{p.text("source_id", &s.SourceID, true), p.text("sku", &s.SKU, false), p.price(&s.Price),
		p.text("currency", &s.Currency, true), p.imageURL(&s.ImageURL), p.object("metadata", &s.Metadata),
		p.object("attributes", &s.Attributes)} {
		if err != nil {
			return err
		}
	}
	if s.Currency != nil {
		if err := checkCurrency(*s.Currency); err != nil {
			return apierr.InvalidPayload("Property currency " + err.Error() + ".")
		}
	}
	return nil
}

func checkCurrency(c string) error {
	if len(c) != 3 || strings.ToUpper(c) != c || strings.ContainsFunc(c, func(r rune) bool { return r < 'A' || r > 'Z' }) {
		return fmt.Errorf("must be a three-letter ISO 4217 code such as EUR, got %q", c)
	}
	return nil
}
