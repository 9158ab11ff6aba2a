package geo

import "math"

// Box is a range of latitudes and one of longitudes, in degrees.
type Box struct{ MinLat, MaxLat, MinLng, MaxLng float64 }

// Holds says whether p lies in the box, its edges included.
func (b Box) Holds(p Point) bool {
	return p.Lat >= b.MinLat && p.Lat <= b.MaxLat && p.Lng >= b.MinLng && p.Lng <= b.MaxLng
}

// pad widens boxes past what rounding could put outside them: a polygon's
// edge test accepts points 1e-12° off the edge, and the haversine's last
// bits differ from the spherical cap's bound below.
const pad = 1e-9

// whole is every point.
var whole = Box{MinLat: -90 - pad, MaxLat: 90 + pad, MinLng: -180 - pad, MaxLng: 180 + pad}

// Bounds is a box that holds every point s contains: what a database can
// test with numeric comparisons alone, before the exact test (Contains)
// refines it. It may hold more than s (a circle's corners, a polygon's
// holes, a cap over a pole or across the antimeridian given the whole
// range of longitudes); it never holds less. A shape of a type it does not
// know is bounded by the whole Earth.
func Bounds(s Shape) Box {
	switch g := s.(type) {
	case Circle:
		return circleBounds(g)
	case Polygon:
		return ringBounds(g.Outer)
	case MultiPolygon:
		if len(g) == 0 {
			return Box{MinLat: 1, MaxLat: -1, MinLng: 1, MaxLng: -1} // holds nothing
		}
		b := ringBounds(g[0].Outer)
		for _, p := range g[1:] {
			o := ringBounds(p.Outer)
			b = Box{math.Min(b.MinLat, o.MinLat), math.Max(b.MaxLat, o.MaxLat), math.Min(b.MinLng, o.MinLng), math.Max(b.MaxLng, o.MaxLng)}
		}
		return b
	}
	return whole
}

// ringBounds are the extremes of a ring's positions: a polygon's points
// lie within its outline's.
func ringBounds(ring []Point) Box {
	if len(ring) == 0 {
		return Box{MinLat: 1, MaxLat: -1, MinLng: 1, MaxLng: -1}
	}
	b := Box{MinLat: ring[0].Lat, MaxLat: ring[0].Lat, MinLng: ring[0].Lng, MaxLng: ring[0].Lng}
	for _, p := range ring[1:] {
		b.MinLat, b.MaxLat = math.Min(b.MinLat, p.Lat), math.Max(b.MaxLat, p.Lat)
		b.MinLng, b.MaxLng = math.Min(b.MinLng, p.Lng), math.Max(b.MaxLng, p.Lng)
	}
	return Box{b.MinLat - pad, b.MaxLat + pad, b.MinLng - pad, b.MaxLng + pad}
}

// circleBounds bound a spherical cap of angular radius δ around (φ, λ):
// its latitudes are φ ± δ, and its longitudes λ ± asin(sin δ / cos φ), the
// meridians tangent to it, unless it holds a pole (every longitude). A cap
// that crosses the antimeridian is given every longitude too, rather than
// two ranges: a wider prefilter, still exact after the refinement.
func circleBounds(c Circle) Box {
	rad := math.Pi / 180
	d := c.Radius / EarthRadius // radians
	d = d*(1+1e-9) + 1e-12      // rounding of Distance
	dLat := d / rad
	b := Box{MinLat: c.Center.Lat - dLat - pad, MaxLat: c.Center.Lat + dLat + pad, MinLng: whole.MinLng, MaxLng: whole.MaxLng}
	if d >= math.Pi/2 || math.Abs(c.Center.Lat)+dLat >= 90 {
		return b
	}
	s := math.Sin(d) / math.Cos(c.Center.Lat*rad)
	if s >= 1 {
		return b
	}
	dLng := math.Asin(s)/rad*(1+1e-9) + pad
	if c.Center.Lng-dLng < -180 || c.Center.Lng+dLng > 180 {
		return b
	}
	b.MinLng, b.MaxLng = c.Center.Lng-dLng, c.Center.Lng+dLng
	return b
}
