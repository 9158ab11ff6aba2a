package exports

import (
	"encoding/json"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/engine/stacked"
	"github.com/tallyhq/tally/regional/exports/source"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/redemptions"
	"github.com/tallyhq/tally/regional/validation"
	"github.com/tallyhq/tally/regional/vouchers"
)

// kind is how a column's value is read and written in the file.
type kind = source.Kind

const (
	kText  = source.KindText
	kInt   = source.KindInt
	kMoney = source.KindMoney
	kTime  = source.KindTime
	kDate  = source.KindDate
	kJSON  = source.KindJSON
)

// column is one exportable field: its key in `fields`, its label in the
// file's header row, and the SQL that reads it from the object's rows (t).
type column struct {
	key, label, sql string
	kind            kind
}

// object is an exportable object type.
type object struct {
	name     string
	from     string // FROM … WHERE …: the project is $1
	columns  []column
	defaults []string
	filters  map[string]filters.Field
	// sorts are the `order` values (each also with a leading - for
	// descending), the default first, as the reference lists them for the
	// object: each the SQL it sorts by before the tiebreak (none for the
	// creation order, which the tiebreak is). A text is sorted with NULL as
	// '', so PostgreSQL and CockroachDB, which place NULLs at opposite ends,
	// give the same file.
	sorts []sortBy
	// metadata is the SQL of the object's metadata, which `metadata.<key>`
	// filters read; empty when the object has none.
	metadata string
	// tiebreak is the columns that order the rows after every sort; empty
	// is "t.id".
	tiebreak string
}

// fromSource is the object an owner's source exports.
func fromSource(src source.Source) object {
	o := object{name: src.Name, from: src.From, defaults: src.Defaults, filters: src.Filters,
		metadata: src.Metadata, tiebreak: src.Order}
	for _, c := range src.Columns {
		o.columns = append(o.columns, column{key: c.Key, sql: c.SQL, kind: c.Kind})
	}
	o.columns = cols(o.columns...)
	for _, x := range src.Sorts {
		o.sorts = append(o.sorts, by(x.Key, x.SQL))
	}
	return o
}

type sortBy struct{ key, sql string }

func by(key, sql string) sortBy { return sortBy{key, sql} }

func (o object) column(key string) (column, bool) {
	for _, c := range o.columns {
		if c.key == key {
			return c, true
		}
	}
	return column{}, false
}

func (o object) keys(withoutCampaign bool) string {
	var ks []string
	for _, c := range o.columns {
		if !(withoutCampaign && c.key == "campaign_id") {
			ks = append(ks, c.key)
		}
	}
	return strings.Join(ks, ", ")
}

// order checks an `order` value, returning the sort it names.
func (o object) order(v string) (sortBy, bool) {
	for _, x := range o.sorts {
		if v == x.key || v == "-"+x.key {
			return x, true
		}
	}
	return sortBy{}, false
}

// orderNames lists the object's `order` values, for errors.
func (o object) orderNames() string {
	var ns []string
	for _, x := range o.sorts {
		ns = append(ns, x.key, "-"+x.key)
	}
	return strings.Join(ns, ", ")
}

// orderBy is the ORDER BY of an export in order v (checked): what v sorts
// by, then the tiebreak, all ascending or all descending.
func (o object) orderBy(v string) string {
	dir := " ASC"
	if strings.HasPrefix(v, "-") {
		dir = " DESC"
	}
	x, _ := o.order(v)
	var parts []string
	if x.sql != "" {
		parts = append(parts, x.sql+dir)
	}
	for _, c := range strings.Split(o.orderColumn(), ", ") {
		parts = append(parts, c+dir)
	}
	return strings.Join(parts, ", ")
}

