package collections

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/products"
)

// productFilter is an AUTO_UPDATE collection's filter, compiled.
type productFilter struct {
	raw json.RawMessage
}

func parseFilter(raw json.RawMessage) (*productFilter, error) {
	return nil, apierr.InvalidPayload("AUTO_UPDATE collections are not served yet")
}

// matchProduct says whether a product is in the collection.
func (f *productFilter) matchProduct(p products.Product) bool { return false }

// matchSKU says whether a SKU (of product p) is in the collection.
func (f *productFilter) matchSKU(s products.SKU, p products.Product) bool { return false }

// members lists a page of the products and SKUs the filter holds.
func (f *productFilter) members(ctx context.Context, q db.Querier, projectID string, after time.Time, offset, limit int) ([]any, int, error) {
	return nil, 0, nil
}
