package dbschema

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Lint reads every migration file in dir of fsys and reports what
// would fail or misbehave on CockroachDB, or mean one thing there and
// another on PostgreSQL. golang-migrate sends a file as one string, which
// CockroachDB runs as one transaction, where:
//
//   - a write after a schema change fails or is unsafe (an UPDATE of a
//     column added earlier in the file fails, cockroach#43057), and a schema
//     change after a write is refused: a file that writes rows holds no
//     schema change (the data goes in the next file);
//   - a DROP COLUMN beside any other schema change is unsafe: a file with a
//     DROP COLUMN holds that one ALTER TABLE, with DROP COLUMN actions only;
//   - several schema changes of one existing table are unsafe (an ADD COLUMN
//     and an index on it; DROP INDEX, DROP COLUMN, CREATE UNIQUE INDEX): a
//     table the file did not create is changed by one statement of the file
//     at most (one ALTER TABLE may add several columns);
//
// and besides:
//
//   - a directive (directives.go) is one the migrator knows, where it
//     renders as SQL: {{hash_sharded}} right after the column list of a
//     PRIMARY KEY (…) in CREATE TABLE, or of CREATE [UNIQUE] INDEX … ON t
//     (…), followed by nothing but the end of the table element, or of the
//     index's statement or its WHERE (CockroachDB wants an index's STORING
//     before its WITH (bucket_count …));
//     {{jsonb_path_ops}} after the last column or expression of CREATE
//     INDEX … USING GIN (…), before its );
//   - INT and INTEGER are 64-bit on CockroachDB and 32-bit on PostgreSQL,
//     and SERIAL types differ too: every integer type names its width
//     (INT2/SMALLINT, INT4, INT8/BIGINT);
//   - a DELETE without WHERE or LIMIT (or a TRUNCATE) is one transaction
//     over every row of a table.
//
// Each problem is "file:line: what". An error is returned only when the
// files cannot be read.
func Lint(fsys fs.FS, dir string) ([]string, error) {
	files, err := migrationFiles(fsys, dir)
	if err != nil {
		return nil, err
	}
	// Ups in version order build the model of the schema (which table an
	// index is on); a down is read against the schema its up left.
	model := &schemaModel{indexes: map[string]string{}}
	var problems []string
	for _, f := range files {
		b, err := fs.ReadFile(fsys, path.Join(dir, f.name))
		if err != nil {
			return nil, err
		}
		for _, p := range lintFile(string(b), model) {
			problems = append(problems, f.name+":"+p)
		}
	}
	return problems, nil
}

var migrationName = regexp.MustCompile(`^(\d+)_.*\.(up|down)\.sql$`)

// schemaModel is what the linter knows of the schema: the table each index
// is on, followed through renames.
type schemaModel struct {
	indexes map[string]string
}

// ambiguousInts are the integer types whose width differs between
// CockroachDB and PostgreSQL, or whose meaning does (SERIAL is
// unique_rowid() on CockroachDB, a sequence on PostgreSQL).
var ambiguousInts = map[string]string{
	"INT": "", "INTEGER": "", "INT64": "",
	"SERIAL": "", "SERIAL2": "", "SERIAL4": "", "SERIAL8": "", "SMALLSERIAL": "", "BIGSERIAL": "",
}

type stmt struct {
	toks []token
	line int
}

