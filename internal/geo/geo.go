// Package geo holds the geometry of locations: a point ("geo:<lat>,<lng>",
// the reference's geopoint metadata), a circle (a centre and a radius with
// its unit, "1.54 km") and a polygon or multipolygon in GeoJSON order
// ([lng, lat]), with holes; and whether a point lies inside a shape.
//
// Distances are on a sphere of the Earth's mean radius (haversine), good to
// about 0.5 %. Polygons are tested in the plane of longitude and latitude,
// as GeoJSON (RFC 7946 §3.1.1) draws their edges: right for the city- and
// country-sized areas promotions aim at, and a polygon crossing the
// antimeridian must be given as a MultiPolygon split along it, as RFC 7946
// §3.1.9 asks. A point on a polygon's edge or a circle's rim is inside.
package geo

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// EarthRadius is the Earth's mean radius in metres (IUGG).
const EarthRadius = 6371008.8

// Point is a position in decimal degrees.
type Point struct{ Lat, Lng float64 }

// ParsePoint reads "geo:<lat>,<lng>" (the reference's geopoint), the
// prefix optional, spaces allowed around the numbers.
func ParsePoint(s string) (Point, error) {
	rest := strings.TrimSpace(s)
	if len(rest) >= 4 && strings.EqualFold(rest[:4], "geo:") {
		rest = rest[4:]
	}
	lat, lng, ok := strings.Cut(rest, ",")
	if !ok {
		return Point{}, fmt.Errorf("%q is not a point: expected geo:<latitude>,<longitude>", s)
	}
	p := Point{}
	var err error
	if p.Lat, err = strconv.ParseFloat(strings.TrimSpace(lat), 64); err != nil {
		return Point{}, fmt.Errorf("%q is not a point: the latitude is not a number", s)
	}
	if p.Lng, err = strconv.ParseFloat(strings.TrimSpace(lng), 64); err != nil {
		return Point{}, fmt.Errorf("%q is not a point: the longitude is not a number", s)
	}
	return p, p.check(s)
}

func (p Point) check(what string) error {
	if math.IsNaN(p.Lat) || p.Lat < -90 || p.Lat > 90 {
		return fmt.Errorf("%s: the latitude must be from -90 to 90", what)
	}
	if math.IsNaN(p.Lng) || p.Lng < -180 || p.Lng > 180 {
		return fmt.Errorf("%s: the longitude must be from -180 to 180", what)
	}
	return nil
}

// String is the point as the reference writes it.
func (p Point) String() string {
	return "geo:" + strconv.FormatFloat(p.Lat, 'f', -1, 64) + "," + strconv.FormatFloat(p.Lng, 'f', -1, 64)
}

// Distance is the great-circle distance from p to q in metres.
func Distance(p, q Point) float64 {
	rad := math.Pi / 180
	dLat, dLng := (q.Lat-p.Lat)*rad, (q.Lng-p.Lng)*rad
	a := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(p.Lat*rad)*math.Cos(q.Lat*rad)*math.Sin(dLng/2)*math.Sin(dLng/2)
	return 2 * EarthRadius * math.Asin(math.Min(1, math.Sqrt(a)))
}

// units are the radius units accepted, in metres.
var units = map[string]float64{"m": 1, "km": 1000, "mi": 1609.344, "ft": 0.3048, "yd": 0.9144}

