package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
)

// MaxDepth is how deeply a request body's objects and arrays may nest.
const MaxDepth = 64

// CheckText refuses a request whose path parameters or query parameters
// hold text the database cannot store (a NUL, invalid UTF-8), naming the
// parameter: before, such text reached PostgreSQL and came back a 500.
func CheckText() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			for i, name := range c.ParamNames() {
				vals := c.ParamValues()
				if i >= len(vals) {
					break
				}
				v := vals[i]
				if u, err := url.PathUnescape(v); err == nil {
					v = u
				}
				if why := badText(v); why != "" {
					if name == "*" {
						name = "path"
					}
					return apierr.InvalidPayload(fmt.Sprintf("Path parameter %s %s.", name, why))
				}
			}
			for name, vs := range c.QueryParams() {
				if why := badText(name); why != "" {
					return apierr.InvalidPayload(fmt.Sprintf("A query parameter's name %s.", why))
				}
				for _, v := range vs {
					if why := badText(v); why != "" {
						return apierr.InvalidPayload(fmt.Sprintf("Query parameter %s %s.", name, why))
					}
				}
			}
			return next(c)
		}
	}
}

// badText says what is wrong with s as stored text, "" when nothing.
func badText(s string) string {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL character"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	return ""
}

// checkBody walks a JSON body and refuses, naming the property, what the
// decoder would change or what could not be read back: invalid UTF-8 and
// lone surrogates (which the decoder silently replaces with U+FFFD), NUL
// characters (which PostgreSQL cannot store), numbers outside the float64
// range (stored, they made every later read of the object fail), and
// nesting deeper than MaxDepth. Malformed JSON is left to the decoder,
// which says where.
func checkBody(body []byte) error {
	if !mayNeedCheck(body) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type level struct {
		array bool
		index int
		key   string
		atKey bool // an object expecting a key next
	}
	var stack []level
	path := func() string {
		var b strings.Builder
		for _, l := range stack {
			switch {
			case l.array:
				fmt.Fprintf(&b, "[%d]", l.index)
			case b.Len() == 0:
				b.WriteString(l.key)
			default:
				b.WriteString("." + l.key)
			}
		}
		if b.Len() == 0 {
			return "the body"
		}
		return b.String()
	}
	// value is called after each complete value: arrays move to their next
	// index, objects expect a key again.
	value := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].array {
				stack[n-1].index++
			} else {
				stack[n-1].atKey = true
			}
		}
	}
	prev := int64(0)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // the decoder reports malformed JSON
		}
		raw := body[prev:dec.InputOffset()]
		prev = dec.InputOffset()
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= MaxDepth {
					return apierr.InvalidPayload(fmt.Sprintf("Property %s nests objects and arrays deeper than %d levels.", path(), MaxDepth))
				}
				stack = append(stack, level{array: t == '[', atKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				value()
			}
		case string:
			isKey := len(stack) > 0 && !stack[len(stack)-1].array && stack[len(stack)-1].atKey
			if why := changedString(raw, t); why != "" {
				if isKey {
					return apierr.InvalidPayload(fmt.Sprintf("A property name in %s %s.", path(), why))
				}
				return apierr.InvalidPayload(fmt.Sprintf("Property %s %s.", path(), why))
			}
			if isKey {
				stack[len(stack)-1].key = t
				stack[len(stack)-1].atKey = false
				continue
			}
			value()
		case json.Number:
			if _, err := strconv.ParseFloat(string(t), 64); err != nil {
				return apierr.InvalidPayload(fmt.Sprintf("Property %s is the number %s, outside the range this API stores (about ±1.8e308).", path(), clip(string(t))))
			}
			value()
		default:
			value()
		}
	}
}

// mayNeedCheck is one pass over the bytes that rules out, for most bodies,
// everything checkBody looks for, so that only those that might hold it are
// tokenized a second time: invalid UTF-8, a \u escape (NUL, a lone
// surrogate), a number with an exponent or of more than 300 digits, and more
// than MaxDepth objects and arrays in all.
func mayNeedCheck(body []byte) bool {
	if !utf8.Valid(body) {
		return true
	}
	opens, digits := 0, 0
	for i, c := range body {
		switch {
		case c >= '0' && c <= '9':
			if digits++; digits > 300 {
				return true
			}
			continue
		case c == 'e' || c == 'E':
			if i > 0 && (body[i-1] >= '0' && body[i-1] <= '9' || body[i-1] == '.') {
				return true
			}
		case c == '\\':
			if i+1 < len(body) && body[i+1] == 'u' {
				return true
			}
		case c == '{' || c == '[':
			if opens++; opens > MaxDepth {
				return true
			}
		}
		digits = 0
	}
	return false
}

// changedString says why the decoded string s is not the text the raw JSON
// token raw wrote, "" when it is.
func changedString(raw []byte, s string) string {
	if !utf8.Valid(raw) {
		return "is not valid UTF-8"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "contains a NUL character"
	}
	// The decoder writes U+FFFD for a lone surrogate escape; count those the
	// text wrote itself, as the character or as its escape.
	if n := strings.Count(s, "\uFFFD"); n > 0 {
		lower := bytes.ToLower(raw)
		if n > bytes.Count(raw, []byte("\uFFFD"))+bytes.Count(lower, []byte(`\ufffd`)) {
			return "holds an invalid \\u escape (a lone UTF-16 surrogate)"
		}
	}
	return ""
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