// lintFile reports the problems of one file's SQL as "line: what",
// updating model with what the file does.
func lintFile(sql string, model *schemaModel) []string {
	stmts := splitStatements(tokenize(sql))
	var problems []string
	add := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%d: ", line)+fmt.Sprintf(format, args...))
	}
	var firstSchema, firstData *stmt
	schemaCount := 0
	var dropColumn *stmt
	dropColumnAlone := true
	created := map[string]bool{}  // tables this file creates
	changes := map[string][]int{} // lines of the statements changing each existing table
	for i := range stmts {
		s := &stmts[i]
		for _, t := range s.toks {
			if t.kind == 'w' {
				if _, bad := ambiguousInts[strings.ToUpper(t.text)]; bad {
					add(t.line, "%s has no explicit width (64-bit on CockroachDB, 32-bit on PostgreSQL; SERIAL types differ too): write INT8/BIGINT, INT4 or INT2/SMALLINT", t.text)
				}
			}
		}
		for _, p := range lintDirectives(s.toks) {
			add(p.line, "%s", p.what)
		}
		switch kind, verb := classify(s.toks); kind {
		case "data":
			if firstSchema != nil {
				add(s.line, "%s after a schema change (line %d) in one file: CockroachDB runs the file as one transaction, where a write after a schema change fails (cockroach#43057); put it in the next file", verb, firstSchema.line)
			}
			if firstData == nil {
				firstData = s
			}
			if verb == "TRUNCATE" {
				add(s.line, "TRUNCATE in a migration: delete in bounded batches, or leave it to the service")
			} else if verb == "DELETE" && !hasWord(s.toks, "WHERE") && !hasWord(s.toks, "LIMIT") {
				add(s.line, "DELETE without WHERE or LIMIT: one transaction over every row of the table")
			}
		case "schema":
			if firstData != nil {
				add(s.line, "schema change after a write (line %d) in one file: CockroachDB refuses it in one transaction; put the schema change in a file of its own", firstData.line)
			}
			if firstSchema == nil {
				firstSchema = s
			}
			schemaCount++
			target, creates, drops, onlyDrops := schemaTarget(s.toks, model)
			if drops > 0 {
				if dropColumn == nil {
					dropColumn = s
				}
				if !onlyDrops {
					dropColumnAlone = false
				}
			}
			if creates {
				created[target] = true
			} else if target != "" && !created[target] {
				changes[target] = append(changes[target], s.line)
			}
		}
	}
	if dropColumn != nil && (schemaCount > 1 || !dropColumnAlone) {
		add(dropColumn.line, "DROP COLUMN beside another schema change in one file: unsafe in one CockroachDB transaction; a file with a DROP COLUMN holds that one ALTER TABLE … DROP COLUMN")
	}
	tables := make([]string, 0, len(changes))
	for t := range changes {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, t := range tables {
		if lines := changes[t]; len(lines) > 1 {
			add(lines[1], "table %s, made before this file, is changed by %d statements (lines %s): unsafe in one CockroachDB transaction (an ADD COLUMN and an index on it, say); one statement per existing table and file", t, len(lines), joinInts(lines))
		}
	}
	sort.SliceStable(problems, func(i, j int) bool { return lineOf(problems[i]) < lineOf(problems[j]) })
	return problems
}

