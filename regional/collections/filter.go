package collections

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/geo"
	"github.com/tallyhq/tally/internal/targeting"
	"github.com/tallyhq/tally/regional/products"
)

// productFilter is an AUTO_UPDATE collection's filter, read twice: over
// products and over SKUs, whose paths mean the same (a SKU's name is its
// sku). A SKU is in the collection when it matches itself, as the
// reference's dynamic collections read.
type productFilter struct {
	raw      json.RawMessage
	products *targeting.Filter[products.Product]
	skus     *targeting.Filter[products.SKU]
}

func str(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func num(p *int64) any {
	if p == nil {
		return nil
	}
	return float64(*p)
}

func ptime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return *t
}

// productSchema and skuSchema are the paths a filter may name: id,
// source_id, name, price, image_url, created_at, updated_at and
// metadata.<key>.
var productSchema = targeting.Schema[products.Product]{
	Fields: map[string]targeting.Field[products.Product]{
		"id":         {Kind: targeting.String, SQL: "id", Get: func(p products.Product) any { return p.ID }},
		"source_id":  {Kind: targeting.String, SQL: "source_id", Get: func(p products.Product) any { return str(p.SourceID) }},
		"name":       {Kind: targeting.String, SQL: "name", Get: func(p products.Product) any { return str(p.Name) }},
		"image_url":  {Kind: targeting.String, SQL: "image_url", Get: func(p products.Product) any { return str(p.ImageURL) }},
		"price":      {Kind: targeting.Number, SQL: "price", Get: func(p products.Product) any { return num(p.Price) }},
		"created_at": {Kind: targeting.DateTime, SQL: "created_at", Get: func(p products.Product) any { return p.CreatedAt }},
		"updated_at": {Kind: targeting.DateTime, SQL: "updated_at", Get: func(p products.Product) any { return ptime(p.UpdatedAt) }},
	},
	MetadataSQL: "metadata",
	Metadata:    func(p products.Product) map[string]any { return p.Metadata },
}

var skuSchema = targeting.Schema[products.SKU]{
	Fields: map[string]targeting.Field[products.SKU]{
		"id":         {Kind: targeting.String, SQL: "id", Get: func(s products.SKU) any { return s.ID }},
		"source_id":  {Kind: targeting.String, SQL: "source_id", Get: func(s products.SKU) any { return str(s.SourceID) }},
		"name":       {Kind: targeting.String, SQL: "sku", Get: func(s products.SKU) any { return str(s.SKU) }},
		"image_url":  {Kind: targeting.String, SQL: "image_url", Get: func(s products.SKU) any { return str(s.ImageURL) }},
		"price":      {Kind: targeting.Number, SQL: "price", Get: func(s products.SKU) any { return num(s.Price) }},
		"created_at": {Kind: targeting.DateTime, SQL: "created_at", Get: func(s products.SKU) any { return s.CreatedAt }},
		"updated_at": {Kind: targeting.DateTime, SQL: "updated_at", Get: func(s products.SKU) any { return ptime(s.UpdatedAt) }},
	},
	MetadataSQL: "metadata",
	Metadata:    func(s products.SKU) map[string]any { return s.Metadata },
}

func parseFilter(raw json.RawMessage) (*productFilter, error) {
	pf, err := targeting.Parse(raw, productSchema, "filter")
	if err != nil {
		return nil, err
	}
	sf, err := targeting.Parse(raw, skuSchema, "filter")
	if err != nil {
		return nil, err
	}
	return &productFilter{raw: withJunction(pf.Raw()), products: pf, skus: sf}, nil
}

// withJunction is a filter as stored and shown: with its junction, "and"
// when it was left out (the reference's collections require one).
func withJunction(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	if _, ok := m["junction"]; ok {
		return raw
	}
	m["junction"] = json.RawMessage(`"and"`)
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// matchProduct says whether a product is in the collection at now.
func (f *productFilter) matchProduct(p products.Product, now time.Time) bool {
	return f.products.Match(p, now, productSchema)
}

// matchSKU says whether a SKU is in the collection at now.
func (f *productFilter) matchSKU(s products.SKU, now time.Time) bool {
	return f.skus.Match(s, now, skuSchema)
}

// locations are the ids of the locations the filter's $in_location
// conditions name.
func (f *productFilter) locations() []string { return f.products.Locations() }

// bound is f with the shapes of ids (those of its locations, or more: a
// request's collections read theirs in one call) from places; f itself,
// shared by the collections' cache, is left as it is.
func (f *productFilter) bound(ctx context.Context, places targeting.Places, projectID string, ids []string) (*productFilter, error) {
	if len(f.locations()) == 0 {
		return f, nil
	}
	shapes, err := places.Shapes(ctx, projectID, ids)
	if err != nil {
		return nil, err
	}
	return f.bind(shapes), nil
}

func (f *productFilter) bind(shapes map[string]geo.Shape) *productFilter {
	if len(f.locations()) == 0 {
		return f
	}
	return &productFilter{raw: f.raw, products: f.products.Bind(shapes), skus: f.skus.Bind(shapes)}
}

// members lists a page of the products and SKUs the filter holds at now,
// the same the Go matches hold: one SQL condition per table, and for a
// filter with $in_location (whose SQL is a bounding-box prefilter, see
// targeting's places.go) the Go match of each row it keeps.
func (f *productFilter) members(ctx context.Context, q db.Querier, projectID string, now, after time.Time, offset, limit int) ([]any, int, error) {
	sel := products.Selection{Where: func(sku bool, arg func(any) string) string {
		if sku {
			return f.skus.Where(arg, now, skuSchema)
		}
		return f.products.Where(arg, now, productSchema)
	}}
	if !f.products.Exact() {
		sel.Keep = func(p products.Product, s *products.SKU) bool {
			if s != nil {
				return f.matchSKU(*s, now)
			}
			return f.matchProduct(p, now)
		}
	}
	return products.Members(ctx, q, projectID, sel, after, offset, limit)
}
