package dbschema

import "strings"

// The migration linter's (migrationlint.go) reading of SQL into tokens.

type token struct {
	kind byte // 'w' word, 'q' quoted identifier, 's' string, 'n' number, 'p' punctuation, 'd' directive
	text string
	line int
}

func (t token) is(word string) bool { return t.kind == 'w' && strings.EqualFold(t.text, word) }

// tokenize reads SQL into words, quoted identifiers, strings, numbers and
// punctuation, leaving out comments (-- and nested /* */) and whitespace.
// String and dollar-quoted bodies are kept whole, so nothing in them is
// read as SQL.
func tokenize(sql string) []token {
	l := &lexer{sql: sql, line: 1}
	for l.i < len(sql) {
		l.next()
	}
	return l.out
}

// lexer is tokenize's state: the SQL, the offset and line read to, and
// the tokens read.
type lexer struct {
	sql  string
	i    int
	line int
	out  []token
}

// next reads what starts at the offset: one token, or what is left out.
func (l *lexer) next() {
	sql, i := l.sql, l.i
	c := sql[i]
	switch {
	case c == '\n':
		l.line++
		l.i++
	case c == ' ' || c == '\t' || c == '\r' || c == '\f':
		l.i++
	case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
		for l.i < len(sql) && sql[l.i] != '\n' {
			l.i++
		}
	case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
		l.blockComment()
	case c == '\'' || c == '"':
		l.quoted(c)
	case c == '{' && strings.HasPrefix(sql[i:], "{{"):
		l.directive()
	case c == '$':
		l.dollar()
	case isWordByte(c) && !(c >= '0' && c <= '9'):
		l.span('w', func(b byte) bool { return isWordByte(b) || b == '$' })
	case c >= '0' && c <= '9':
		l.span('n', func(b byte) bool { return isWordByte(b) || b == '.' })
	default:
		l.out = append(l.out, token{'p', string(c), l.line})
		l.i++
	}
}

// blockComment skips a /* */ comment, nested ones within it.
func (l *lexer) blockComment() {
	sql := l.sql
	depth := 0
	for l.i < len(sql) {
		if strings.HasPrefix(sql[l.i:], "/*") {
			depth++
			l.i += 2
		} else if strings.HasPrefix(sql[l.i:], "*/") {
			depth--
			l.i += 2
			if depth == 0 {
				return
			}
		} else {
			if sql[l.i] == '\n' {
				l.line++
			}
			l.i++
		}
	}
}

// quoted reads a string ('…', E'…' with backslash escapes) or a quoted
// identifier ("…"), a doubled quote being one quote within it.
func (l *lexer) quoted(c byte) {
	sql := l.sql
	start, startLine := l.i, l.line
	escapes := c == '\'' && l.i > 0 && (sql[l.i-1] == 'E' || sql[l.i-1] == 'e')
	i := l.i + 1
	for i < len(sql) {
		if escapes && sql[i] == '\\' {
			i += 2
			continue
		}
		if sql[i] == '\n' {
			l.line++
		}
		if sql[i] == c {
			if i+1 < len(sql) && sql[i+1] == c { // doubled: an escaped quote
				i += 2
				continue
			}
			i++
			break
		}
		i++
	}
	l.i = i
	kind := byte('s')
	text := sql[start:min(i, len(sql))]
	if c == '"' {
		kind, text = 'q', strings.Trim(text, `"`)
	}
	if escapes && len(l.out) > 0 && l.out[len(l.out)-1].is("E") {
		l.out = l.out[:len(l.out)-1] // E'…' is one string
	}
	l.out = append(l.out, token{kind, text, startLine})
}

// directive reads a directive (directives.go): {{name}}, one token.
func (l *lexer) directive() {
	sql, i := l.sql, l.i
	end := strings.Index(sql[i:], "}}")
	if end < 0 {
		l.out = append(l.out, token{'d', strings.TrimSpace(sql[i+2:]), l.line})
		l.line += strings.Count(sql[i:], "\n")
		l.i = len(sql)
		return
	}
	body := sql[i+2 : i+end]
	l.out = append(l.out, token{'d', strings.TrimSpace(body), l.line})
	l.line += strings.Count(body, "\n")
	l.i += end + 2
}

// dollar reads what starts with $: $1 is a parameter; $tag$ … $tag$ a
// dollar-quoted string.
func (l *lexer) dollar() {
	sql, i := l.sql, l.i
	j := i + 1
	for j < len(sql) && (isWordByte(sql[j]) && !(j == i+1 && sql[j] >= '0' && sql[j] <= '9')) {
		j++
	}
	if j < len(sql) && sql[j] == '$' {
		tag := sql[i : j+1]
		startLine := l.line
		end := strings.Index(sql[j+1:], tag)
		body := sql[i:]
		if end >= 0 {
			body = sql[i : j+1+end+len(tag)]
		}
		l.line += strings.Count(body, "\n")
		l.i += len(body)
		l.out = append(l.out, token{'s', body, startLine})
		return
	}
	j = i + 1
	for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
		j++
	}
	l.out = append(l.out, token{'n', sql[i:j], l.line})
	l.i = j
}

// span reads a token of kind from the offset on, as long as in admits
// its bytes.
func (l *lexer) span(kind byte, in func(byte) bool) {
	j := l.i
	for j < len(l.sql) && in(l.sql[j]) {
		j++
	}
	l.out = append(l.out, token{kind, l.sql[l.i:j], l.line})
	l.i = j
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
