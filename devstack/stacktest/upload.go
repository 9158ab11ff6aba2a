package stacktest

import (
	"bytes"
	"mime/multipart"
)

// UploadCSV posts csv to path as the multipart form field `file`, as the
// SDKs send a CSV import (products, SKUs, vouchers): the name of the file
// is import.csv, which the imports do not read.
func (a API) UploadCSV(path, csv string) Resp {
	a.T.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	f, err := w.CreateFormFile("file", "import.csv")
	if err != nil {
		a.T.Fatal(err)
	}
	f.Write([]byte(csv))
	w.Close()
	h := a.P.Header()
	h.Set("Content-Type", w.FormDataContentType())
	return a.E.Do(a.T, "POST", URL(a.P.Cluster, path), h, body.Bytes())
}

// FailedRows maps each row an import's result lists as failed to its field
// named field (the reason; a voucher import's code).
func FailedRows(result map[string]any, field string) map[int]string {
	out := map[int]string{}
	for _, f := range result["failed"].([]any) {
		m := f.(map[string]any)
		out[int(m["row"].(float64))] = m[field].(string)
	}
	return out
}
