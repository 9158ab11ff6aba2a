package templates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/collections"
	"github.com/tallyhq/tally/regional/locations"
	"github.com/tallyhq/tally/regional/products"
	"github.com/tallyhq/tally/regional/segments"
)

// A template copied into another project carries what its rules and
// settings name of its project (the reference: "resources are created in
// the target on first use"): each product, SKU, collection, segment and
// location as the body that makes it again. The first campaign or tier
// set up from the copy makes each in its project, or matches it to one the
// project has (products and SKUs by source_id; collections, segments and
// locations by name), and rewrites the rules' and settings' ids to the
// destination's. What it makes is made in the transaction that writes the
// campaign or tier, so a refused setup leaves nothing behind.

// Carried is an object of the source project a copy carries.
type Carried struct {
	ID     string          `json:"id"`     // in the source project
	Object string          `json:"object"` // as created_resources names it
	Body   json.RawMessage `json:"body"`   // its create body, naming source ids
	// Static marks a static segment, whose members (customers: personal
	// data) are not carried, so it is refused.
	Static bool `json:"static,omitempty"`
}

// Objects are the services that read and make what a copy carries.
type Objects struct {
	Products    *products.Service
	Collections *collections.Service
	Segments    *segments.Service
	Locations   *locations.Service
}

// placeOrder makes what others name first: collections name products and
// locations, segments locations, SKUs their products.
var placeOrder = map[string]int{"location": 0, "product": 1, "sku": 2, "products_collection": 3, "segments": 4}

// idsIn are the project object ids doc names, each once, in order met.
func idsIn(docs ...json.RawMessage) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if projectObject.MatchString(x) && !seen[x] {
				seen[x] = true
				out = append(out, x)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, d := range docs {
		var v any
		if json.Unmarshal(d, &v) == nil {
			walk(v)
		}
	}
	return out
}

// docsOf are a template's body and rules as JSON documents.
func docsOf(body map[string]json.RawMessage, rules []map[string]json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, 1+len(rules))
	for _, m := range append([]map[string]json.RawMessage{body}, rules...) {
		raw, _ := json.Marshal(m)
		out = append(out, raw)
	}
	return out
}

// carry reads what body and rules name, and what that names in turn (a
// collection's products and locations, a SKU's product), in the order
// they are to be made.
func (s *Service) carry(ctx context.Context, projectID string, docs []json.RawMessage) ([]Carried, error) {
	var out []Carried
	done := map[string]bool{}
	queue := idsIn(docs...)
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if done[id] {
			continue
		}
		done[id] = true
		c, err := s.describe(ctx, projectID, id)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		queue = append(queue, idsIn(c.Body)...)
	}
	slices.SortStableFunc(out, func(a, b Carried) int { return placeOrder[a.Object] - placeOrder[b.Object] })
	return out, nil
}

// describe reads one object as the body that makes it again.
func (s *Service) describe(ctx context.Context, projectID, id string) (Carried, error) {
	var obj string
	var body any
	switch prefix, _, _ := strings.Cut(id, "_"); prefix {
	case "prod":
		p, err := s.objects.Products.GetProduct(ctx, projectID, id)
		if err != nil {
			return Carried{}, err
		}
		obj, body = "product", map[string]any{"source_id": p.SourceID, "name": p.Name, "price": p.Price,
			"attributes": p.Attributes, "metadata": p.Metadata, "image_url": p.ImageURL}
	case "sku":
		k, err := s.objects.Products.GetSKU(ctx, projectID, id)
		if err != nil {
			return Carried{}, err
		}
		obj, body = "sku", map[string]any{"product_id": k.ProductID, "source_id": k.SourceID, "sku": k.SKU, "price": k.Price,
			"currency": k.Currency, "attributes": k.Attributes, "metadata": k.Metadata, "image_url": k.ImageURL}
	case "pc":
		c, err := s.objects.Collections.Get(ctx, projectID, id)
		if err != nil {
			return Carried{}, err
		}
		b := map[string]any{"name": c.Name, "type": c.Type}
		if c.Type == collections.Static {
			b["products"] = c.Products
		} else {
			b["filter"] = c.Filter
		}
		obj, body = "products_collection", b
	case "seg":
		g, err := s.objects.Segments.Get(ctx, projectID, id)
		if err != nil {
			return Carried{}, err
		}
		if g.Type == segments.Static {
			return Carried{ID: id, Object: "segments", Body: json.RawMessage(`{}`), Static: true}, nil
		}
		obj, body = "segments", map[string]any{"name": g.Name, "type": g.Type, "filter": g.Filter}
	default: // loc
		l, err := s.objects.Locations.Get(ctx, projectID, id)
		if err != nil {
			return Carried{}, err
		}
		obj, body = "location", map[string]any{"name": l.Name, "shape": l.Shape}
	}
	raw, err := json.Marshal(body)
	return Carried{ID: id, Object: obj, Body: raw}, err
}

