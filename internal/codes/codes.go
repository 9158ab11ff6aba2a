// Package codes makes voucher codes as a campaign's code_config describes
// them: loyalty cards now, and discount vouchers, gift cards and referral
// codes, which share the config.
package codes

import (
	"math"
	"math/rand/v2"
	"strings"
	"unicode/utf8"

	"github.com/tallyhq/tally/internal/apierr"
)

const defaultCharset = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Config is how a campaign's codes look (code_config).
type Config struct {
	Length       *int    `json:"length"`
	Charset      *string `json:"charset"`
	Prefix       *string `json:"prefix"`
	Postfix      *string `json:"postfix"`
	Pattern      *string `json:"pattern"`
	InitialCount *int    `json:"initial_count,omitempty"`
}

// Generator makes codes as a campaign's code_config says: `#` in the
// pattern is a random character of the charset; without a pattern, length
// random characters; prefix and postfix around either.
type Generator struct {
	charset         []rune
	pattern         []rune
	prefix, postfix string
}

// New checks a config and returns its generator.
func New(cc Config) (Generator, error) {
	g := Generator{charset: []rune(defaultCharset)}
	if cc.Charset != nil {
		if *cc.Charset == "" || !utf8.ValidString(*cc.Charset) {
			return g, apierr.InvalidPayload("voucher.code_config.charset must be a non-empty set of characters")
		}
		seen := map[rune]bool{}
		g.charset = nil
		for _, r := range *cc.Charset {
			if !seen[r] {
				seen[r] = true
				g.charset = append(g.charset, r)
			}
		}
	}
	if cc.Prefix != nil {
		g.prefix = *cc.Prefix
	}
	if cc.Postfix != nil {
		g.postfix = *cc.Postfix
	}
	switch {
	case cc.Pattern != nil && *cc.Pattern != "":
		if !strings.Contains(*cc.Pattern, "#") {
			return g, apierr.InvalidPayload("voucher.code_config.pattern must hold at least one # (a random character)")
		}
		g.pattern = []rune(*cc.Pattern)
	default:
		n := 8
		if cc.Length != nil {
			n = *cc.Length
		}
		if n < 1 || n > 100 {
			return g, apierr.InvalidPayload("voucher.code_config.length must be from 1 to 100")
		}
		g.pattern = []rune(strings.Repeat("#", n))
	}
	if len(g.prefix)+len(g.postfix)+len(g.pattern)*4 > 250 {
		return g, apierr.InvalidPayload("voucher.code_config makes codes longer than 250 bytes")
	}
	return g, nil
}

// space is how many distinct codes the config can make (capped).
func (g Generator) space() float64 {
	k := strings.Count(string(g.pattern), "#")
	return math.Pow(float64(len(g.charset)), float64(k))
}

// Check refuses a config that cannot make n codes without endless
// collisions: the space must be at least twice n.
func (g Generator) Check(n int64) error {
	if g.space() < 2*float64(n) {
		return apierr.InvalidPayload("voucher.code_config cannot make enough distinct codes: widen the charset or lengthen the code")
	}
	return nil
}

// Next is a new random code.
func (g Generator) Next() string {
	var b strings.Builder
	b.WriteString(g.prefix)
	for _, r := range g.pattern {
		if r == '#' {
			b.WriteRune(g.charset[rand.IntN(len(g.charset))])
		} else {
			b.WriteRune(r)
		}
	}
	b.WriteString(g.postfix)
	return b.String()
}