// ParseRadius reads a radius: a positive number and a unit (m, km, mi, ft,
// yd), "1.54 km" or "1.54km"; a bare number is in metres. At most 20,000 km,
// half the Earth's circumference.
func ParseRadius(s string) (float64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, "m"
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult, ok := units[unit]
	if !ok {
		return 0, fmt.Errorf("radius %q: the unit must be one of m, km, mi, ft, yd", s)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 || math.IsInf(n, 0) {
		return 0, fmt.Errorf("radius %q: expected a positive number and a unit, as in \"1.5 km\"", s)
	}
	if m := n * mult; m <= 20_000_000 {
		return m, nil
	}
	return 0, fmt.Errorf("radius %q: must be at most 20000 km", s)
}

// Shape is an area a point may lie in.
type Shape interface {
	Contains(p Point) bool
}

// Circle is the points within Radius metres of Center.
type Circle struct {
	Center Point
	Radius float64
}

// Contains reports whether p is within the circle (its rim included).
func (c Circle) Contains(p Point) bool { return Distance(c.Center, p) <= c.Radius }

// Polygon is an outer ring and its holes, each a closed ring of points.
type Polygon struct {
	Outer []Point
	Holes [][]Point
}

// Contains reports whether p is inside the outer ring and in no hole; a
// point on a ring's edge is inside the ring.
func (g Polygon) Contains(p Point) bool {
	if !inRing(g.Outer, p) {
		return false
	}
	for _, h := range g.Holes {
		if inRing(h, p) && !onRing(h, p) {
			return false
		}
	}
	return true
}

// MultiPolygon is several polygons; a point in any is inside.
type MultiPolygon []Polygon

// Contains reports whether p is inside one of the polygons.
func (m MultiPolygon) Contains(p Point) bool {
	for _, g := range m {
		if g.Contains(p) {
			return true
		}
	}
	return false
}

// inRing is the even-odd test (a ray towards +lng), with the edge counted
// in.
func inRing(ring []Point, p Point) bool {
	if onRing(ring, p) {
		return true
	}
	in := false
	for i, j := 0, len(ring)-1; i < len(ring); j, i = i, i+1 {
		a, b := ring[i], ring[j]
		if (a.Lat > p.Lat) != (b.Lat > p.Lat) {
			x := a.Lng + (p.Lat-a.Lat)*(b.Lng-a.Lng)/(b.Lat-a.Lat)
			if p.Lng < x {
				in = !in
			}
		}
	}
	return in
}

// onRing reports whether p lies on one of the ring's edges.
func onRing(ring []Point, p Point) bool {
	const eps = 1e-12
	for i, j := 0, len(ring)-1; i < len(ring); j, i = i, i+1 {
		a, b := ring[i], ring[j]
		cross := (b.Lng-a.Lng)*(p.Lat-a.Lat) - (b.Lat-a.Lat)*(p.Lng-a.Lng)
		if math.Abs(cross) > eps {
			continue
		}
		if p.Lng >= math.Min(a.Lng, b.Lng)-eps && p.Lng <= math.Max(a.Lng, b.Lng)+eps &&
			p.Lat >= math.Min(a.Lat, b.Lat)-eps && p.Lat <= math.Max(a.Lat, b.Lat)+eps {
			return true
		}
	}
	return false
}

// Limits of one polygon.
const (
	maxRings  = 100
	maxPoints = 10_000 // positions of all rings of a shape together
)

// ParseGeoJSON reads a GeoJSON Polygon or MultiPolygon geometry: its type
// and coordinates, positions [lng, lat], each ring closed (its last
// position its first) with at least four positions.
func ParseGeoJSON(raw json.RawMessage) (Shape, error) {
	var g struct {
		Type        string          `json:"type"`
		Coordinates json.RawMessage `json:"coordinates"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, fmt.Errorf("geojson must be an object with type and coordinates")
	}
	budget := maxPoints
	switch g.Type {
	case "Polygon":
		var rings [][][]float64
		if err := json.Unmarshal(g.Coordinates, &rings); err != nil {
			return nil, fmt.Errorf("geojson.coordinates of a Polygon must be an array of rings, each an array of [longitude, latitude]")
		}
		return polygon("geojson.coordinates", rings, &budget)
	case "MultiPolygon":
		var polys [][][][]float64
		if err := json.Unmarshal(g.Coordinates, &polys); err != nil || len(polys) == 0 {
			return nil, fmt.Errorf("geojson.coordinates of a MultiPolygon must be a non-empty array of polygons, each an array of rings")
		}
		if len(polys) > maxRings {
			return nil, fmt.Errorf("geojson.coordinates: at most %d polygons", maxRings)
		}
		m := make(MultiPolygon, len(polys))
		for i, rings := range polys {
			g, err := polygon(fmt.Sprintf("geojson.coordinates[%d]", i), rings, &budget)
			if err != nil {
				return nil, err
			}
			m[i] = g
		}
		return m, nil
	}
	return nil, fmt.Errorf("geojson.type must be Polygon or MultiPolygon, got %q", g.Type)
}

func polygon(path string, rings [][][]float64, budget *int) (Polygon, error) {
	if len(rings) == 0 || len(rings) > maxRings {
		return Polygon{}, fmt.Errorf("%s: a polygon is 1 to %d rings, the first its outline and the rest holes", path, maxRings)
	}
	var g Polygon
	for i, r := range rings {
		at := fmt.Sprintf("%s[%d]", path, i)
		if *budget -= len(r); *budget < 0 {
			return Polygon{}, fmt.Errorf("%s: a shape has at most %d positions", at, maxPoints)
		}
		if len(r) < 4 {
			return Polygon{}, fmt.Errorf("%s: a ring has at least 4 positions, its last the same as its first", at)
		}
		ring := make([]Point, len(r))
		for k, pos := range r {
			if len(pos) != 2 {
				return Polygon{}, fmt.Errorf("%s[%d]: a position is [longitude, latitude]", at, k)
			}
			ring[k] = Point{Lat: pos[1], Lng: pos[0]}
			if err := ring[k].check(fmt.Sprintf("%s[%d]", at, k)); err != nil {
				return Polygon{}, err
			}
		}
		if ring[0] != ring[len(ring)-1] {
			return Polygon{}, fmt.Errorf("%s: a ring must be closed: its last position the same as its first", at)
		}
		if i == 0 {
			g.Outer = ring
		} else {
			g.Holes = append(g.Holes, ring)
		}
	}
	return g, nil
}

// InAny says whether v, a metadata value holding a geopoint ("geo:lat,lng")
// or a list of values of which one must do, lies in one of the shapes
// that ids name in shapes; a value that is no geopoint, or an id without
// a shape (a deleted location), holds nothing. It is $in_location, for
// validation rules and for segment and collection filters alike.
func InAny(v any, ids []string, shapes map[string]Shape) bool {
	points := []any{v}
	if l, ok := v.([]any); ok {
		points = l
	}
	for _, pv := range points {
		str, ok := pv.(string)
		if !ok {
			continue
		}
		pt, err := ParsePoint(str)
		if err != nil {
			continue
		}
		for _, id := range ids {
			if sh := shapes[id]; sh != nil && sh.Contains(pt) {
				return true
			}
		}
	}
	return false
}
