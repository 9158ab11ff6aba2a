package targeting

import (
	"context"
	"slices"
	"strings"

	"github.com/tallyhq/tally/internal/geo"
)

// $in_location names locations, whose shapes are not the filter's: they
// are read when it is evaluated (a location redrawn is in force at the
// next evaluation), so the filter keeps their ids, Locations lists them
// and Bind gives it their shapes. A location the caller does not bind
// (deleted, or never there) holds no point, as in validation rules.
//
// Match tests the exact shape. Where cannot, in the SQL that PostgreSQL
// and CockroachDB share (no geometry types), so it tests each location's
// bounding box (geo.Bounds) on the geopoint's latitude and longitude read
// out of the metadata text: a prefilter that keeps every record Match
// holds and maybe more, which the caller refines with Match (Exact says
// when it must). The prefilter stays a superset through and/or junctions
// because $in_location has no negation, so no NOT is ever put around it.

// Locations are the ids of the locations the filter's $in_location
// conditions name, each once, in order.
func (f *Filter[T]) Locations() []string {
	var out []string
	for _, c := range f.conds {
		if c.op != inLocation {
			continue
		}
		for _, id := range c.texts {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// Exact says whether Where selects exactly the records Match holds; when
// it does not (an $in_location condition), Where is a prefilter whose
// records the caller keeps only where Match holds.
func (f *Filter[T]) Exact() bool {
	return !slices.ContainsFunc(f.conds, func(c cond[T]) bool { return c.op == inLocation })
}

// Bind returns the filter with the shapes of its locations, for Match and
// Where; f itself is left as it is (a compiled filter is shared between
// requests).
func (f *Filter[T]) Bind(shapes map[string]geo.Shape) *Filter[T] {
	if f.Exact() {
		return f
	}
	g := *f
	g.conds = slices.Clone(f.conds)
	for i := range g.conds {
		if g.conds[i].op == inLocation {
			g.conds[i].shapes = shapes
		}
	}
	return &g
}

// Places gives the shapes of a project's locations among ids that exist
// (regional/locations).
type Places interface {
	Shapes(ctx context.Context, projectID string, ids []string) (map[string]geo.Shape, error)
}

// Bound is f with the shapes of the locations it names read from places;
// a filter that names none is returned as it is, reading nothing.
func Bound[T any](ctx context.Context, f *Filter[T], places Places, projectID string) (*Filter[T], error) {
	ids := f.Locations()
	if len(ids) == 0 {
		return f, nil
	}
	shapes, err := places.Shapes(ctx, projectID, ids)
	if err != nil {
		return nil, err
	}
	return f.Bind(shapes), nil
}

// within is $in_location in Go: v is a geopoint or an array holding one
// that lies in a bound location.
func (c cond[T]) within(v any) bool { return geo.InAny(v, c.texts, c.shapes) }

// simplePoint is a geopoint in plain decimals, the form the SQL reads:
// "geo:52.52,13.405", the prefix in any case and optional, spaces around
// the numbers. ParsePoint reads more (exponents, tabs); such a value, and
// an array, passes the prefilter whole, and Match decides.
const simplePoint = `^ *([gG][eE][oO]: *)?-?[0-9]+(\.[0-9]+)? *, *-?[0-9]+(\.[0-9]+)? *$`

// whereIn is the prefilter of $in_location over a metadata value (typ its
// jsonb_typeof, text its text): an array, or a string that is not a simple
// point, passes; a simple point passes when it lies in one of the bound
// locations' boxes.
func (c cond[T]) whereIn(arg func(any) string, typ, text string) string {
	stripped := "split_part(regexp_replace(" + text + ", '^ *[gG][eE][oO]:', ''), ',', "
	lat, lng := "btrim("+stripped+"1))::FLOAT8", "btrim("+stripped+"2))::FLOAT8"
	var boxes []string
	for _, id := range c.texts {
		sh := c.shapes[id]
		if sh == nil {
			continue
		}
		b := geo.Bounds(sh)
		boxes = append(boxes, "("+lat+" >= "+arg(b.MinLat)+"::FLOAT8 AND "+lat+" <= "+arg(b.MaxLat)+"::FLOAT8 AND "+
			lng+" >= "+arg(b.MinLng)+"::FLOAT8 AND "+lng+" <= "+arg(b.MaxLng)+"::FLOAT8)")
	}
	inBox := "FALSE"
	if len(boxes) > 0 {
		inBox = strings.Join(boxes, " OR ")
	}
	return typ + " = 'array' OR (" + typ + " = 'string' AND CASE WHEN " + text + " ~ '" + simplePoint + "' THEN " + inBox + " ELSE TRUE END)"
}
