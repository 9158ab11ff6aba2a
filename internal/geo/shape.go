package geo

import (
	"encoding/json"
	"fmt"
)

// ParseShape reads a location's shape as the reference writes it:
//
//	{"type":"circle","format":"distance","distance":{"center":"geo:52.2,21.0","radius":"1.5 km"}}
//	{"type":"polygon","format":"geojson","geojson":{"type":"Polygon","coordinates":[[[lng,lat],…]]}}
//
// format may be left out (each type has one); an error names the property
// (under "shape.") and what it expects.
func ParseShape(raw json.RawMessage) (Shape, error) {
	var s struct {
		Type     string `json:"type"`
		Format   string `json:"format"`
		Distance *struct {
			Center *string `json:"center"`
			Radius *string `json:"radius"`
		} `json:"distance"`
		GeoJSON json.RawMessage `json:"geojson"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("shape must be an object: a circle (type, format distance, distance) or a polygon (type, format geojson, geojson)")
	}
	switch s.Type {
	case "circle":
		if s.Format != "" && s.Format != "distance" {
			return nil, fmt.Errorf("shape.format of a circle is distance, got %q", s.Format)
		}
		if s.Distance == nil || s.Distance.Center == nil || s.Distance.Radius == nil {
			return nil, fmt.Errorf("shape.distance of a circle needs center (geo:<latitude>,<longitude>) and radius (as in \"1.5 km\")")
		}
		c, err := ParsePoint(*s.Distance.Center)
		if err != nil {
			return nil, fmt.Errorf("shape.distance.center: %w", err)
		}
		r, err := ParseRadius(*s.Distance.Radius)
		if err != nil {
			return nil, fmt.Errorf("shape.distance.radius: %w", err)
		}
		return Circle{Center: c, Radius: r}, nil
	case "polygon":
		if s.Format != "" && s.Format != "geojson" {
			return nil, fmt.Errorf("shape.format of a polygon is geojson, got %q", s.Format)
		}
		if len(s.GeoJSON) == 0 {
			return nil, fmt.Errorf("shape.geojson of a polygon is required: {type: Polygon or MultiPolygon, coordinates}")
		}
		g, err := ParseGeoJSON(s.GeoJSON)
		if err != nil {
			return nil, fmt.Errorf("shape.%w", err)
		}
		return g, nil
	}
	return nil, fmt.Errorf("shape.type must be circle or polygon, got %q", s.Type)
}
