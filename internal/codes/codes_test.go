package codes

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestConfigsMakeTheCodesTheySay(t *testing.T) {
	s := func(v string) *string { return &v }
	n := func(v int) *int { return &v }
	g, err := New(Config{Prefix: s("LC-"), Postfix: s("-X"), Pattern: s("##-##"), Charset: s("AAB")})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		c := g.Next()
		if len(c) != len("LC-##-##-X") || !strings.HasPrefix(c, "LC-") || !strings.HasSuffix(c, "-X") || c[5] != '-' ||
			strings.Trim(c[3:5]+c[6:8], "AB") != "" {
			t.Fatalf("code %q does not follow LC-##-##-X over A and B", c)
		}
	}
	// The charset's repeated A counts once: 2^4 = 16 codes, enough for 8.
	if err := g.Check(8); err != nil {
		t.Errorf("8 of 16 codes: %v", err)
	}
	if err := g.Check(9); err == nil {
		t.Error("9 codes of 16: want a refusal, collisions would never end")
	}
	if g, err := New(Config{Length: n(12), Charset: s("ÄÖÜ")}); err != nil || utf8.RuneCountInString(g.Next()) != 12 {
		t.Errorf("12 characters of a multi-byte charset: %v", err)
	}
	for name, bad := range map[string]Config{
		"no # in the pattern": {Pattern: s("ABC")},
		"empty charset":       {Charset: s("")},
		"length 0":            {Length: n(0)},
		"length 101":          {Length: n(101)},
		"over 250 bytes":      {Length: n(63), Charset: s("ÄÖÜ")},
		"invalid UTF-8":       {Charset: s("\xff")},
	} {
		if _, err := New(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
