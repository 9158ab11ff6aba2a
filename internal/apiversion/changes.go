package apiversion

import (
	"encoding/json"
	"net/http"
)

// Changes are the interface's differences between versions, as transforms
// of the routes they concern. Handlers serve the newest shapes; these take
// them back for requests of older versions.
var Changes = []Transform{
	// v2017-04-20: publishing answers a publication; before, the voucher.
	{Method: http.MethodPost, Route: "/v1/publications", Since: "v2017-04-20", Response: PublicationToVoucher},
	{Method: http.MethodGet, Route: "/v1/publications/create", Since: "v2017-04-20", Response: PublicationToVoucher},
}

// Interface returns a registry holding Changes: the one a service mounts.
func Interface() *Registry {
	r := NewRegistry()
	for _, t := range Changes {
		r.Add(t)
	}
	return r
}

// PublicationToVoucher takes a publication answer back to the bare voucher
// that versions before v2017-04-20 answered. Errors, and an answer with no
// voucher, pass unchanged.
func PublicationToVoucher(status int, body []byte) ([]byte, error) {
	if status < 200 || status > 299 {
		return body, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return body, nil
	}
	if v, ok := m["voucher"]; ok && len(v) > 0 && v[0] == '{' {
		return v, nil
	}
	return body, nil
}
