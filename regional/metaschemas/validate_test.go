package metaschemas

import (
	"reflect"
	"testing"

	"github.com/tallyhq/tally/tenancy"
)

func ptr[T any](v T) *T { return &v }

func TestProblems(t *testing.T) {
	addr := tenancy.MetadataSchema{RelatedObject: "street_address", Properties: map[string]tenancy.MetaDefinition{
		"zip": {Type: tenancy.MetaString, ExactLength: ptr(5)},
	}}
	s := tenancy.MetadataSchema{RelatedObject: "customer", Properties: map[string]tenancy.MetaDefinition{
		"location_id": {Type: tenancy.MetaString, Array: true, Eq: []any{"L1", "L2", "L3"}},
		"age":         {Type: tenancy.MetaNumber, Optional: true, Gte: ptr(18.0), Lt: ptr(130.0)},
		"vip":         {Type: tenancy.MetaBoolean, Optional: true},
		"since":       {Type: tenancy.MetaDate, Optional: true},
		"seen":        {Type: tenancy.MetaDatetime, Optional: true},
		"home":        {Type: tenancy.MetaGeopoint, Optional: true},
		"photo":       {Type: tenancy.MetaImageURL, Optional: true},
		"nick":        {Type: tenancy.MetaString, Optional: true, MinLength: ptr(2), MaxLength: ptr(4)},
		"tier":        {Type: tenancy.MetaNumber, Optional: true, Ne: []any{0.0}},
		"address":     {Type: tenancy.MetaObject, Optional: true, ObjectType: ptr("street_address")},
		"old":         {Type: tenancy.MetaNumber, Deleted: true},
	}}
	nested := func(name string) *tenancy.MetadataSchema {
		if name == "street_address" {
			return &addr
		}
		return nil
	}
	for _, c := range []struct {
		name  string
		md    map[string]any
		defOn bool
		want  []string
	}{
		{"valid", map[string]any{"location_id": []any{"L1"}, "age": 30.0, "vip": true, "since": "2024-02-29",
			"seen": "2024-02-29T10:00:00Z", "home": "geo:52.2,21.0", "photo": "https://x.io/a.png", "nick": "abc",
			"tier": 2.0, "address": map[string]any{"zip": "12345"}, "other": "kept", "old": "anything"}, false, nil},
		{"required missing, null is missing", map[string]any{"location_id": nil}, false, []string{"location_id: is required"}},
		{"not an array", map[string]any{"location_id": "L1"}, false, []string{"location_id: must be an array"}},
		{"not allowed", map[string]any{"location_id": []any{"L1", "L9"}}, false,
			[]string{"location_id: item 1 must be equal to one of L1,L2,L3 (actual value is 'L9')"}},
		{"every key named", map[string]any{"location_id": []any{}, "age": "30", "vip": "yes", "since": "2024-13-01",
			"seen": "yesterday", "home": "geo:91,0", "photo": "ftp://x", "nick": "a", "tier": 0.0,
			"address": map[string]any{"zip": "123"}}, false, []string{
			"address.zip: must be exactly 5 characters long (actual length is 3)", "age: must be a number",
			"home: must be a geopoint geo:<latitude>,<longitude> (e.g. geo:52.2297,21.0122)",
			"nick: must be at least 2 characters long (actual length is 1)", "photo: must be an http or https URL of an image",
			"seen: must be a date and time in ISO 8601 form (e.g. 2026-05-01T10:00:00Z)",
			"since: must be a date in the form YYYY-MM-DD", "tier: must not be equal to any of 0 (actual value is 0)",
			"vip: must be a boolean"}},
		{"bounds", map[string]any{"location_id": []any{}, "age": 17.0, "nick": "abcde"}, false, []string{
			"age: must be greater than or equal to 18 (actual value is 17)",
			"nick: must be at most 4 characters long (actual length is 5)"}},
		{"upper bound", map[string]any{"location_id": []any{}, "age": 130.0}, false,
			[]string{"age: must be less than 130 (actual value is 130)"}},
		{"defined only", map[string]any{"location_id": []any{}, "other": 1.0, "old": 1.0}, true, []string{
			"old: is not defined in the metadata schema, which allows defined keys only",
			"other: is not defined in the metadata schema, which allows defined keys only"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := s
			s.AllowDefinedOnly = c.defOn
			if got := Problems(s, c.md, nested); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}
