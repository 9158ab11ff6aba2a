package exports

import (
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tallyhq/tally/internal/filters"
)

// kind is how a column's value is read and written in the file.
type kind int

const (
	kText  kind = iota // text as stored
	kInt               // a whole number (points)
	kMoney             // cents, written as a decimal: 1999 is 19.99
	kTime              // ISO 8601 in UTC with milliseconds, as the API's JSON
	kDate              // YYYY-MM-DD
	kJSON              // JSON text
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
}

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

// orders are the object's `order` values, the default first.
func (o object) orders() [2]string {
	if o.name == PointsExpiration {
		return [2]string{"expires_at", "-expires_at"}
	}
	return [2]string{"created_at", "-created_at"}
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
func date(key, sql string) column  { return column{key: key, sql: sql, kind: kDate} }
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
)

// objects are what Tally exports. Rows come in id order, which is creation
// order (ids are time-ordered), so `created_at` and `-created_at` read an
// index instead of sorting the table.
var objects = map[string]object{
	// The ledger, every column as the history endpoint shows it: balance
	// and amount are the transaction's details.balance.balance and .points
	// (a loyalty card's) or .amount (a gift card's credits, which the ledger
	// keeps in the same table).
	VoucherTransactions: {
		name: VoucherTransactions,
		from: `FROM loyalty_transactions t WHERE t.project_id = $1`,
		columns: cols(
			text("id", "t.id"), text("campaign_id", "t.campaign_id"), text("voucher_id", "t.card_id"), text("type", "t.type"),
			text("source_id", "t.source_id"), text("reason", "t.reason"), text("source", "t.source"),
			num("balance", "(t.details->'balance'->>'balance')::INT8"), num("amount", "(COALESCE(t.details->'balance'->>'points', t.details->'balance'->>'amount'))::INT8"),
			text("related_transaction_id", "t.related_transaction_id"), at("created_at", "t.created_at"), js("details", "t.details")),
		// The reference's default list also names `status`, which a
		// transaction does not have and `fields` cannot ask for.
		defaults: []string{"id", "type", "source_id", "reason", "source", "balance", "amount", "created_at"},
		filters: map[string]filters.Field{"created_at": when("t.created_at"), "voucher_id": str("t.card_id"),
			"campaign_id": str("t.campaign_id"), "type": str("t.type"), "id": str("t.id")},
	},
	// Points that will expire: the cards' dated buckets (an expired bucket
	// is taken off its card by the expiry sweep, so every row is ACTIVE).
	PointsExpiration: {
		name: PointsExpiration,
		from: `FROM loyalty_point_buckets b JOIN loyalty_cards c ON c.project_id = b.project_id AND c.id = b.card_id
			WHERE b.project_id = $1 AND b.expires_on IS NOT NULL AND b.points > 0`,
		columns: cols(
			text("id", "'lopb_' || b.card_id || '_' || b.id"), text("campaign_id", "c.campaign_id"), text("voucher_id", "b.card_id"),
			num("points", "b.points"), text("status", "'ACTIVE'"), date("expires_at", "b.expires_on")),
		defaults: []string{"id", "campaign_id", "voucher_id", "status", "expires_at", "points"},
		filters: map[string]filters.Field{"campaign_id": str("c.campaign_id"), "voucher_id": str("b.card_id"),
			"created_at": when("b.created_at")},
	},
	Order: {
		name: Order,
		from: `FROM orders t WHERE t.project_id = $1`,
		columns: cols(
			text("id", "t.id"), text("source_id", "t.source_id"), at("created_at", "t.created_at"), at("updated_at", "t.updated_at"),
			text("status", "t.status"), money("amount", "t.amount"), money("discount_amount", "t.discount_amount"),
			money("total_discount_amount", "t.discount_amount"), money("total_amount", "t.amount - COALESCE(t.discount_amount, 0)"),
			text("customer_id", "t.customer_id"), text("referrer_id", "t.referrer_id"), js("metadata", "t.metadata")),
		defaults: []string{"id", "source_id", "status"},
		filters: map[string]filters.Field{"created_at": when("t.created_at"), "status": str("t.status"),
			"customer_id": str("t.customer_id"), "id": str("t.id"), "source_id": str("t.source_id")},
	},
	Customer: {
		name: Customer,
		from: `FROM customers t WHERE t.project_id = $1`,
		columns: cols(
			text("name", "t.attrs->>'name'"), text("id", "t.id"), text("description", "t.attrs->>'description'"),
			text("email", "t.attrs->>'email'"), text("source_id", "t.source_id"), at("created_at", "t.created_at"),
			text("address_city", "t.attrs->'address'->>'city'"), text("address_state", "t.attrs->'address'->>'state'"),
			text("address_line_1", "t.attrs->'address'->>'line_1'"), text("address_line_2", "t.attrs->'address'->>'line_2'"),
			text("address_country", "t.attrs->'address'->>'country'"),
			text("address_postal_code", "t.attrs->'address'->>'postal_code'"), at("updated_at", "t.updated_at"),
			text("phone", "t.attrs->>'phone'"), text("birthday", "t.attrs->>'birthday'"), text("birthdate", "t.attrs->>'birthdate'"),
			js("metadata", "t.attrs->'metadata'")),
		defaults: []string{"name", "source_id"},
		filters: map[string]filters.Field{"created_at": when("t.created_at"), "id": str("t.id"), "source_id": str("t.source_id"),
			"email": str("t.email")},
	},
	// Live products and SKUs; what is in the bin is not exported.
	Product: {
		name: Product,
		from: `FROM products t WHERE t.project_id = $1 AND t.bin_id IS NULL`,
		columns: cols(
			text("id", "t.id"), text("source_id", "t.source_id"), text("name", "t.name"), money("price", "t.price"),
			js("attributes", "t.attributes"), js("metadata", "t.metadata"), text("image_url", "t.image_url"),
			at("created_at", "t.created_at"), at("updated_at", "t.updated_at")),
		defaults: []string{"id", "source_id", "name", "price"},
		filters:  map[string]filters.Field{"created_at": when("t.created_at"), "id": str("t.id"), "source_id": str("t.source_id")},
	},
	SKU: {
		name: SKU,
		from: `FROM skus t WHERE t.project_id = $1`,
		columns: cols(
			text("id", "t.id"), text("product_id", "t.product_id"), text("source_id", "t.source_id"), text("sku", "t.sku"),
			money("price", "t.price"), text("currency", "t.currency"), js("attributes", "t.attributes"),
			js("metadata", "t.metadata"), text("image_url", "t.image_url"), at("created_at", "t.created_at"),
			at("updated_at", "t.updated_at")),
		defaults: []string{"id", "product_id", "source_id", "sku", "price"},
		filters: map[string]filters.Field{"created_at": when("t.created_at"), "id": str("t.id"), "product_id": str("t.product_id"),
			"source_id": str("t.source_id")},
	},
}

// orderColumn is the column rows are ordered by (id order is creation order).
func (o object) orderColumn() string {
	if o.name == PointsExpiration {
		return "b.expires_on, b.card_id" // by when the points expire
	}
	return "t.id"
}

// objectNames lists the exportable objects, for errors.
const objectNames = "voucher_transactions, points_expiration, order, customer, product, sku"

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
