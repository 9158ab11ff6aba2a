package exports

import "testing"

// The file's type follows Accept: CSV unless text/plain is preferred, and
// neither when Accept excludes both.
func TestFileTypeFollowsAccept(t *testing.T) {
	for _, c := range []struct {
		accept []string
		want   string
	}{
		{nil, "text/csv"},
		{[]string{"*/*"}, "text/csv"},
		{[]string{"text/*"}, "text/csv"},
		{[]string{"text/csv"}, "text/csv"},
		{[]string{"text/plain"}, "text/plain"},
		{[]string{"text/plain; charset=utf-8"}, "text/plain"},
		{[]string{"text/csv;q=0.5, text/plain"}, "text/plain"},
		{[]string{"text/csv", "text/plain;q=0.9"}, "text/csv"},
		{[]string{"application/json, text/plain;q=0.1"}, "text/plain"},
		{[]string{"text/*;q=0.2, text/csv;q=0"}, "text/plain"},
		{[]string{"*/*;q=0.1, text/plain;q=0.05"}, "text/csv"},
		{[]string{"application/json"}, ""},
		{[]string{"text/html, image/*"}, ""},
		{[]string{"text/csv;q=0, text/plain;q=0"}, ""},
		{[]string{"garbage/"}, ""},
	} {
		got, ok := fileType(c.accept)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("Accept %q: %q %v, want %q", c.accept, got, ok, c.want)
		}
	}
}
