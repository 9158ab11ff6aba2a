package templates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
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
// destination's.

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

// place makes each carried object in projectID or matches it to one the
// project has, and answers the source ids' destination ids and what was
// made. What it makes stays should the setup then fail: a second setup
// matches it.
func (s *Service) place(ctx context.Context, projectID string, cs []Carried) (map[string]string, []Resource, error) {
	ids := map[string]string{}
	made := []Resource{}
	for _, c := range cs {
		body := rewrite(c.Body, ids)
		id, created, err := s.placeOne(ctx, projectID, c.Object, body)
		// A refusal (the destination's limits, its metadata schema) names
		// what of the template it refused; anything else is the server's.
		if e := (*apierr.Error)(nil); errors.As(err, &e) && e.Status < 500 {
			return nil, nil, apierr.New(e.Status, e.Key, e.Message,
				fmt.Sprintf("the template's %s %s could not be made in project %s: %s", c.Object, c.ID, projectID, e.Error()))
		} else if err != nil {
			return nil, nil, err
		}
		ids[c.ID] = id
		if created {
			made = append(made, Resource{ID: id, Object: c.Object})
		}
	}
	return ids, made, nil
}

func (s *Service) placeOne(ctx context.Context, projectID, object string, body json.RawMessage) (string, bool, error) {
	var named struct {
		Name      string  `json:"name"`
		SourceID  *string `json:"source_id"`
		ProductID string  `json:"product_id"`
	}
	if err := json.Unmarshal(body, &named); err != nil {
		return "", false, err
	}
	o := s.objects
	switch object {
	case "product", "sku":
		var patch products.Patch
		if err := json.Unmarshal(body, &patch); err != nil {
			return "", false, err
		}
		if named.SourceID != nil {
			var id string
			var err error
			if object == "product" {
				var v products.View
				v, err = o.Products.GetProduct(ctx, projectID, *named.SourceID)
				id = v.ID
			} else {
				var v products.SKUView
				v, err = o.Products.GetSKU(ctx, projectID, *named.SourceID)
				id = v.ID
			}
			if err == nil {
				return id, false, nil
			} else if e := (*apierr.Error)(nil); !errors.As(err, &e) || e.Status != http.StatusNotFound {
				return "", false, err
			}
		}
		if object == "product" {
			v, err := o.Products.CreateProduct(ctx, projectID, patch)
			return v.ID, err == nil, err
		}
		delete(patch, "product_id")
		v, err := o.Products.CreateSKU(ctx, projectID, named.ProductID, patch)
		return v.ID, err == nil, err
	case "products_collection":
		return matchOrMake(ctx, projectID, named.Name, o.Collections.IDByName, func() (string, error) {
			var r collections.Request
			if err := json.Unmarshal(body, &r); err != nil {
				return "", err
			}
			v, err := o.Collections.Create(ctx, projectID, r)
			return v.ID, err
		})
	case "segments":
		return matchOrMake(ctx, projectID, named.Name, o.Segments.IDByName, func() (string, error) {
			var b segments.Body
			if err := json.Unmarshal(body, &b); err != nil {
				return "", err
			}
			v, err := o.Segments.Create(ctx, projectID, b)
			return v.ID, err
		})
	default:
		return matchOrMake(ctx, projectID, named.Name, o.Locations.IDByName, func() (string, error) {
			var r locations.Request
			if err := json.Unmarshal(body, &r); err != nil {
				return "", err
			}
			v, err := o.Locations.Create(ctx, projectID, r)
			return v.ID, err
		})
	}
}

func matchOrMake(ctx context.Context, projectID, name string, byName func(context.Context, string, string) (string, error),
	make func() (string, error)) (string, bool, error) {
	id, err := byName(ctx, projectID, name)
	if err != nil || id != "" {
		return id, false, err
	}
	id, err = make()
	return id, err == nil, err
}
