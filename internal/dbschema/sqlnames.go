package dbschema

import (
	"io/fs"
	"path"
	"strings"
)

// The names of tables, for the test that keeps each table's SQL in its
// owner's package (regional/owners_test.go): the tables migrations leave,
// and the tables a piece of SQL names. Both read SQL with the migration
// linter's tokenizer (sqllex.go).

// Tables is the tables the up migrations in dir of fsys leave, in
// the order they were created, followed through renames and drops.
func Tables(fsys fs.FS, dir string) ([]string, error) {
	files, err := migrationFiles(fsys, dir)
	if err != nil {
		return nil, err
	}
	var tables []string
	drop := func(t string) {
		for i, x := range tables {
			if x == t {
				tables = append(tables[:i], tables[i+1:]...)
				return
			}
		}
	}
	for _, f := range files {
		if !f.up {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, f.name))
		if err != nil {
			return nil, err
		}
		for _, s := range splitStatements(tokenize(string(b))) {
			toks := s.toks
			switch {
			case len(toks) > 2 && toks[0].is("CREATE") && toks[1].is("TABLE"):
				i := 2
				for i < len(toks) && (toks[i].is("IF") || toks[i].is("NOT") || toks[i].is("EXISTS")) {
					i++
				}
				t, _ := readName(toks, i)
				tables = append(tables, t)
			case len(toks) > 2 && toks[0].is("DROP") && toks[1].is("TABLE"):
				i := 2
				for i < len(toks) && (toks[i].is("IF") || toks[i].is("EXISTS")) {
					i++
				}
				for i < len(toks) { // DROP TABLE a, b
					var t string
					t, i = readName(toks, i)
					drop(t)
					if i >= len(toks) || toks[i].text != "," {
						break
					}
					i++
				}
			case len(toks) > 2 && toks[0].is("ALTER") && toks[1].is("TABLE"):
				i := 2
				for i < len(toks) && (toks[i].is("IF") || toks[i].is("EXISTS") || toks[i].is("ONLY")) {
					i++
				}
				t, i := readName(toks, i)
				if i+2 < len(toks) && toks[i].is("RENAME") && toks[i+1].is("TO") {
					to, _ := readName(toks, i+2)
					for k, x := range tables {
						if x == t {
							tables[k] = to
						}
					}
				}
			}
		}
	}
	return tables, nil
}

// TableRef is a name a piece of SQL reads or writes as a table, and the
// line of the SQL it is on (from 1).
type TableRef struct {
	Name string
	Line int
}

// statementWords are the words a statement (or a fragment of one, such as
// a join another owner's store lends) starts with, written in upper case
// as this code base writes SQL: prose that says "delete from the bin" is
// not SQL.
var statementWords = map[string]bool{
	"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "UPSERT": true,
	"WITH": true, "TRUNCATE": true, "LOCK": true, "FROM": true, "JOIN": true,
}

// NamedTables reads sql (a statement, or a fragment of one) and reports
// whether it is SQL (it holds one of the statement words in upper case)
// and, if so, every name it reads or writes as a table: the names after
// FROM (and its comma-separated list), JOIN, INTO, UPDATE, TABLE, TRUNCATE
// and LOCK, schema-qualified or not, in lower case. Not every such name is
// a table (a common table expression, a function in FROM, the SET after
// ON CONFLICT DO UPDATE): the caller keeps those of the schema's tables.
func NamedTables(sql string) (refs []TableRef, isSQL bool) {
	toks := tokenize(sql)
	for _, t := range toks {
		if t.kind == 'w' && statementWords[t.text] {
			isSQL = true
			break
		}
	}
	if !isSQL {
		return nil, false
	}
	name := func(i int) (string, int) {
		if i >= len(toks) || (toks[i].kind != 'w' && toks[i].kind != 'q') {
			return "", i
		}
		return readName(toks, i)
	}
	for i, t := range toks {
		if t.kind != 'w' {
			continue
		}
		switch strings.ToUpper(t.text) {
		case "FROM":
			if i > 0 && (toks[i-1].is("DISTINCT") || toks[i-1].is("BOTH") || toks[i-1].is("LEADING") || toks[i-1].is("TRAILING")) {
				continue // IS DISTINCT FROM x, trim(BOTH FROM x): an expression
			}
			j := i + 1
			if j < len(toks) && toks[j].is("ONLY") {
				j++
			}
			for {
				n, k := name(j)
				if n == "" {
					break
				}
				refs = append(refs, TableRef{n, toks[j].line})
				// FROM a [AS] x, b [AS] y: the next after a comma at this depth.
				for k < len(toks) && (toks[k].kind == 'w' || toks[k].kind == 'q') && !isClauseWord(toks[k]) {
					k++
				}
				if k >= len(toks) || toks[k].text != "," {
					break
				}
				j = k + 1
			}
		case "JOIN", "INTO", "UPDATE", "TABLE", "TRUNCATE", "LOCK":
			j := i + 1
			for j < len(toks) && (toks[j].is("ONLY") || toks[j].is("TABLE") && !t.is("TABLE")) {
				j++
			}
			if n, _ := name(j); n != "" {
				refs = append(refs, TableRef{n, toks[j].line})
			}
		}
	}
	return refs, true
}

// isClauseWord is a word that ends a FROM item's name and alias.
func isClauseWord(t token) bool {
	switch strings.ToUpper(t.text) {
	case "WHERE", "JOIN", "LEFT", "RIGHT", "INNER", "OUTER", "FULL", "CROSS", "ON", "USING",
		"GROUP", "ORDER", "LIMIT", "OFFSET", "HAVING", "UNION", "EXCEPT", "INTERSECT",
		"FOR", "RETURNING", "SET", "WINDOW", "LATERAL", "NATURAL":
		return true
	}
	return false
}
