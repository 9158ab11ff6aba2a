package collections

import (
	"context"
	"slices"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/products"
	"github.com/tallyhq/tally/regional/rules"
)

// of reads the project's collections among ids that exist, from the cache
// where it holds them (for at most CacheTTL) and the rest in one query.
func (s *Service) of(ctx context.Context, q db.Querier, projectID string, ids []string) ([]*Collection, error) {
	var out []*Collection
	var miss []string
	for _, id := range ids {
		if c, ok := s.cache.Get(projectID + "/" + id); ok {
			if c.c != nil {
				out = append(out, c.c)
			}
		} else {
			miss = append(miss, id)
		}
	}
	if len(miss) == 0 {
		return out, nil
	}
	rows, err := db.Collect(scan)(q.Query(ctx, `SELECT `+columns+` FROM product_collections WHERE project_id = $1 AND id = ANY($2::TEXT[])`,
		projectID, miss))
	if err != nil {
		return nil, err
	}
	found := map[string]*Collection{}
	for i := range rows {
		found[rows[i].ID] = &rows[i]
	}
	for _, id := range miss {
		s.cache.Add(projectID+"/"+id, cached{found[id]})
		if c := found[id]; c != nil {
			out = append(out, c)
		}
	}
	return out, nil
}

// Mark sets the CollectionIDs of o's lines: which of the collections ids
// (those a request's rules name) each line's product or SKU is in. A line
// names its product and SKU by id or source_id, as the request gives them;
// they are read in one query, only when a collection is named and a line
// has one. A line whose product the project does not have is in a static
// collection that lists its id, and in no dynamic one.
func (s *Service) Mark(ctx context.Context, q db.Querier, projectID string, ids []string, o *rules.Order) error {
	if len(ids) == 0 || o == nil || len(o.Items) == 0 {
		return nil
	}
	cs, err := s.of(ctx, q, projectID, ids)
	if err != nil || len(cs) == 0 {
		return err
	}
	var ps, ss []string
	for _, it := range o.Items {
		ps = appendSome(ps, it.ProductID, it.ProductSourceID)
		ss = appendSome(ss, it.SKUID, it.SKUSourceID)
	}
	var f products.Found
	if needsCatalogue(cs, o) {
		if f, err = products.Lookup(ctx, q, projectID, ps, ss); err != nil {
			return err
		}
	}
	if cs, err = s.bound(ctx, projectID, cs); err != nil {
		return err
	}
	now := s.clock.Now()
	for i := range o.Items {
		it := &o.Items[i]
		line := lineOf(it, f)
		it.CollectionIDs = it.CollectionIDs[:0:0]
		for _, c := range cs {
			if c.holds(line, now) {
				it.CollectionIDs = append(it.CollectionIDs, c.ID)
			}
		}
	}
	return nil
}

// bound are cs with the shapes of the locations their filters name, read
// in one call (the locations' cache holds them for 2 s); the cached
// collections are left as they are, bound copies made of those that name
// locations.
func (s *Service) bound(ctx context.Context, projectID string, cs []*Collection) ([]*Collection, error) {
	var ids []string
	for _, c := range cs {
		if c.filter != nil {
			ids = append(ids, c.filter.locations()...)
		}
	}
	if len(ids) == 0 {
		return cs, nil
	}
	shapes, err := s.places.Shapes(ctx, projectID, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*Collection, len(cs))
	for i, c := range cs {
		out[i] = c
		if c.filter != nil && len(c.filter.locations()) > 0 {
			b := *c
			b.filter = c.filter.bind(shapes)
			out[i] = &b
		}
	}
	return out, nil
}

func appendSome(to []string, vals ...string) []string {
	for _, v := range vals {
		if v != "" {
			to = append(to, v)
		}
	}
	return to
}

// line is what an order line is, in the catalogue: its product's and
// SKU's ids (as given when the catalogue has neither) and rows.
type line struct {
	productID, skuID string
	product          *products.Product
	sku              *products.SKU
}

func lineOf(it *rules.Item, f products.Found) line {
	l := line{productID: it.ProductID, skuID: it.SKUID}
	if s, ok := f.SKU(it.SKUID); ok {
		l.sku = &s
	} else if s, ok := f.SKU(it.SKUSourceID); ok {
		l.sku = &s
	}
	if l.sku != nil {
		l.skuID = l.sku.ID
		if p, ok := f.Product(l.sku.ProductID); ok {
			l.product = &p
		}
	}
	if l.product == nil {
		if p, ok := f.Product(it.ProductID); ok {
			l.product = &p
		} else if p, ok := f.Product(it.ProductSourceID); ok {
			l.product = &p
		}
	}
	if l.product != nil {
		l.productID = l.product.ID
	}
	return l
}

// holds says whether the line is in c. A static collection holds the
// products and SKUs it lists, and a listed product's SKUs; a dynamic one
// holds a SKU line when the SKU matches its filter (a SKU must match
// itself, as the reference's collections read) and a product line when
// the product does.
func (c *Collection) holds(l line, now time.Time) bool {
	if c.Type == Static {
		return slices.ContainsFunc(c.Items, func(it Item) bool {
			if it.Object == "sku" {
				return l.skuID != "" && it.ID == l.skuID
			}
			return l.productID != "" && it.ID == l.productID
		})
	}
	switch {
	case l.sku != nil:
		return c.filter.matchSKU(*l.sku, now)
	case l.product != nil:
		return c.filter.matchProduct(*l.product, now)
	}
	return false
}

// needsCatalogue says whether marking o's lines for cs reads the lines'
// products: a dynamic collection's filter reads them, and a line named by
// a source id or a SKU is resolved through them. Static collections of
// lines named by product id are their lists alone: no read.
func needsCatalogue(cs []*Collection, o *rules.Order) bool {
	for _, c := range cs {
		if c.Type != Static {
			return true
		}
	}
	for _, it := range o.Items {
		if it.SKUID != "" || it.SKUSourceID != "" || it.ProductID == "" {
			return true
		}
	}
	return false
}
