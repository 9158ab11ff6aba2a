package dbschema

import (
	"github.com/tallyhq/tally/internal/db"

	"bytes"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/golang-migrate/migrate/v4/source"
)

// HashShardBuckets is the bucket count of every hash-sharded key: more
// buckets than a regional cluster has nodes gain little, and every
// ordered read of a sharded key merges one limited scan per bucket
// (docs/architecture.md, Database rules: keys that spread writes).
const HashShardBuckets = 8

// Migration files are written in the intersection of the two dialects with
// one explicit exception, a directive the migrator renders for the server
// it migrates (renderedSource) and the linter checks (Lint):
//
//	{{hash_sharded}}  after the column list of a PRIMARY KEY (…) in CREATE
//	                  TABLE, or of CREATE [UNIQUE] INDEX … ON t (…):
//	                  CockroachDB: USING HASH WITH (bucket_count = 8), a
//	                  hash-sharded key whose writes spread over the buckets'
//	                  ranges instead of the tail of one; PostgreSQL: nothing.
//
//	{{jsonb_path_ops}} after the last (JSONB) column or expression of
//	                  CREATE INDEX … USING GIN (…): PostgreSQL: the
//	                  jsonb_path_ops operator class, whose entries are
//	                  hashes of a key's path with its value, so that a
//	                  containment of {"k": "v"} reads the rows holding that
//	                  pair, where the default jsonb_ops also reads every row
//	                  holding the key k; CockroachDB: nothing, as its
//	                  inverted index is made of such paths already and it
//	                  knows no other operator class (cockroach#81115).
//
// A directive is not SQL in either dialect, so a file applied without the
// migrator fails at once rather than making an unsharded key unnoticed.
var directives = map[string]map[db.Dialect]string{
	"hash_sharded": {
		db.CockroachDB: fmt.Sprintf("USING HASH WITH (bucket_count = %d)", HashShardBuckets),
		db.PostgreSQL:  "",
	},
	"jsonb_path_ops": {
		db.CockroachDB: "",
		db.PostgreSQL:  "jsonb_path_ops",
	},
}

// directivePattern is a directive as written: {{name}}.
var directivePattern = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]*)\s*\}\}`)

// Directives are the names of the directives migration files may use.
func Directives() []string {
	out := make([]string, 0, len(directives))
	for n := range directives {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Render is the SQL of a migration file as the migrator sends it
// to a server of dialect d: each directive replaced by its text for d. It
// fails on a directive it does not know. Lines stay where they were.
func Render(sql string, d db.Dialect) (string, error) {
	if d != db.PostgreSQL && d != db.CockroachDB {
		return "", fmt.Errorf("db: render a migration for dialect %v", d)
	}
	var bad []string
	out := directivePattern.ReplaceAllStringFunc(sql, func(m string) string {
		name := directivePattern.FindStringSubmatch(m)[1]
		text, ok := directives[name][d]
		if !ok {
			bad = append(bad, m)
			return m
		}
		return text
	})
	if len(bad) > 0 {
		return "", fmt.Errorf("db: unknown migration directive %s (known: {{%s}})", strings.Join(bad, ", "),
			strings.Join(Directives(), "}}, {{"))
	}
	return out, nil
}

// renderedSource is a golang-migrate source whose files are read rendered
// for the dialect of the server being migrated (Render).
type renderedSource struct {
	source.Driver
	dialect db.Dialect
}

func (s renderedSource) ReadUp(version uint) (io.ReadCloser, string, error) {
	r, id, err := s.Driver.ReadUp(version)
	if err != nil {
		return r, id, err
	}
	return s.render(r, fmt.Sprintf("%d_%s.up.sql", version, id), id)
}

func (s renderedSource) ReadDown(version uint) (io.ReadCloser, string, error) {
	r, id, err := s.Driver.ReadDown(version)
	if err != nil {
		return r, id, err
	}
	return s.render(r, fmt.Sprintf("%d_%s.down.sql", version, id), id)
}

// render reads the file called name through Render.
func (s renderedSource) render(r io.ReadCloser, name, id string) (io.ReadCloser, string, error) {
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, id, err
	}
	sql, err := Render(string(b), s.dialect)
	if err != nil {
		return nil, id, fmt.Errorf("%s: %w", name, err)
	}
	return io.NopCloser(bytes.NewReader([]byte(sql))), id, nil
}
