// Package source is what the owner of a table gives exports to export its
// rows as an object of POST /v1/exports: the SQL that reads them, and the
// object's columns, filters and sorts. The SQL stays with the table's
// owner; exports runs it in the export's snapshot, in the order and with
// the filters the request asks for. The owners import this package, not
// exports (which sits above some of them), and app.go gives their
// sources to exports.NewService, as the bin's Removers are given to
// bin.New.
package source

import "github.com/tallyhq/tally/internal/filters"

// Source is one exported object type.
type Source struct {
	Name string // the exported_object, e.g. "order"
	// From is FROM … WHERE …, the rows of the project $1. A request's
	// filters are ANDed after it.
	From    string
	Columns []Column
	// Defaults are the fields a request that names none gets.
	Defaults []string
	// Filters are the fields a request's filters may name, each the SQL it
	// compares.
	Filters map[string]filters.Field
	// Sorts are the `order` values (each also with a leading - for
	// descending), the default first, each the SQL it sorts by before the
	// tiebreak (none for the creation order, which the tiebreak is). Sort
	// a text with NULL as '', so that PostgreSQL and CockroachDB, which
	// place NULLs at opposite ends, give the same file.
	Sorts []Sort
	// Metadata is the SQL of the object's metadata, which `metadata.<key>`
	// filters read; empty when it has none.
	Metadata string
	// Order is the tiebreak of every sort, the columns that order the rows
	// (comma-separated); empty is "t.id", ids being in creation order.
	Order string
}

// Kind is how a column's value is read and written in the file.
type Kind int

const (
	KindText  Kind = iota // text as stored
	KindInt               // a whole number (points)
	KindMoney             // cents, written as a decimal: 1999 is 19.99
	KindTime              // ISO 8601 in UTC with milliseconds, as the API's JSON
	KindDate              // YYYY-MM-DD
	KindJSON              // JSON text
)

// Column is one exportable field: its key in `fields` (its header in the
// file is the key in title case) and the SQL that reads it from the rows.
type Column struct {
	Key, SQL string
	Kind     Kind
}

// Text, Int, Money, Time, Date and JSON are columns of their kind.
func Text(key, sql string) Column  { return Column{Key: key, SQL: sql, Kind: KindText} }
func Int(key, sql string) Column   { return Column{Key: key, SQL: sql, Kind: KindInt} }
func Money(key, sql string) Column { return Column{Key: key, SQL: sql, Kind: KindMoney} }
func Time(key, sql string) Column  { return Column{Key: key, SQL: sql, Kind: KindTime} }
func Date(key, sql string) Column  { return Column{Key: key, SQL: sql, Kind: KindDate} }
func JSON(key, sql string) Column  { return Column{Key: key, SQL: sql, Kind: KindJSON} }

// Sort is an `order` value and the SQL it sorts by.
type Sort struct{ Key, SQL string }

// By is the sort key by sql.
func By(key, sql string) Sort { return Sort{key, sql} }

// String and DateTime are filter fields comparing col.
func String(col string) filters.Field   { return filters.Field{Kind: filters.String, Column: col} }
func DateTime(col string) filters.Field { return filters.Field{Kind: filters.DateTime, Column: col} }
