package clientapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/regional/customers"
)

// A customer-bound token (minted by the merchant's server through OAuth
// with customer=…) acts for its one customer: a request naming no customer
// is made for it, one naming another is refused. The binding is the
// customer's source_id, or its id (cust_…).

// boundField is the property a binding names a customer by.
func boundField(bound string) string {
	if strings.HasPrefix(bound, "cust_") {
		return "id"
	}
	return "source_id"
}

// bindField binds the customer in the body's field, an object or (as
// publications take it) a customer's id or source_id.
func (k *call) bindField(field string) error {
	if k.bound == "" {
		return nil
	}
	if k.body == nil {
		return apierr.InvalidPayload("The body must be a JSON object.")
	}
	raw := k.body[field]
	if absent(raw) {
		k.set(field, map[string]string{boundField(k.bound): k.bound})
		return nil
	}
	var ref string
	if json.Unmarshal(raw, &ref) == nil {
		return k.check(ref, "")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil // the twin refuses it
	}
	changed, err := k.bindObject(obj)
	if changed {
		k.set(field, obj)
	}
	return err
}

// bindObject binds a customer object: its id and source_id must name the
// bound customer; with neither, it is the bound customer.
func (k *call) bindObject(obj map[string]json.RawMessage) (changed bool, err error) {
	if err := exactKeys(obj, "customer.", customerKeys); err != nil {
		return false, err
	}
	named := false
	for _, field := range []string{"id", "source_id"} {
		var ref string
		if absent(obj[field]) || json.Unmarshal(obj[field], &ref) != nil {
			continue // a value of another type: the twin refuses it
		}
		named = true
		if err := k.check(ref, field); err != nil {
			return false, err
		}
	}
	if named {
		return false, nil
	}
	obj[boundField(k.bound)], _ = json.Marshal(k.bound)
	return true, nil
}

// check refuses a reference (by field, or by either when field is "") to
// any customer but the bound one.
func (k *call) check(ref, field string) error {
	if ref == k.bound && (field == "" || field == boundField(k.bound)) {
		return nil // it may not exist yet: the twin creates it
	}
	c, err := k.a.d.Customer(k.ctx, k.project.ID, ref)
	if err != nil && !notFound(err) {
		return err
	}
	if err == nil && names(c, ref, field) && names(c, k.bound, boundField(k.bound)) {
		return nil
	}
	return apierr.New(http.StatusForbidden, "customer_not_permitted", "Forbidden",
		fmt.Sprintf("This access token acts only for customer %q; the request names %q.", k.bound, ref))
}

// names says whether c is the customer ref names by field ("": either).
func names(c customers.Customer, ref, field string) bool {
	return (field != "source_id" && c.ID == ref) || (field != "id" && c.SourceID != nil && *c.SourceID == ref)
}

func notFound(err error) bool {
	var e *apierr.Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}