func lineOf(p string) int {
	n, _ := strconv.Atoi(p[:strings.IndexByte(p, ':')])
	return n
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

func hasWord(toks []token, w string) bool {
	for _, t := range toks {
		if t.is(w) {
			return true
		}
	}
	return false
}

// classify says whether a statement writes rows ("data"), changes the
// schema ("schema") or neither (a SELECT, a SET), and its verb.
func classify(toks []token) (kind, verb string) {
	i := 0
	for i < len(toks) && toks[i].kind == 'p' && toks[i].text == "(" {
		i++
	}
	if i == len(toks) || toks[i].kind != 'w' {
		return "", ""
	}
	verb = strings.ToUpper(toks[i].text)
	switch verb {
	case "INSERT", "UPDATE", "DELETE", "UPSERT", "MERGE", "COPY", "TRUNCATE":
		return "data", verb
	case "CREATE", "ALTER", "DROP", "COMMENT", "GRANT", "REVOKE", "REINDEX":
		return "schema", verb
	case "WITH":
		// A common table expression that writes: WITH x AS (DELETE …) …
		for _, t := range toks[i+1:] {
			if t.kind == 'w' {
				switch u := strings.ToUpper(t.text); u {
				case "INSERT", "UPDATE", "DELETE", "UPSERT":
					return "data", u
				}
			}
		}
	}
	return "", verb
}

// schemaTarget reads a schema statement: the table it changes or creates
// ("" when it is not a table's), whether it creates the table, how many
// DROP COLUMN actions it holds and whether those are all its actions. It
// updates model.
func schemaTarget(toks []token, model *schemaModel) (table string, creates bool, dropColumns int, onlyDrops bool) {
	words := func(i int) string {
		if i < len(toks) && toks[i].kind == 'w' {
			return strings.ToUpper(toks[i].text)
		}
		return ""
	}
	name := func(i int) (string, int) { return readName(toks, i) }
	skip := func(i int, ws ...string) int {
		for _, w := range ws {
			if words(i) == w {
				i++
			}
		}
		return i
	}
	switch words(0) {
	case "CREATE":
		i := skip(1, "UNIQUE")
		switch words(i) {
		case "TABLE":
			i = skip(i+1, "IF", "NOT", "EXISTS")
			t, _ := name(i)
			return t, true, 0, false
		case "INDEX":
			i = skip(i+1, "CONCURRENTLY", "IF", "NOT", "EXISTS")
			var idx string
			if words(i) != "ON" {
				idx, i = name(i)
			}
			i = skip(i, "ON", "ONLY")
			t, _ := name(i)
			if idx != "" {
				model.indexes[idx] = t
			}
			return t, false, 0, false
		}
	case "ALTER":
		switch words(1) {
		case "TABLE":
			i := skip(2, "IF", "EXISTS", "ONLY")
			t, i := name(i)
			actions := splitActions(toks[i:])
			onlyDrops = true
			for _, a := range actions {
				if len(a) > 0 && a[0].is("DROP") && !(len(a) > 1 && (a[1].is("CONSTRAINT") || a[1].is("INDEX"))) {
					dropColumns++
				} else {
					onlyDrops = false
				}
				if len(a) > 2 && a[0].is("RENAME") && a[1].is("TO") {
					to, _ := readName(a, 2)
					for idx, tab := range model.indexes {
						if tab == t {
							model.indexes[idx] = to
						}
					}
				}
			}
			return t, false, dropColumns, onlyDrops
		case "INDEX":
			idx, _ := name(skip(2, "IF", "EXISTS"))
			return model.indexes[idx], false, 0, false
		}
	case "DROP":
		switch words(1) {
		case "TABLE":
			t, _ := name(skip(2, "IF", "EXISTS"))
			return t, false, 0, false
		case "INDEX":
			i := skip(2, "CONCURRENTLY", "IF", "EXISTS")
			n, j := name(i)
			if j < len(toks) && toks[j].kind == 'p' && toks[j].text == "@" { // CockroachDB's table@index
				idx, _ := name(j + 1)
				model.indexes[idx] = n
				return n, false, 0, false
			}
			return model.indexes[n], false, 0, false
		}
	}
	return "", false, 0, false
}

// readName reads a possibly qualified name at i of toks, returning its last
// part (lower case unless quoted) and the index after it.
func readName(toks []token, i int) (string, int) {
	var n string
	for i < len(toks) {
		if toks[i].kind != 'w' && toks[i].kind != 'q' {
			break
		}
		n = toks[i].text
		if toks[i].kind == 'w' {
			n = strings.ToLower(n)
		}
		i++
		if i < len(toks) && toks[i].kind == 'p' && toks[i].text == "." {
			i++
			continue
		}
		break
	}
	return n, i
}

// splitActions splits an ALTER TABLE's actions at the commas outside
// parentheses.
func splitActions(toks []token) [][]token {
	var out [][]token
	depth, start := 0, 0
	for i, t := range toks {
		if t.kind != 'p' {
			continue
		}
		switch t.text {
		case "(":
			depth++
		case ")":
			depth--
		case ",":
			if depth == 0 {
				out = append(out, toks[start:i])
				start = i + 1
			}
		}
	}
	return append(out, toks[start:])
}

// splitStatements splits tokens at semicolons, dropping empty statements.
func splitStatements(toks []token) []stmt {
	var out []stmt
	var cur []token
	flush := func() {
		if len(cur) > 0 {
			out = append(out, stmt{toks: cur, line: cur[0].line})
		}
		cur = nil
	}
	for _, t := range toks {
		if t.kind == 'p' && t.text == ";" {
			flush()
			continue
		}
		cur = append(cur, t)
	}
	flush()
	return out
}

type directiveProblem struct {
	line int
	what string
}

// lintDirectives reports the directives of one statement that the
// migrator would not know or would render where they are not SQL.
func lintDirectives(toks []token) []directiveProblem {
	var out []directiveProblem
	bad := func(t token, format string, args ...any) {
		out = append(out, directiveProblem{t.line, fmt.Sprintf(format, args...)})
	}
	isP := func(i int, p string) bool { return i >= 0 && i < len(toks) && toks[i].kind == 'p' && toks[i].text == p }
	isW := func(i int, w string) bool { return i >= 0 && i < len(toks) && toks[i].is(w) }
	createIndex := isW(0, "CREATE") && (isW(1, "INDEX") || isW(1, "UNIQUE") && isW(2, "INDEX"))
	createTable := isW(0, "CREATE") && isW(1, "TABLE")
	for i, t := range toks {
		if t.kind != 'd' {
			continue
		}
		if _, ok := directives[t.text]; !ok {
			bad(t, "unknown directive {{%s}}: the migrator knows {{%s}}", t.text, strings.Join(Directives(), "}}, {{"))
			continue
		}
		if t.text == "jsonb_path_ops" {
			gin := false
			for j := range toks {
				if isW(j, "USING") && isW(j+1, "GIN") {
					gin = true
				}
			}
			if !createIndex || !gin || !isP(i+1, ")") {
				bad(t, "{{jsonb_path_ops}} goes after the last column or expression of CREATE INDEX … USING GIN (…)")
			}
			continue
		}
		const where = "{{hash_sharded}} goes right after the column list of a PRIMARY KEY (…) in CREATE TABLE or of CREATE INDEX … ON t (…)"
		// The column list it follows: from the ( matching the ) before it.
		open := -1
		if isP(i-1, ")") {
			depth := 0
			for j := i - 1; j >= 0; j-- {
				if toks[j].kind != 'p' {
					continue
				}
				if toks[j].text == ")" {
					depth++
				} else if toks[j].text == "(" {
					depth--
					if depth == 0 {
						open = j
						break
					}
				}
			}
		}
		switch {
		case open < 0:
			bad(t, "%s; here it follows no column list", where)
		case createTable && isW(open-2, "PRIMARY") && isW(open-1, "KEY"):
			// The end of the table element: its comma, or the table's ).
			if !isP(i+1, ",") && !isP(i+1, ")") {
				bad(t, "%s, and ends the PRIMARY KEY: nothing may follow it but , or )", where)
			}
		case createIndex && firstParen(toks) == open:
			if i+1 < len(toks) && !isW(i+1, "WHERE") {
				bad(t, "%s, and only WHERE may follow it (CockroachDB wants STORING/INCLUDE before the WITH (bucket_count …) it renders)", where)
			}
		default:
			bad(t, "%s; here it follows another list", where)
		}
	}
	return out
}

// firstParen is the index of a statement's first "(" (an index's column
// list, in CREATE INDEX … ON t (…)), or -1.
func firstParen(toks []token) int {
	for i, t := range toks {
		if t.kind == 'p' && t.text == "(" {
			return i
		}
	}
	return -1
}

// migrationFile is one migration file of a directory.
type migrationFile struct {
	name    string
	version uint64
	up      bool
}

// migrationFiles lists the migration files in dir of fsys in version
// order, a version's up before its down.
func migrationFiles(fsys fs.FS, dir string) ([]migrationFile, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var files []migrationFile
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if e.IsDir() || m == nil {
			continue
		}
		v, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		files = append(files, migrationFile{e.Name(), v, m[2] == "up"})
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].version != files[j].version {
			return files[i].version < files[j].version
		}
		return files[i].up && !files[j].up
	})
	return files, nil
}