// checkCarried refuses a copy into another project that names a static
// segment: its members are customers, personal data that a template does
// not carry between projects (and regions). The 400 names each.
func checkCarried(cs []Carried, source, dest string) error {
	var static []string
	for _, c := range cs {
		if c.Static {
			static = append(static, c.ID)
		}
	}
	if len(static) == 0 {
		return nil
	}
	return apierr.InvalidPayload(fmt.Sprintf("the template's validation rules name static segments of project %s, whose members are customers "+
		"that a copy does not carry into project %s: %s. Use an auto-update segment, or copy the template within its project",
		source, dest, strings.Join(static, ", ")))
}

// rewrite is doc with every string that is a key of ids replaced by its value.
func rewrite(doc json.RawMessage, ids map[string]string) json.RawMessage {
	var v any
	if len(ids) == 0 || json.Unmarshal(doc, &v) != nil {
		return doc
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			if n, ok := ids[x]; ok {
				return n
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		}
		return v
	}
	out, _ := json.Marshal(walk(v))
	return out
}

// planned is a carried object as a setup places it in the destination:
// its id there, matched to one the project has or new, and, when new, the
// body that makes it there, naming the destination's ids.
type planned struct {
	Carried
	id   string
	body json.RawMessage // nil when matched
}

// idPrefix is the id prefix of each carried object's kind.
var idPrefix = map[string]string{"product": "prod_", "sku": "sku_", "products_collection": "pc_", "segments": "seg_", "location": "loc_"}

// plan matches each carried object to one projectID has (products and
// SKUs by source_id, the rest by name) or gives it a new id there, and
// answers the source ids' destination ids. It writes nothing: makeIn
// makes the new ones in the setup's transaction, so that a refused setup
// leaves none behind (docs/architecture.md, Campaign templates).
func (s *Service) plan(ctx context.Context, projectID string, cs []Carried) (map[string]string, []planned, error) {
	dest := map[string]string{}
	out := make([]planned, 0, len(cs))
	fresh := map[string]string{} // a new object's kind and key → its id, which a later one of the same key matches
	for _, c := range cs {
		body := rewrite(c.Body, dest)
		key, id, err := s.match(ctx, projectID, c.Object, body)
		if err != nil {
			return nil, nil, err
		}
		p := planned{Carried: c, id: id}
		if p.id == "" && key != "" {
			p.id = fresh[key]
		}
		if p.id == "" {
			p.id, p.body = ids.New(idPrefix[c.Object]), body
			if key != "" {
				fresh[key] = p.id
			}
		}
		dest[c.ID] = p.id
		out = append(out, p)
	}
	return dest, out, nil
}

