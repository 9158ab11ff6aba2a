package segments

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/targeting"
	"github.com/tallyhq/tally/regional/customers"
)

// Segment types, as the interface names them.
const (
	Static     = "static"
	AutoUpdate = "auto-update"
	Passive    = "passive"
)

// The reference's limits: a static segment lists at most MaxStatic
// customers; a project holds at most MaxFilterSegments filter segments
// (auto-update and passive together).
const (
	MaxStatic         = 20000
	MaxFilterSegments = 100
)

// Initial sync statuses: a static segment is whole when created, a filter
// one once its first evaluation's job is done.
const (
	SyncDone       = "DONE"
	SyncInProgress = "IN_PROGRESS"
)

// Segment is a stored segment.
type Segment struct {
	ID           string
	Name         string
	Type         string
	Filter       json.RawMessage // nil for a static segment
	SyncActionID *string
	CreatedAt    time.Time
}

// View is the reference's Segment, with initial_sync_status as its
// examples show it.
type View struct {
	ID                string          `json:"id"`
	Name              string          `json:"name"`
	CreatedAt         jsonx.Time      `json:"created_at"`
	UpdatedAt         *jsonx.Time     `json:"updated_at"`
	Type              string          `json:"type"`
	Filter            json.RawMessage `json:"filter"`
	InitialSyncStatus string          `json:"initial_sync_status"`
	Object            string          `json:"object"`
}

// view renders s with its sync status.
func (s Segment) view(status string) View {
	f := s.Filter
	if f == nil {
		f = json.RawMessage("null")
	}
	return View{ID: s.ID, Name: s.Name, CreatedAt: jsonx.Time{Time: s.CreatedAt}, Type: s.Type, Filter: f,
		InitialSyncStatus: status, Object: "segment"}
}

// Simple is the reference's SimpleSegment: a customer's segments, a
// notice's segment.
type Simple struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Object string `json:"object"`
}

func (s Segment) simple() Simple { return Simple{ID: s.ID, Name: s.Name, Object: "segment"} }

// Body is POST /v1/segments: a static segment's customers or a filter
// segment's filter.
type Body struct {
	Name      *string         `json:"name"`
	Type      *string         `json:"type"`
	Filter    json.RawMessage `json:"filter"`
	Customers []string        `json:"customers"`
}

// Filter is a segment's compiled filter over customers.
type Filter = targeting.Filter[customers.Customer]

// check validates b: its type (given, or static for customers and
// auto-update for a filter), and the filter compiled.
func (b Body) check() (typ string, f *Filter, err error) {
	if b.Name == nil || strings.TrimSpace(*b.Name) == "" {
		return "", nil, apierr.InvalidPayload("name: a segment needs a name.")
	}
	if len(*b.Name) > 1000 {
		return "", nil, apierr.InvalidPayload("name: longer than 1000 characters.")
	}
	hasFilter := len(b.Filter) > 0 && string(b.Filter) != "null"
	switch {
	case b.Type != nil:
		typ = *b.Type
	case hasFilter:
		typ = AutoUpdate
	default:
		typ = Static
	}
	switch typ {
	case Static:
		if hasFilter {
			return "", nil, apierr.InvalidPayload("filter: a static segment lists its customers; give customers, not a filter.")
		}
		if len(b.Customers) > MaxStatic {
			return "", nil, apierr.InvalidPayload(fmt.Sprintf("customers: a static segment holds at most %d customers, got %d.",
				MaxStatic, len(b.Customers)))
		}
		return typ, nil, nil
	case AutoUpdate, Passive:
		if len(b.Customers) > 0 {
			return "", nil, apierr.InvalidPayload("customers: a " + typ + " segment is defined by its filter; customers are for static segments.")
		}
		f, err := targeting.Parse(b.Filter, customers.Targets, "filter")
		return typ, f, err
	}
	return "", nil, apierr.InvalidPayload(fmt.Sprintf("type: must be static, auto-update or passive, got %q.", typ))
}
