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
