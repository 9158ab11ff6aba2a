package management

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/tenancy"
)

// Custom event schemas: the reference's ManagementProjectsCustomEventSchema.
// They live in the tenancy directory; regional instances read them through
// tenancy.Resolver.EventSchemas to validate POST /v1/events.

const eventSchemaResource = "custom_event_schema"

type eventSchemaBody struct {
	Properties map[string]tenancy.EventProperty `json:"properties"`
}

type eventSchemaView struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Schema    eventSchemaBody `json:"schema"`
	CreatedAt jsonx.Time      `json:"created_at"`
	UpdatedAt *jsonx.Time     `json:"updated_at"`
	Object    string          `json:"object"`
}

func viewEventSchema(s tenancy.EventSchema) eventSchemaView {
	props := s.Properties
	if props == nil {
		props = map[string]tenancy.EventProperty{}
	}
	return eventSchemaView{ID: s.ID, Name: s.Name, Schema: eventSchemaBody{Properties: props},
		CreatedAt: jsonx.Time{Time: s.CreatedAt}, UpdatedAt: jsonx.Ptr(s.UpdatedAt), Object: "custom-event-schema"}
}

// eventSchemaInput is a create or update body. The properties are read one
// by one so that an error names the property.
type eventSchemaInput struct {
	Name   *string         `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

// propertyInput is one sent property; nil means "not sent".
type propertyInput struct {
	Type     *string `json:"type"`
	Optional *bool   `json:"optional"`
	Deleted  *bool   `json:"deleted"`
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// properties reads schema.properties: nil when the body has no schema or
// no properties (required says whether that is an error).
func (in eventSchemaInput) properties(required bool) (map[string]json.RawMessage, error) {
	const how = " Send schema.properties as an object of properties, each {\"type\": \"string\"|\"number\"|\"date\"|" +
		"\"datetime\"|\"boolean\", \"optional\": true|false}; it may be {}."
	if isNull(in.Schema) {
		if required {
			return nil, apierr.InvalidPayload("Property schema is required." + how)
		}
		return nil, nil
	}
	var schema struct {
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(in.Schema, &schema); err != nil {
		return nil, apierr.InvalidPayload("Property schema must be an object." + how)
	}
	if isNull(schema.Properties) {
		if required {
			return nil, apierr.InvalidPayload("Property schema.properties is required." + how)
		}
		return nil, nil
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(schema.Properties, &props); err != nil || props == nil {
		return nil, apierr.InvalidPayload("Property schema.properties must be an object." + how)
	}
	return props, nil
}

// merge applies sent properties to current: a sent property is added or
// replaced field by field (a field not sent keeps its value, deleted is
// false unless sent, so sending a deleted property again restores it).
func merge(current map[string]tenancy.EventProperty, sent map[string]json.RawMessage) (map[string]tenancy.EventProperty, error) {
	out, names := mergeStart(current, sent)
	for _, name := range names {
		field := fmt.Sprintf("schema.properties[%q]", name)
		if why := badPropertyName(name); why != "" {
			return nil, apierr.InvalidPayload(fmt.Sprintf("Property schema.properties holds a property whose name %s: %q.", why, name))
		}
		if !bytes.HasPrefix(bytes.TrimSpace(sent[name]), []byte("{")) {
			return nil, apierr.InvalidPayload(fmt.Sprintf("Property %s must be an object {\"type\", \"optional\", \"deleted\"}, "+
				"got %s.", field, abbreviate(sent[name])))
		}
		var in propertyInput
		if err := json.Unmarshal(sent[name], &in); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				want := "a boolean"
				if te.Field == "type" {
					want = "a string"
				}
				return nil, apierr.InvalidPayload(fmt.Sprintf("Property %s.%s must be %s, got %s.", field, te.Field, want, te.Value))
			}
			return nil, apierr.InvalidPayload(fmt.Sprintf("Property %s must be an object {\"type\", \"optional\", \"deleted\"}.", field))
		}
		p, exists := current[name]
		if in.Type == nil && !exists {
			return nil, apierr.InvalidPayload(fmt.Sprintf("Property %s.type is required for a new property: one of %s.",
				field, strings.Join(tenancy.EventPropertyTypes, ", ")))
		}
		if in.Type != nil {
			if !tenancy.ValidEventPropertyType(*in.Type) {
				return nil, apierr.InvalidPayload(fmt.Sprintf("Property %s.type must be one of %s, got %q.",
					field, strings.Join(tenancy.EventPropertyTypes, ", "), *in.Type))
			}
			p.Type = *in.Type
		}
		if in.Optional != nil {
			p.Optional = *in.Optional
		}
		p.Deleted = in.Deleted != nil && *in.Deleted
		out[name] = p
	}
	if len(out) > tenancy.MaxEventPropertyKeys {
		return nil, apierr.InvalidPayload(fmt.Sprintf("A custom event schema has at most %d properties, deleted ones included; "+
			"this one would have %d.", tenancy.MaxEventPropertyKeys, len(out)))
	}
	return out, nil
}

func abbreviate(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "nothing"
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// badPropertyName says what is wrong with a property's name, "" when nothing.
func badPropertyName(name string) string {
	switch n := utf8.RuneCountInString(name); {
	case strings.TrimSpace(name) == "":
		return "is empty"
	case n > tenancy.MaxEventPropertyLen:
		return fmt.Sprintf("is %d characters long; at most %d are allowed", n, tenancy.MaxEventPropertyLen)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "holds a control character"
	}
	return ""
}

// reservedEvents are the events earning rules name for the platform's own
// events; a custom event of the same name would make such a rule ambiguous.
func reservedEvent(name string) bool {
	return name == "order.paid" || name == "customer.order.paid" || name == "customer.segment.entered" ||
		strings.HasPrefix(name, "customer.loyalty.tier.")
}

// checkEventName checks a schema's name, which is the event POST /v1/events
// sends, matched exactly.
func checkEventName(name string) error {
	switch n := utf8.RuneCountInString(name); {
	case strings.TrimSpace(name) == "":
		return apierr.InvalidPayload("Property name is required: the custom event's name, as POST /v1/events sends it in event.")
	case n > tenancy.MaxEventNameLen:
		return apierr.InvalidPayload(fmt.Sprintf("Property name is %d characters long; an event name has 1 to %d.", n,
			tenancy.MaxEventNameLen))
	case strings.TrimSpace(name) != name:
		return apierr.InvalidPayload(fmt.Sprintf("Property name %q starts or ends with white space; events are matched "+
			"by their exact name, so send it without.", name))
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return apierr.InvalidPayload("Property name holds a control character.")
	case reservedEvent(name):
		return apierr.InvalidPayload(fmt.Sprintf("Property name %q is one of the platform's own events, which earning rules "+
			"already name; choose another name.", name))
	}
	return nil
}

var eventSchemaRoutes = schemaRoutes[tenancy.EventSchema, eventSchemaView]{param: "schemaId", resource: eventSchemaResource,
	notFound: tenancy.ErrEventSchemaNotFound, exists: tenancy.ErrEventSchemaExists, view: viewEventSchema,
	create: tenancy.CreateEventSchema, table: tenancy.EventSchemas,
	update: tenancy.UpdateEventSchema}

func (h handler) createEventSchema(c echo.Context) error {
	return eventSchemaRoutes.createIn(h, c, func(projectID string) (tenancy.EventSchema, error) {
		var in eventSchemaInput
		if err := httpx.Bind(c, &in); err != nil {
			return tenancy.EventSchema{}, err
		}
		if in.Name == nil {
			return tenancy.EventSchema{}, checkEventName("")
		}
		if err := checkEventName(*in.Name); err != nil {
			return tenancy.EventSchema{}, err
		}
		sent, err := in.properties(true)
		if err != nil {
			return tenancy.EventSchema{}, err
		}
		props, err := merge(nil, sent)
		return tenancy.EventSchema{ProjectID: projectID, Name: *in.Name, Properties: props}, err
	}, func(s tenancy.EventSchema) error {
		return apierr.Duplicate(eventSchemaResource, fmt.Sprintf("The project already has a custom event schema named %q; "+
			"update that one (PUT …/custom-event-schemas/{id}) or choose another name.", s.Name))
	})
}

func (h handler) updateEventSchema(c echo.Context) error {
	return eventSchemaRoutes.updateIn(h, c, func() (func(*tenancy.EventSchema) (bool, error), error) {
		var in eventSchemaInput
		if err := httpx.Bind(c, &in); err != nil {
			return nil, err
		}
		sent, err := in.properties(false)
		if err != nil {
			return nil, err
		}
		return func(s *tenancy.EventSchema) (bool, error) {
			if in.Name != nil && *in.Name != s.Name {
				return false, apierr.InvalidPayload(fmt.Sprintf("Property name cannot change: this schema is %q. Create a schema "+
					"of the new name and delete this one instead.", s.Name))
			}
			if sent == nil {
				return false, nil // nothing to change
			}
			var err error
			s.Properties, err = merge(s.Properties, sent)
			return true, err
		}, nil
	})
}
