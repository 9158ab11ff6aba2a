package customers

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/jsonx"
)

// Address is a customer's postal address.
type Address struct {
	City       *string `json:"city"`
	State      *string `json:"state"`
	Line1      *string `json:"line_1"`
	Line2      *string `json:"line_2"`
	Country    *string `json:"country"`
	PostalCode *string `json:"postal_code"`
}

// Attrs are the customer's editable properties (stored as JSONB).
type Attrs struct {
	Name        *string        `json:"name"`
	Description *string        `json:"description"`
	Email       *string        `json:"email"`
	Phone       *string        `json:"phone"`
	Birthday    *string        `json:"birthday"`
	Birthdate   *string        `json:"birthdate"`
	Address     *Address       `json:"address"`
	Metadata    map[string]any `json:"metadata"`
}

// Customer is a project's customer.
type Customer struct {
	ID        string
	SourceID  *string
	Attrs     Attrs
	CreatedAt time.Time
	UpdatedAt *time.Time
	// EventCounts are the counts of custom events by name that a
	// segment's filter compares (events.<name>.count), loaded by the
	// segments for the names their filters use (nil: none sent).
	EventCounts map[string]int
}

// View is the reference shape of a customer (CustomerWithSummaryLoyaltyReferrals).
type View struct {
	ID       string  `json:"id"`
	SourceID *string `json:"source_id"`
	// The properties are the customer's Attrs as stored, in the same
	// order (Metadata never null).
	Attrs
	Summary        any            `json:"summary"`
	Loyalty        any            `json:"loyalty"`
	Referrals      any            `json:"referrals"`
	SystemMetadata map[string]any `json:"system_metadata"`
	CreatedAt      jsonx.Time     `json:"created_at"`
	UpdatedAt      *jsonx.Time    `json:"updated_at"`
	Assets         any            `json:"assets"`
	Object         string         `json:"object"`
}

// View renders c.
func (c Customer) View() View {
	a := c.Attrs
	if a.Metadata == nil {
		a.Metadata = map[string]any{}
	}
	return View{
		ID: c.ID, SourceID: c.SourceID, Attrs: a, SystemMetadata: map[string]any{}, CreatedAt: jsonx.Time{Time: c.CreatedAt},
		UpdatedAt: jsonx.Ptr(c.UpdatedAt), Object: "customer",
	}
}

// Patch is a create or update request: the properties present are set, an
// explicit null clears one, and absent ones are left alone.
type Patch struct {
	ID       *string
	SourceID *string
	fields   map[string]json.RawMessage
	// mergeMetadata adds the patch's metadata keys to the customer's
	// (MergeMetadata), where a request's metadata replaces them.
	mergeMetadata bool
	// whole, when set, is every property the patch sets, checked: a CSV
	// row, which overwrites a customer whole (WholePatch). fields is
	// then nil.
	whole *Attrs
}

// WholePatch is the patch that overwrites a customer's properties with a
// (an import's row), checked as Apply checks a request's: it is built
// typed, with no JSON between the file and the customer.
func WholePatch(id, sourceID *string, a Attrs) (*Patch, error) {
	for k, v := range map[string]*string{"name": a.Name, "description": a.Description, "email": a.Email, "phone": a.Phone,
		"birthday": a.Birthday, "birthdate": a.Birthdate} {
		if err := checkString(k, v); err != nil {
			return nil, err
		}
	}
	return &Patch{ID: id, SourceID: sourceID, whole: &a}, nil
}

// checkString is Apply's check of a string property.
func checkString(k string, v *string) error {
	if v != nil && (k == "birthday" || k == "birthdate") {
		if _, err := time.Parse("2006-01-02", *v); err != nil {
			return apierr.InvalidPayload(fmt.Sprintf("Property %s must be a date in the form YYYY-MM-DD, got %q.", k, *v))
		}
	}
	if v != nil && len(*v) > 10000 {
		return apierr.InvalidPayload(fmt.Sprintf("Property %s is longer than 10000 characters.", k))
	}
	return nil
}

// clone is a with its own address and metadata map, so that a write into
// one (a metadata merge) is not a write into the other.
func (a Attrs) clone() Attrs {
	if a.Address != nil {
		addr := *a.Address
		a.Address = &addr
	}
	if a.Metadata != nil {
		a.Metadata = maps.Clone(a.Metadata)
	}
	return a
}

// sets says whether the patch sets property k.
func (p *Patch) sets(k string) bool {
	if p.whole != nil {
		return k != "id" && k != "source_id" && k != "object"
	}
	_, ok := p.fields[k]
	return ok
}

// UnmarshalJSON keeps which properties the request named.
func (p *Patch) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &p.fields); err != nil {
		return err
	}
	for _, k := range []string{"id", "source_id"} {
		raw, ok := p.fields[k]
		if !ok || string(raw) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return apierr.InvalidPayload(fmt.Sprintf("Property %s must be a string.", k))
		}
		if k == "id" {
			p.ID = &s
		} else {
			p.SourceID = &s
		}
	}
	return nil
}

// Apply sets the named properties of a, checking their types and formats.
func (p *Patch) Apply(a *Attrs) error {
	if p.whole != nil {
		*a = p.whole.clone()
		return nil
	}
	strs := map[string]**string{"name": &a.Name, "description": &a.Description, "email": &a.Email, "phone": &a.Phone,
		"birthday": &a.Birthday, "birthdate": &a.Birthdate}
	for k, dst := range strs {
		raw, ok := p.fields[k]
		if !ok {
			continue
		}
		var v *string
		if err := json.Unmarshal(raw, &v); err != nil {
			return apierr.InvalidPayload(fmt.Sprintf("Property %s must be a string or null.", k))
		}
		if err := checkString(k, v); err != nil {
			return err
		}
		*dst = v
	}
	if raw, ok := p.fields["address"]; ok {
		var addr *Address
		if err := json.Unmarshal(raw, &addr); err != nil {
			return apierr.InvalidPayload("Property address must be an object of strings (city, state, line_1, line_2, country, postal_code) or null.")
		}
		a.Address = addr
	}
	if raw, ok := p.fields["metadata"]; ok {
		var md map[string]any
		if err := json.Unmarshal(raw, &md); err != nil {
			return apierr.InvalidPayload("Property metadata must be an object or null.")
		}
		if p.mergeMetadata && a.Metadata != nil {
			maps.Copy(a.Metadata, md)
			md = a.Metadata
		}
		a.Metadata = md
	}
	return nil
}

// Simple is the reference's SimpleCustomer, as redemptions name their
// customer.
func (c Customer) Simple() map[string]any {
	meta := c.Attrs.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	return map[string]any{"id": c.ID, "name": c.Attrs.Name, "email": c.Attrs.Email, "source_id": c.SourceID,
		"metadata": meta, "object": "customer"}
}

// Changes reports whether the patch sets anything besides the id or
// source_id that name the customer: a write that only names one (a custom
// event's customer) need not update it.
func (p *Patch) Changes() bool {
	if p.whole != nil {
		return true
	}
	for k := range p.fields {
		if k != "id" && k != "source_id" && k != "object" {
			return true
		}
	}
	return false
}
