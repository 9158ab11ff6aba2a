package regional_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/regional"
)

// owners is the one package (under regional/) that owns each table of the
// regional schema: the only one whose SQL names it. Reading or writing
// another owner's table goes through that owner's functions. A table a
// later migration adds must be given its owner here.
var owners = map[string]string{
	"outbox":                      "async",
	"async_actions":               "async",
	"async_inputs":                "async",
	"async_input_erasures":        "async",
	"async_failure_subjects":      "async/concerns",
	"bin_entries":                 "bin",
	"campaigns":                   "campaigns",
	"campaign_voucher_counts":     "campaigns",
	"categories":                  "categories",
	"customers":                   "customers",
	"customer_erasures":           "customers",
	"earning_rules":               "earning",
	"loyalty_accruals":            "earning",
	"loyalty_pending_points":      "earning",
	"custom_event_accruals":       "earning",
	"redemption_sessions":         "engine",
	"stacked_redemptions":         "engine/stacked",
	"stacked_rollbacks":           "engine/stacked",
	"custom_events":               "events",
	"customer_activities":         "events",
	"customer_event_counts":       "events",
	"locations":                   "locations",
	"product_collections":         "collections",
	"campaign_templates":          "templates",
	"exports":                     "exports",
	"export_chunks":               "exports",
	"loyalty_cards":               "loyalty",
	"loyalty_point_buckets":       "loyalty",
	"loyalty_transactions":        "loyalty",
	"loyalty_card_events":         "loyalty",
	"orders":                      "orders",
	"products":                    "products",
	"skus":                        "products",
	"binned_skus":                 "products",
	"promotion_tiers":             "promotions",
	"promotion_stacks":            "promotions",
	"publications":                "publications",
	"publication_vouchers":        "publications",
	"redemptions":                 "redemptions",
	"redemption_rollbacks":        "redemptions",
	"reward_assignments":          "redemptions",
	"referrals":                   "referrals",
	"referral_referrers":          "referrals",
	"referral_tier_referees":      "referrals",
	"referral_holders":            "referrals",
	"rewards":                     "rewards",
	"reward_redemption_counts":    "rewards",
	"segments":                    "segments",
	"segment_members":             "segments",
	"loyalty_tiers":               "tiers",
	"api_usage":                   "usage",
	"usage_flushes":               "usage",
	"validation_rules":            "validation",
	"validation_rule_assignments": "validation",
	"vouchers":                    "vouchers",
	"voucher_count_shards":        "vouchers",
	"voucher_codes":               "vouchercodes",
	"webhook_deliveries":          "webhooks",
	"webhook_attempts":            "webhooks",
}

// exception is SQL that still names a table outside its owner's package
// (or sits in an http.go), what keeps it there, and the item of issue 36
// that removes it. The test fails when an exception no longer occurs, so
// the list only shrinks.
type exception struct {
	pkg, table string
	inHTTP     bool // the SQL is in the package's http.go
	why, item  string
}

var exceptions = []exception{}

// use is one table named by SQL outside its owner's package, or in an
// http.go.
type use struct {
	pos        string // file:line
	pkg, table string
	inHTTP     bool
	owner      string
}

