package geo

import (
	"math/rand/v2"
	"testing"
)

// Every point a shape contains lies in its bounds, for circles of every
// size and latitude (poles and the antimeridian included) and for polygons
// with holes: the bounds are a database's prefilter, which may keep too
// much but must never drop a point the exact test holds.
func TestBoundsHoldEveryContainedPoint(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := []Shape{
		Circle{Center: Point{52.52, 13.405}, Radius: 1540},
		Circle{Center: Point{0, 0}, Radius: 5_000_000},
		Circle{Center: Point{-33.9, 151.2}, Radius: 800_000},
		Circle{Center: Point{89.5, 10}, Radius: 100_000}, // holds the pole
		Circle{Center: Point{10, 179.9}, Radius: 50_000}, // crosses the antimeridian
		Circle{Center: Point{70, -45}, Radius: 2_000_000},
		Circle{Center: Point{-60, 100}, Radius: 19_000_000}, // nearly the whole Earth
		Polygon{Outer: []Point{{0, 0}, {0, 10}, {10, 10}, {10, 0}, {0, 0}}, Holes: [][]Point{{{2, 2}, {2, 4}, {4, 4}, {4, 2}, {2, 2}}}},
		MultiPolygon{{Outer: []Point{{50, 10}, {51, 10}, {51, 11}, {50, 10}}}, {Outer: []Point{{-5, -70}, {-4, -70}, {-4, -69}, {-5, -70}}}},
	}
	for i, s := range shapes {
		b := Bounds(s)
		in := 0
		for range 200_000 {
			p := Point{Lat: r.Float64()*180 - 90, Lng: r.Float64()*360 - 180}
			if c, ok := s.(Circle); ok && r.IntN(2) == 0 { // near the centre, where most of a small circle is
				p = Point{Lat: clamp(c.Center.Lat+r.NormFloat64()*c.Radius/100000, 90), Lng: clamp(c.Center.Lng+r.NormFloat64()*c.Radius/100000, 180)}
			}
			if s.Contains(p) {
				in++
				if !b.Holds(p) {
					t.Fatalf("shape %d contains %v outside its bounds %+v", i, p, b)
				}
			}
		}
		if in == 0 {
			t.Errorf("shape %d: no random point inside, the test proves nothing", i)
		}
	}
	// The edges themselves, where a polygon's test is most generous.
	g := shapes[7].(Polygon)
	for _, p := range g.Outer {
		if !Bounds(g).Holds(p) {
			t.Fatalf("vertex %v outside the bounds", p)
		}
	}
}

func clamp(v, lim float64) float64 { return max(-lim, min(lim, v)) }
