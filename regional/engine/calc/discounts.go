package calc

import (
	"bytes"
	"encoding/json"

	lru "github.com/hashicorp/golang-lru/v2"
)

// parsed is a stored discount read: its numbers exact for the arithmetic
// (d), and the result's discount object as encoding/json reads it into a
// map (res), which answers and stored views hold. res is shared by every
// effect of the same stored bytes: it is read, never written.
type parsed struct {
	d   discount
	res map[string]any
}

// parsedDiscounts keep the stored discounts read, by their bytes: a
// qualification applies each of a page's fifty offers alone, and reading
// each one's discount twice (into the struct and into the result's map)
// was a third of its recalculation. The bytes are the key, so a changed
// discount is another entry, and the old one ages out.
var parsedDiscounts = func() *lru.Cache[string, parsed] {
	c, _ := lru.New[string, parsed](10_000)
	return c
}()

// parseDiscount reads a stored discount, once for the same bytes.
func parseDiscount(raw json.RawMessage) (parsed, error) {
	if p, ok := parsedDiscounts.Get(string(raw)); ok {
		return p, nil
	}
	var p parsed
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&p.d); err != nil {
		return p, err
	}
	_ = json.Unmarshal(raw, &p.res)
	parsedDiscounts.Add(string(raw), p)
	return p, nil
}
