package rules

import (
	"fmt"
	"strings"
)

// The logic expression over a level's condition keys: keys, and, or
// (any case; and binds tighter) and parentheses, as "1 and (2 or 3)".

// expr is a parsed logic expression.
type expr interface {
	// eval says whether the expression holds and, when it does not, which
	// condition failed it (the one whose error message the verdict gives).
	eval(g *group, s *scope) (bool, *cond)
}

type (
	leaf string
	and  []expr
	or   []expr
)

func (l leaf) eval(g *group, s *scope) (bool, *cond) { return g.conds[string(l)].eval(s) }

// eval of and: the first operand that fails is the cause.
func (a and) eval(g *group, s *scope) (bool, *cond) {
	for _, e := range a {
		if ok, why := e.eval(g, s); !ok {
			return false, why
		}
	}
	return true, nil
}

// eval of or: when none holds, the first operand's failure is the cause.
func (o or) eval(g *group, s *scope) (bool, *cond) {
	var first *cond
	for i, e := range o {
		ok, why := e.eval(g, s)
		if ok {
			return true, nil
		}
		if i == 0 {
			first = why
		}
	}
	return len(o) == 0, first
}

type token struct {
	text string
	pos  int // 1-based character position, for messages
}

func tokenize(s string) ([]token, error) {
	var out []token
	rs := []rune(s)
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			i++
		case r == '(' || r == ')':
			out = append(out, token{string(r), i + 1})
			i++
		case isWordRune(r):
			j := i
			for j < len(rs) && isWordRune(rs[j]) {
				j++
			}
			out = append(out, token{string(rs[i:j]), i + 1})
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q at character %d; logic is condition keys joined by and, or and parentheses, as \"1 and (2 or 3)\"", r, i+1)
		}
	}
	return out, nil
}

type parser struct {
	toks  []token
	i     int
	conds map[string]*cond
}

// parseLogic parses s over the keys of conds.
func parseLogic(s string, conds map[string]*cond) (expr, error) {
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, conds: conds}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.i < len(p.toks) {
		t := p.toks[p.i]
		return nil, fmt.Errorf("unexpected %q at character %d; join conditions with and or or", t.text, t.pos)
	}
	return e, nil
}

func (p *parser) peekOp(op string) bool {
	return p.i < len(p.toks) && strings.EqualFold(p.toks[p.i].text, op)
}

// or and and parse terms joined by their word: and binds tighter.
func (p *parser) or() (expr, error) {
	return p.joined("or", p.and, func(es []expr) expr { return or(es) })
}

func (p *parser) and() (expr, error) {
	return p.joined("and", p.atom, func(es []expr) expr { return and(es) })
}

// joined parses next, then more of it after each op, as one expression.
func (p *parser) joined(op string, next func() (expr, error), join func([]expr) expr) (expr, error) {
	first, err := next()
	if err != nil {
		return nil, err
	}
	out := []expr{first}
	for p.peekOp(op) {
		p.i++
		e, err := next()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(out) == 1 {
		return first, nil
	}
	return join(out), nil
}

func (p *parser) atom() (expr, error) {
	if p.i >= len(p.toks) {
		return nil, fmt.Errorf("ends where a condition key or ( was expected")
	}
	t := p.toks[p.i]
	p.i++
	switch {
	case t.text == "(":
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.i >= len(p.toks) || p.toks[p.i].text != ")" {
			return nil, fmt.Errorf("the ( at character %d is not closed", t.pos)
		}
		p.i++
		return e, nil
	case t.text == ")" || strings.EqualFold(t.text, "and") || strings.EqualFold(t.text, "or"):
		return nil, fmt.Errorf("unexpected %q at character %d where a condition key was expected", t.text, t.pos)
	}
	if _, ok := p.conds[t.text]; !ok {
		return nil, fmt.Errorf("names condition %s (character %d), which the rules do not define", t.text, t.pos)
	}
	return leaf(t.text), nil
}
