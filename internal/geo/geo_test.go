package geo

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestParsePoint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Point
		err  string
	}{
		{in: "geo:52.2297,21.0122", want: Point{52.2297, 21.0122}},
		{in: " GEO: -33.8688 , 151.2093 ", want: Point{-33.8688, 151.2093}},
		{in: "52,21", want: Point{52, 21}},
		{in: "geo:91,0", err: "latitude must be from -90 to 90"},
		{in: "geo:0,180.5", err: "longitude must be from -180 to 180"},
		{in: "geo:NaN,0", err: "latitude"},
		{in: "geo:52.2", err: "expected geo:<latitude>,<longitude>"},
		{in: "geo:a,1", err: "latitude is not a number"},
		{in: "", err: "not a point"},
	} {
		got, err := ParsePoint(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePoint(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParsePoint(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseRadius(t *testing.T) {
	for in, want := range map[string]float64{"1.54 km": 1540, "1.54km": 1540, "250": 250, "250 m": 250, "1 mi": 1609.344, "3 FT": 0.9144 * 1} {
		got, err := ParseRadius(in)
		if err != nil || math.Abs(got-want) > 1e-9 {
			t.Errorf("ParseRadius(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "km", "-1 km", "0 m", "1 parsec", "1.2.3 km", "30000 km"} {
		if got, err := ParseRadius(in); err == nil {
			t.Errorf("ParseRadius(%q) = %v; want an error", in, got)
		}
	}
}

// Distances checked against published great-circle figures.
func TestDistance(t *testing.T) {
	warsaw, berlin := Point{52.2297, 21.0122}, Point{52.5200, 13.4050}
	if d := Distance(warsaw, berlin) / 1000; math.Abs(d-517) > 3 {
		t.Errorf("Warsaw–Berlin = %.1f km, want about 517", d)
	}
	if d := Distance(Point{0, 179.9}, Point{0, -179.9}); math.Abs(d-22239) > 50 {
		t.Errorf("across the antimeridian = %.0f m, want about 22.2 km", d)
	}
}

func TestCircle(t *testing.T) {
	c := Circle{Center: Point{52.2297, 21.0122}, Radius: 1000}
	if !c.Contains(Point{52.2297, 21.0122}) || !c.Contains(Point{52.2360, 21.0122}) { // 700 m north
		t.Error("points within 1 km are outside")
	}
	if c.Contains(Point{52.2397, 21.0122}) { // 1.1 km north
		t.Error("a point 1.1 km away is inside a 1 km circle")
	}
}

func square(x0, y0, x1, y1 float64) [][]float64 {
	return [][]float64{{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}, {x0, y0}}
}

func TestPolygonHolesAndEdges(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"type": "Polygon", "coordinates": [][][]float64{square(0, 0, 10, 10), square(4, 4, 6, 6)}})
	s, err := ParseGeoJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    Point
		want bool
	}{
		{Point{Lat: 1, Lng: 1}, true},
		{Point{Lat: 5, Lng: 5}, false},    // in the hole
		{Point{Lat: 4, Lng: 5}, true},     // on the hole's edge: in the area
		{Point{Lat: 0, Lng: 5}, true},     // on the outline
		{Point{Lat: 10, Lng: 10}, true},   // a corner
		{Point{Lat: 11, Lng: 5}, false},   // north of it
		{Point{Lat: 5, Lng: -0.1}, false}, // west of it
	} {
		if got := s.Contains(tc.p); got != tc.want {
			t.Errorf("Contains(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestMultiPolygonSplitAtTheAntimeridian(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"type": "MultiPolygon", "coordinates": [][][][]float64{
		{square(170, -10, 180, 10)}, {square(-180, -10, -170, 10)}}})
	s, err := ParseGeoJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Contains(Point{0, 175}) || !s.Contains(Point{0, -175}) || s.Contains(Point{0, 0}) {
		t.Error("a multipolygon split at 180° does not hold both halves only")
	}
}

func TestParseShapeRefusesWithThePath(t *testing.T) {
	for in, says := range map[string]string{
		`[]`:                "shape must be an object",
		`{"type":"square"}`: "shape.type must be circle or polygon",
		`{"type":"circle"}`: "shape.distance of a circle needs center",
		`{"type":"circle","format":"geojson","distance":{"center":"geo:1,1","radius":"1 km"}}`:        "shape.format of a circle is distance",
		`{"type":"circle","distance":{"center":"geo:1","radius":"1 km"}}`:                             "shape.distance.center",
		`{"type":"circle","distance":{"center":"geo:1,1","radius":"far"}}`:                            "shape.distance.radius",
		`{"type":"polygon","format":"geojson"}`:                                                       "shape.geojson of a polygon is required",
		`{"type":"polygon","geojson":{"type":"Point","coordinates":[1,2]}}`:                           "shape.geojson.type must be Polygon or MultiPolygon",
		`{"type":"polygon","geojson":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1]]]}}`:   "must be closed",
		`{"type":"polygon","geojson":{"type":"Polygon","coordinates":[[[0,0],[1,0],[0,0]]]}}`:         "at least 4 positions",
		`{"type":"polygon","geojson":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,95],[0,0]]]}}`:  "latitude must be from -90 to 90",
		`{"type":"polygon","geojson":{"type":"Polygon","coordinates":[[[0,0,5],[1,0],[1,1],[0,0]]]}}`: "a position is [longitude, latitude]",
		`{"type":"polygon","geojson":{"type":"Polygon","coordinates":[1,2]}}`:                         "must be an array of rings",
	} {
		_, err := ParseShape(json.RawMessage(in))
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseShape(%s) = %v; want an error saying %q", in, err, says)
		}
	}
	s, err := ParseShape(json.RawMessage(`{"type":"circle","format":"distance","distance":{"center":"geo:52.2297,21.0122","radius":"1.54 km"}}`))
	if err != nil || s.(Circle).Radius != 1540 {
		t.Errorf("a circle = %v, %v", s, err)
	}
}
