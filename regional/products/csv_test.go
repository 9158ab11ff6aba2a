package products

import (
	"strings"
	"testing"
)

// Every line of an imported file is a row or a bad row with its reason:
// nothing in a file's text can panic the worker that reads it.
func TestCSVRowsOfBrokenFiles(t *testing.T) {
	files := map[string]string{
		"unterminated quote":          "name,source_id,price\n\"A,a,1",
		"unterminated quote, newline": "name,source_id,price\n\"A,a,1\n",
		"quote mid field":             "name,source_id,price\nA\"b,a,1\n",
		"short row":                   "name,source_id,price\nA\n",
		"long row":                    "name,source_id,price\nA,a,1,2,3\n",
		"bare quote then good row":    "name,source_id,price\n\"A,a,1\nB,b,2\n",
		"empty lines":                 "name,source_id,price\n\n\n",
	}
	for name, file := range files {
		t.Run(name, func(t *testing.T) {
			for _, spec := range []csvSpec{productCSV, skuCSV} {
				h, rows, err := spec.rows([]byte(strings.Replace(file, "name,source_id,price", strings.Join(spec.required, ",")+",price", 1)))
				if err != nil {
					continue // a refused file is fine; a panic is not
				}
				duplicates(h, rows)
				for _, r := range rows {
					// A failed row's record names its source_id.
					for _, col := range spec.standard {
						h.get(r, col)
					}
					if spec.what == "products" {
						_, _ = productRow(h, r)
					} else {
						_, _, _ = skuRow(h, r)
					}
				}
			}
		})
	}
}