// TestEachTableIsNamedOnlyByItsOwner keeps the SQL of each table in the
// package that owns it (owners) and out of every http.go, but for the
// listed exceptions.
func TestEachTableIsNamedOnlyByItsOwner(t *testing.T) {
	tables, err := dbschema.Tables(regional.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	inSchema := map[string]bool{}
	for _, tb := range tables {
		inSchema[tb] = true
	}
	t.Run("every table has one owner", func(t *testing.T) {
		for _, tb := range tables {
			if _, ok := owners[tb]; !ok {
				t.Errorf("table %s has no owner: give it its package in owners", tb)
			}
		}
		for tb := range owners {
			if !inSchema[tb] {
				t.Errorf("owners names %s, which the migrations do not leave", tb)
			}
		}
	})

	uses, pkgs := scanSQL(t, ".", inSchema)
	for _, e := range exceptions {
		if e.why == "" || e.item == "" {
			t.Errorf("exception %s/%s: say why and which item of issue 36 removes it", e.pkg, e.table)
		}
	}
	for _, pkg := range pkgs {
		t.Run(pkg, func(t *testing.T) {
			seen := map[int]bool{}
			for _, u := range uses {
				if u.pkg != pkg {
					continue
				}
				i := excepted(u)
				if i >= 0 {
					seen[i] = true
					continue
				}
				switch {
				case u.inHTTP:
					t.Errorf("%s: SQL naming %s in an http.go (owner %s): handlers hold no SQL", u.pos, u.table, u.owner)
				default:
					t.Errorf("%s: SQL naming %s outside its owner %s", u.pos, u.table, u.owner)
				}
			}
			for i, e := range exceptions {
				if e.pkg == pkg && !seen[i] {
					t.Errorf("exception %s naming %s (http.go: %v) no longer occurs: remove it from exceptions", e.pkg, e.table, e.inHTTP)
				}
			}
		})
	}
	t.Run("exceptions name packages with Go files", func(t *testing.T) {
		for _, e := range exceptions {
			if i := sort.SearchStrings(pkgs, e.pkg); i == len(pkgs) || pkgs[i] != e.pkg {
				t.Errorf("exception names package %s, which has no Go files under regional/", e.pkg)
			}
		}
	})
}

// excepted is the index of the exception u falls under, or -1.
func excepted(u use) int {
	for i, e := range exceptions {
		if e.pkg == u.pkg && e.table == u.table && e.inHTTP == u.inHTTP {
			return i
		}
	}
	return -1
}

// scanSQL reads every non-test Go file under root and reports each table
// of the schema its SQL names outside the table's owner or in an http.go,
// with the packages (relative to root) that hold Go files, sorted.
func scanSQL(t *testing.T, root string, inSchema map[string]bool) ([]use, []string) {
	t.Helper()
	var uses []use
	pkgSet := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		if pkg == "." {
			pkg = "regional" // the app's own files
		}
		pkgSet[pkg] = true
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		inHTTP := filepath.Base(path) == "http.go"
		for _, s := range sqlTexts(fset, f) {
			refs, isSQL := dbschema.NamedTables(s.text)
			if !isSQL {
				continue
			}
			for _, r := range refs {
				if !inSchema[r.Name] {
					continue
				}
				owner := owners[r.Name]
				if owner == pkg && !inHTTP {
					continue
				}
				uses = append(uses, use{pos: fmt.Sprintf("%s:%d", path, s.line+r.Line-1), pkg: pkg, table: r.Name,
					inHTTP: inHTTP, owner: owner})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for p := range pkgSet {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	return uses, pkgs
}

// sqlText is a string constant of a file, a chain of literals joined by +
// read as one (what is not a literal stands in as a word), with the line
// it starts on. The pieces of a chain are put on their own lines, so a
// name's line in the text is its line in the file.
type sqlText struct {
	text string
	line int
}

func sqlTexts(fset *token.FileSet, f *ast.File) []sqlText {
	var out []sqlText
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op != token.ADD {
				return true
			}
			var parts []ast.Expr
			var flatten func(e ast.Expr)
			flatten = func(e ast.Expr) {
				if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.ADD {
					flatten(b.X)
					flatten(b.Y)
					return
				}
				parts = append(parts, e)
			}
			flatten(n)
			var b strings.Builder
			start := fset.Position(n.Pos()).Line
			line, lits := start, 0
			for _, p := range parts {
				at := fset.Position(p.Pos()).Line
				for ; line < at; line++ {
					b.WriteByte('\n')
				}
				if l, ok := p.(*ast.BasicLit); ok && l.Kind == token.STRING {
					s, err := strconv.Unquote(l.Value)
					if err == nil {
						b.WriteString(s)
						line += strings.Count(s, "\n")
						lits++
						continue
					}
				}
				b.WriteString(" _ ")
				// What is within a part that is not a literal (a call's
				// arguments) is read on its own.
				ast.Inspect(p, visit)
			}
			if lits > 0 {
				out = append(out, sqlText{b.String(), start})
			}
			return false
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				if s, err := strconv.Unquote(n.Value); err == nil {
					out = append(out, sqlText{s, fset.Position(n.Pos()).Line})
				}
			}
		}
		return true
	}
	ast.Inspect(f, visit)
	return out
}
