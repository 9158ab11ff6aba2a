package conformance

import (
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A wrong type in an answer is found, by this process and by a run's
// server alike, and a defect of the reference's own is forgiven.
func TestAnAnswerOffTheReferenceIsFoundHereAndByTheRunsServer(t *testing.T) {
	if Skipped() {
		t.Skip("TALLY_SKIP_CONFORMANCE is set")
	}
	xs := []Exchange{
		{Method: "GET", Path: "/v1/vouchers/ABC", Status: 200, Body: []byte(`{"code": 5, "object": "voucher"}`)},
		{Method: "GET", Path: "/v1/no-such-operation", Status: 200, Body: []byte(`{"code": 5}`)},
	}
	local, err := checkLocal(xs)
	if err != nil {
		t.Fatal(err)
	}
	if local.Absent {
		t.Skip("the reference description is absent")
	}
	if !slices.ContainsFunc(local.Errors, func(m string) bool { return strings.Contains(m, "/v1/vouchers/{code}") && strings.Contains(m, "/code") }) {
		t.Fatalf("the voucher's numeric code is not found: %q", local.Errors)
	}
	for _, m := range local.Errors {
		if strings.Contains(m, "no-such-operation") {
			t.Fatalf("an operation the reference does not describe is checked: %q", m)
		}
	}

	sock := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { _ = Serve(ln) }()
	t.Setenv(EnvSocket, sock)
	remote, err := Check(xs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(remote.Errors, local.Errors) {
		t.Fatalf("the run's server found %q, this process %q", remote.Errors, local.Errors)
	}

	// A schema by name, remotely: a wrong type found, a right one passes.
	bad, err := Schema("Voucher", map[string]any{"code": 5.0})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad.Errors) == 0 {
		t.Fatal("a numeric code passes the Voucher schema")
	}
	if _, err := Schema("NoSuchSchema", map[string]any{}); err == nil {
		t.Fatal("an unknown schema is not an error")
	}
}
