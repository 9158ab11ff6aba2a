package metaschemas

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tallyhq/tally/tenancy"
)

// Problems lists what is wrong with md against schema, one "key: what"
// per failing key, sorted by key; nil when md passes. Required
// (non-optional) definitions must be present (a null is absent). nested
// finds the custom schema a definition's object_type names (nil: none),
// whose definitions check the object one level down.
func Problems(schema tenancy.MetadataSchema, md map[string]any, nested func(name string) *tenancy.MetadataSchema) []string {
	return problems(schema, md, nested, "", true)
}

func problems(schema tenancy.MetadataSchema, md map[string]any, nested func(string) *tenancy.MetadataSchema, prefix string,
	descend bool) []string {
	keys := make([]string, 0, len(schema.Properties)+len(md))
	seen := map[string]bool{}
	for k := range schema.Properties {
		keys, seen[k] = append(keys, k), true
	}
	for k := range md {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		v, sent := md[k]
		d, defined := schema.Properties[k]
		if defined && d.Deleted {
			defined = false
		}
		var why string
		switch {
		case !defined:
			if sent && schema.AllowDefinedOnly {
				why = "is not defined in the metadata schema, which allows defined keys only"
			}
		case !sent || v == nil:
			if !d.Optional {
				why = "is required"
			}
		default:
			why = checkValue(d, v, nested, prefix+k, descend, &out)
		}
		if why != "" {
			out = append(out, prefix+k+": "+why)
		}
	}
	return out
}

// checkValue says what is wrong with v for d ("" when nothing); the
// problems of a nested object's own keys go to out under their path.
func checkValue(d tenancy.MetaDefinition, v any, nested func(string) *tenancy.MetadataSchema, path string, descend bool,
	out *[]string) string {
	if !d.Array {
		return checkOne(d, v, nested, path, descend, out)
	}
	items, ok := v.([]any)
	if !ok {
		return "must be an array"
	}
	for i, item := range items {
		if why := checkOne(d, item, nested, fmt.Sprintf("%s[%d]", path, i), descend, out); why != "" {
			return fmt.Sprintf("item %d %s", i, why)
		}
	}
	return ""
}

func checkOne(d tenancy.MetaDefinition, v any, nested func(string) *tenancy.MetadataSchema, path string, descend bool,
	out *[]string) string {
	switch d.Type {
	case tenancy.MetaString:
		s, ok := v.(string)
		if !ok {
			return "must be a string"
		}
		return checkString(d, s)
	case tenancy.MetaNumber:
		n, ok := number(v)
		if !ok {
			return "must be a number"
		}
		return checkNumber(d, n)
	case tenancy.MetaBoolean:
		if _, ok := v.(bool); !ok {
			return "must be a boolean"
		}
	case tenancy.MetaDate:
		if s, ok := v.(string); !ok || !isDate(s) {
			return "must be a date in the form YYYY-MM-DD"
		}
	case tenancy.MetaDatetime:
		if s, ok := v.(string); !ok || !isDatetime(s) {
			return "must be a date and time in ISO 8601 form (e.g. 2026-05-01T10:00:00Z)"
		}
	case tenancy.MetaGeopoint:
		if s, ok := v.(string); !ok || !isGeopoint(s) {
			return "must be a geopoint geo:<latitude>,<longitude> (e.g. geo:52.2297,21.0122)"
		}
	case tenancy.MetaImageURL:
		if s, ok := v.(string); !ok || !isHTTPURL(s) {
			return "must be an http or https URL of an image"
		}
	case tenancy.MetaObject:
		o, ok := v.(map[string]any)
		if !ok {
			return "must be an object"
		}
		// One level of nesting: a custom object's own object keys are
		// not checked further.
		if descend && d.ObjectType != nil && nested != nil {
			if s := nested(*d.ObjectType); s != nil {
				*out = append(*out, problems(*s, o, nested, path+".", false)...)
			}
		}
	}
	return ""
}

func checkString(d tenancy.MetaDefinition, s string) string {
	n := utf8.RuneCountInString(s)
	switch {
	case d.ExactLength != nil && n != *d.ExactLength:
		return fmt.Sprintf("must be exactly %d characters long (actual length is %d)", *d.ExactLength, n)
	case d.MinLength != nil && n < *d.MinLength:
		return fmt.Sprintf("must be at least %d characters long (actual length is %d)", *d.MinLength, n)
	case d.MaxLength != nil && n > *d.MaxLength:
		return fmt.Sprintf("must be at most %d characters long (actual length is %d)", *d.MaxLength, n)
	}
	if len(d.Eq) > 0 && !contains(d.Eq, s) {
		return fmt.Sprintf("must be equal to one of %s (actual value is '%s')", list(d.Eq), s)
	}
	if len(d.Ne) > 0 && contains(d.Ne, s) {
		return fmt.Sprintf("must not be equal to any of %s (actual value is '%s')", list(d.Ne), s)
	}
	return ""
}

func checkNumber(d tenancy.MetaDefinition, n float64) string {
	shown := strconv.FormatFloat(n, 'f', -1, 64)
	bound := func(b *float64, ok func(float64) bool, word string) string {
		if b != nil && !ok(*b) {
			return fmt.Sprintf("must be %s %s (actual value is %s)", word, strconv.FormatFloat(*b, 'f', -1, 64), shown)
		}
		return ""
	}
	for _, why := range []string{
		bound(d.Lt, func(b float64) bool { return n < b }, "less than"),
		bound(d.Lte, func(b float64) bool { return n <= b }, "less than or equal to"),
		bound(d.Gt, func(b float64) bool { return n > b }, "greater than"),
		bound(d.Gte, func(b float64) bool { return n >= b }, "greater than or equal to"),
	} {
		if why != "" {
			return why
		}
	}
	if len(d.Eq) > 0 && !contains(d.Eq, n) {
		return fmt.Sprintf("must be equal to one of %s (actual value is %s)", list(d.Eq), shown)
	}
	if len(d.Ne) > 0 && contains(d.Ne, n) {
		return fmt.Sprintf("must not be equal to any of %s (actual value is %s)", list(d.Ne), shown)
	}
	return ""
}

// number reads a JSON number however the caller decoded it.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func contains(vals []any, v any) bool {
	for _, e := range vals {
		if n, ok := number(e); ok {
			if f, isNum := v.(float64); isNum && f == n {
				return true
			}
			continue
		}
		if e == v {
			return true
		}
	}
	return false
}

func list(vals []any) string {
	s := make([]string, len(vals))
	for i, v := range vals {
		if n, ok := number(v); ok {
			s[i] = strconv.FormatFloat(n, 'f', -1, 64)
		} else {
			s[i] = fmt.Sprint(v)
		}
	}
	return strings.Join(s, ",")
}

func isDate(s string) bool {
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}

func isDatetime(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

func isGeopoint(s string) bool {
	rest, ok := strings.CutPrefix(s, "geo:")
	if !ok {
		return false
	}
	lat, lng, ok := strings.Cut(rest, ",")
	if !ok {
		return false
	}
	la, err1 := strconv.ParseFloat(strings.TrimSpace(lat), 64)
	lo, err2 := strconv.ParseFloat(strings.TrimSpace(lng), 64)
	return err1 == nil && err2 == nil && la >= -90 && la <= 90 && lo >= -180 && lo <= 180
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