// match answers the kind and key a carried object of kind object with
// body is matched by ("" when it has none: a product without a
// source_id) and the id of the object of projectID it matches, "" for
// none.
func (s *Service) match(ctx context.Context, projectID, object string, body json.RawMessage) (string, string, error) {
	var named struct {
		Name     string  `json:"name"`
		SourceID *string `json:"source_id"`
	}
	if err := json.Unmarshal(body, &named); err != nil {
		return "", "", err
	}
	o := s.objects
	var id string
	var err error
	switch object {
	case "product", "sku":
		if named.SourceID == nil {
			return "", "", nil
		}
		if object == "product" {
			var v products.View
			v, err = o.Products.GetProduct(ctx, projectID, *named.SourceID)
			id = v.ID
		} else {
			var v products.SKUView
			v, err = o.Products.GetSKU(ctx, projectID, *named.SourceID)
			id = v.ID
		}
		if e := (*apierr.Error)(nil); errors.As(err, &e) && e.Status == http.StatusNotFound {
			id, err = "", nil
		}
		return object + "/" + *named.SourceID, id, err
	case "products_collection":
		id, err = o.Collections.IDByName(ctx, projectID, named.Name)
	case "segments":
		id, err = o.Segments.IDByName(ctx, projectID, named.Name)
	default:
		id, err = o.Locations.IDByName(ctx, projectID, named.Name)
	}
	return object + "/" + named.Name, id, err
}

// errRaced marks a carried object that another setup made between this
// one's plan and its transaction (its source_id or name is taken): the
// setup, refused whole, is planned and run again once.
var errRaced = errors.New("templates: a carried object was made by another setup meanwhile")

// makeIn makes in tx the planned objects that matched none, in order,
// and answers them as created_resources; segments made are to be told
// to their owner once tx commits (Segments.Made).
func (s *Service) makeIn(ctx context.Context, tx pgx.Tx, projectID string, ps []planned) ([]Resource, error) {
	made := []Resource{}
	for _, p := range ps {
		if p.body == nil {
			continue
		}
		err := s.makeOne(ctx, tx, projectID, p)
		// A refusal (the destination's limits, its metadata schema) names
		// what of the template it refused; anything else is the server's.
		if e := (*apierr.Error)(nil); errors.As(err, &e) && e.Status < 500 {
			refusal := apierr.New(e.Status, e.Key, e.Message,
				fmt.Sprintf("the template's %s %s could not be made in project %s: %s", p.Object, p.ID, projectID, e.Error()))
			if e.Status == http.StatusConflict {
				return nil, fmt.Errorf("%w: %w", errRaced, refusal)
			}
			return nil, refusal
		} else if err != nil {
			return nil, err
		}
		made = append(made, Resource{ID: p.id, Object: p.Object})
	}
	return made, nil
}

func (s *Service) makeOne(ctx context.Context, tx pgx.Tx, projectID string, p planned) error {
	o := s.objects
	var err error
	switch p.Object {
	case "product", "sku":
		var patch products.Patch
		if err := json.Unmarshal(p.body, &patch); err != nil {
			return err
		}
		if p.Object == "product" {
			_, err = o.Products.CreateProductIn(ctx, tx, projectID, p.id, patch)
			return err
		}
		var ref string
		if err := json.Unmarshal(patch["product_id"], &ref); err != nil {
			return err
		}
		delete(patch, "product_id")
		_, err = o.Products.CreateSKUIn(ctx, tx, products.SKURef{Project: projectID, Product: ref, SKU: p.id}, patch)
	case "products_collection":
		var r collections.Request
		if err := json.Unmarshal(p.body, &r); err != nil {
			return err
		}
		_, err = o.Collections.CreateIn(ctx, tx, projectID, p.id, r)
	case "segments":
		var b segments.Body
		if err := json.Unmarshal(p.body, &b); err != nil {
			return err
		}
		_, err = o.Segments.CreateIn(ctx, tx, projectID, p.id, b)
	default:
		var r locations.Request
		if err := json.Unmarshal(p.body, &r); err != nil {
			return err
		}
		_, err = o.Locations.CreateIn(ctx, tx, projectID, p.id, r)
	}
	return err
}

// madeSegments tells the segments' owner of those made, once the
// setup's transaction has committed.
func (s *Service) madeSegments(projectID string, made []Resource) {
	for _, r := range made {
		if r.Object == "segments" {
			s.objects.Segments.Made(projectID)
			return
		}
	}
}