// metadataFilters adds to the object's filters a `metadata.<key>` filter
// for each such key raw (the request's filters) names: a string field of
// the metadata's value at key, as text. A key is written into the SQL as an
// escape string literal (escapeString); one that is empty, longer than 100 bytes or holds a
// control character is not a filter, and the parser refuses it by name.
func (o object) metadataFilters(raw json.RawMessage) map[string]filters.Field {
	var top map[string]json.RawMessage
	if o.metadata == "" || json.Unmarshal(raw, &top) != nil {
		return o.filters
	}
	var out map[string]filters.Field
	for name := range top {
		key, ok := strings.CutPrefix(name, "metadata.")
		if !ok || key == "" || len(key) > 100 || strings.ContainsFunc(key, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			continue
		}
		if out == nil {
			out = maps.Clone(o.filters)
		}
		out[name] = filters.Field{Kind: filters.String, Column: "(" + o.metadata + ")->>" + escapeString(key)}
	}
	if out == nil {
		return o.filters
	}
	return out
}

// escapeString is s as an escape string literal (E'…', in PostgreSQL and
// CockroachDB alike): its quotes doubled and its backslashes too, it reads
// the same whatever standard_conforming_strings says. In a plain '…'
// literal with that setting off, a backslash escapes the quote after it,
// and a key ending one lets the rest of the key run as SQL.
func escapeString(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// label is the header of a column: the key in title case, "id" as "ID"
// (source_id is "Source ID"), as the reference's file shows ("ID,Code,
// Voucher Type,Value").
func label(key string) string {
	words := strings.Split(key, "_")
	for i, w := range words {
		switch w {
		case "id":
			words[i] = "ID"
		case "":
		default:
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, " ")
}

func cols(specs ...column) []column {
	for i := range specs {
		if specs[i].label == "" {
			specs[i].label = label(specs[i].key)
		}
	}
	return specs
}

func text(key, sql string) column  { return column{key: key, sql: sql, kind: kText} }
func num(key, sql string) column   { return column{key: key, sql: sql, kind: kInt} }
func money(key, sql string) column { return column{key: key, sql: sql, kind: kMoney} }
func at(key, sql string) column    { return column{key: key, sql: sql, kind: kTime} }
func js(key, sql string) column    { return column{key: key, sql: sql, kind: kJSON} }

var (
	str  = func(col string) filters.Field { return filters.Field{Kind: filters.String, Column: col} }
	when = func(col string) filters.Field { return filters.Field{Kind: filters.DateTime, Column: col} }
)

// Exported object types.
const (
	VoucherTransactions = "voucher_transactions"
	PointsExpiration    = "points_expiration"
	Order               = "order"
	Customer            = "customer"
	Product             = "product"
	SKU                 = "sku"
	Voucher             = "voucher"
	Redemption          = "redemption"
	Publication         = "publication"
)

// decimal writes an amount in cents as a decimal with two places, as
// money is written elsewhere in the files.
// j is a JSON value; one that is not a number (stored as given) is empty
// rather than a failed cast that would fail the whole export.
func decimal(j string) string {
	return "CASE WHEN jsonb_typeof(" + j + ") = 'number' THEN CAST(ROUND(CAST(CAST(" + j + " AS TEXT) AS DECIMAL) / 100, 2) AS TEXT) END"
}

// boolText writes a boolean as true or false.
func boolText(sql string) string { return "CASE WHEN " + sql + " THEN 'true' ELSE 'false' END" }

// builtins are the objects exports reads itself; the others are the
// sources their owners give NewService. Rows come in id order, which is
// creation order (ids are time-ordered), so `created_at` and `-created_at`
// read an index instead of sorting the table.
var builtins = map[string]object{
	// Vouchers (discount and gift, not those in the bin) and loyalty
	// cards, as GET /v1/vouchers shows them. value is the discount's
	// figure for its type (AMOUNT and FIXED money, PERCENT a percentage,
	// UNIT a count), a gift card's amount, or a card's points.
	Voucher: {
		name: Voucher,
		from: `FROM (` + vouchers.ExportRows + `
			UNION ALL ` + loyalty.ExportCardRows + `) t` +
			campaigns.JoinForExport("k", "t.campaign_id") + customers.JoinForExport("cu", "t.holder_id") + `
			WHERE (t.campaign_id IS NULL OR k.deleted_at IS NULL)`, // a deleted campaign's vouchers are gone from the API
		columns: cols(
			text("id", "t.id"), text("code", "t.code"), text("voucher_type", "t.voucher_type"),
			text("value", `CASE t.voucher_type WHEN 'LOYALTY_CARD' THEN CAST(t.points AS TEXT)
				WHEN 'GIFT_VOUCHER' THEN `+decimal("t.attrs->'gift'->'amount'")+`
				ELSE CASE t.attrs->'discount'->>'type' WHEN 'AMOUNT' THEN `+decimal("t.attrs->'discount'->'amount_off'")+`
					WHEN 'FIXED' THEN `+decimal("t.attrs->'discount'->'fixed_amount'")+`
					WHEN 'PERCENT' THEN t.attrs->'discount'->>'percent_off'
					WHEN 'UNIT' THEN t.attrs->'discount'->>'unit_off' END END`),
			text("discount_type", "t.attrs->'discount'->>'type'"), text("campaign", "k.name"), text("campaign_id", "t.campaign_id"),
			text("category", "t.category"), at("start_date", "CAST(t.attrs->>'start_date' AS TIMESTAMPTZ)"),
			at("expiration_date", "CAST(t.attrs->>'expiration_date' AS TIMESTAMPTZ)"),
			text("gift_balance", decimal("t.attrs->'gift'->'balance'")), num("loyalty_balance", "t.points"),
			num("redemption_quantity", "t.redemption_quantity"), num("redemption_count", "t.redeemed_quantity"),
			text("active", boolText("t.active")), js("metadata", "t.metadata"),
			text("is_referral_code", boolText("k.campaign_type IS NOT NULL AND k.campaign_type = 'REFERRAL_PROGRAM'")),
			at("created_at", "t.created_at"), at("updated_at", "t.updated_at"),
			text("validity_timeframe_interval", "t.attrs->'validity_timeframe'->>'interval'"),
			text("validity_timeframe_duration", "t.attrs->'validity_timeframe'->>'duration'"),
			js("validity_day_of_week", "t.attrs->'validity_day_of_week'"),
			text("discount_amount_limit", decimal("t.attrs->'discount'->'amount_limit'")),
			text("additional_info", "t.attrs->>'additional_info'"), text("customer_id", "t.holder_id"),
			text("customer_source_id", "cu.source_id"), text("discount_effect", "t.attrs->'discount'->>'effect'"),
			text("discount_unit_type", "t.attrs->'discount'->>'unit_type'"),
			text("discount_unit_effect", "CASE t.attrs->'discount'->>'type' WHEN 'UNIT' THEN t.attrs->'discount'->>'effect' END"),
			// The formula of the discount's own figure, as its value is.
			text("formula", `CASE t.attrs->'discount'->>'type' WHEN 'AMOUNT' THEN t.attrs->'discount'->>'amount_off_formula'
				WHEN 'PERCENT' THEN t.attrs->'discount'->>'percent_off_formula'
				WHEN 'FIXED' THEN t.attrs->'discount'->>'fixed_amount_formula'
				WHEN 'UNIT' THEN t.attrs->'discount'->>'unit_off_formula' END`),
			// The rules assigned to the voucher itself, comma-separated in
			// the order they were assigned.
			text("validation_rules_id", validation.ExportRuleIDs("t.id"))),
		defaults: []string{"code", "voucher_type", "value", "discount_type"},
		filters: map[string]filters.Field{"created_at": when("t.created_at"), "updated_at": when("t.updated_at"), "id": str("t.id"),
			"code": str("t.code"), "campaign_id": str("t.campaign_id"), "voucher_type": str("t.voucher_type"),
			"category": str("t.category"), "customer_id": str("t.holder_id")},
		sorts: []sortBy{by("created_at", ""), by("updated_at", "COALESCE(t.updated_at, t.created_at)"),
			by("code", "COALESCE(t.code, '')")},
		metadata: "t.metadata",
	},
	// Redemptions as GET /v1/redemptions lists them: each redeemable of a
	// stacked redemption (SUCCESS or FAILURE) and each reward a loyalty
	// card paid for (POST /v1/loyalties/members/{id}/redemption).
	Redemption: {
		name: Redemption,
		from: `FROM (` + stacked.ExportRows + `
			UNION ALL ` + redemptions.ExportRows + `) t` +
			campaigns.JoinForExport("k", "t.campaign_id") + customers.JoinForExport("cu", "t.customer_id") +
			orders.JoinForExport("o", "t.order_id") + `
			WHERE TRUE`,
		columns: cols(
			text("id", "t.id"), text("object", "'redemption'"), at("date", "t.created_at"), text("voucher_code", "t.code"),
			text("campaign", "k.name"), text("campaign_id", "t.campaign_id"), text("promotion_tier_id", "t.promotion_tier_id"),
			text("customer_id", "t.customer_id"), text("customer_source_id", "cu.source_id"), text("customer_name", "cu.name"),
			text("tracking_id", "t.tracking_id"), text("order_id", "t.order_id"), money("order_amount", "o.amount"),
			money("gift_amount", "NULLIF(t.gift_amount, 0)"), num("loyalty_points", "t.points"), text("result", "t.result"),
			text("failure_code", "t.failure_code"), text("failure_message", "t.failure_message"), js("metadata", "t.metadata")),
		defaults: []string{"id", "object", "voucher_code", "customer_id", "date", "result"},
		filters: map[string]filters.Field{"created_at": when("t.created_at"), "id": str("t.id"), "voucher_code": str("t.code"),
			"customer_id": str("t.customer_id"), "campaign_id": str("t.campaign_id"), "result": str("t.result"),
			"tracking_id": str("t.tracking_id"), "order_id": str("t.order_id")},
		sorts: []sortBy{by("created_at", ""), by("id", ""), by("voucher_code", "COALESCE(t.code, '')"),
			by("tracking_id", "COALESCE(t.tracking_id, '')"), by("customer_id", "COALESCE(t.customer_id, '')")},
		metadata: "t.metadata",
	},
}

// orderColumn is the column rows are ordered by (id order is creation order).
func (o object) orderColumn() string {
	if o.tiebreak != "" {
		return o.tiebreak
	}
	return "t.id"
}

// objectNames lists the exportable objects, for errors.
const objectNames = "voucher, redemption, publication, voucher_transactions, points_expiration, order, customer, product, sku"

// cell holds one column's value of the current row, scanned in place.
type cell struct {
	kind kind
	text pgtype.Text
	int8 pgtype.Int8
	time pgtype.Timestamptz
	date pgtype.Date
	json []byte
}

func (c *cell) dest() any {
	switch c.kind {
	case kInt, kMoney:
		return &c.int8
	case kTime:
		return &c.time
	case kDate:
		return &c.date
	case kJSON:
		return &c.json
	default:
		return &c.text
	}
}

// appendTo writes the cell's rendering to b ("" for NULL).
func (c *cell) appendTo(b []byte) []byte {
	switch c.kind {
	case kInt:
		if c.int8.Valid {
			b = strconv.AppendInt(b, c.int8.Int64, 10)
		}
	case kMoney:
		if c.int8.Valid {
			b = appendMoney(b, c.int8.Int64)
		}
	case kTime:
		if c.time.Valid {
			b = c.time.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
		}
	case kDate:
		if c.date.Valid {
			b = c.date.Time.AppendFormat(b, time.DateOnly)
		}
	case kJSON:
		b = append(b, c.json...)
	default:
		if c.text.Valid {
			b = append(b, c.text.String...)
		}
	}
	return b
}

// appendMoney writes cents as a decimal with two places: -5 is -0.05.
func appendMoney(b []byte, cents int64) []byte {
	if cents < 0 {
		b = append(b, '-')
		if cents == -cents { // the one value without a positive twin
			return append(b, "92233720368547758.08"...)
		}
		cents = -cents
	}
	b = strconv.AppendInt(b, cents/100, 10)
	b = append(b, '.')
	if cents%100 < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, cents%100, 10)
}
