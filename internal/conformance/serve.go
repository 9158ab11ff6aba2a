package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// EnvSocket names the unix socket of a test run's conformance server
// (Serve): set, Check and Schema ask it rather than parse the reference
// in the calling process.
const EnvSocket = "TALLY_CONFORMANCE_SOCKET"

// Skipped reports whether the check is turned off (TALLY_SKIP_CONFORMANCE).
func Skipped() bool { return os.Getenv("TALLY_SKIP_CONFORMANCE") != "" }

// Result is what a check found: Absent when the reference description is
// not there to check against (nothing was checked).
type Result struct {
	Absent bool     `json:"absent"`
	Errors []string `json:"errors"`
}

// Preload starts parsing the reference in the background when this process
// checks by itself, so that the seconds it takes pass while a test runs.
func Preload() {
	if Skipped() || os.Getenv(EnvSocket) != "" {
		return
	}
	go func() { _ = load() }()
}

// Check is what the reference finds wrong with the answers xs, each
// complaint once per answer.
func Check(xs []Exchange) (Result, error) {
	if sock := os.Getenv(EnvSocket); sock != "" {
		var r Result
		return r, ask(sock, "/check", xs, &r)
	}
	return checkLocal(xs)
}

// Schema is what the reference finds wrong with v, a value as JSON decodes
// it, against its component schema name.
func Schema(name string, v any) (Result, error) {
	if sock := os.Getenv(EnvSocket); sock != "" {
		var r Result
		return r, ask(sock, "/schema", schemaAsk{Name: name, Value: v}, &r)
	}
	return schemaLocal(name, v)
}

type schemaAsk struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

func checkLocal(xs []Exchange) (Result, error) {
	if err := load(); err != nil {
		return Result{}, fmt.Errorf("loading the reference description: %w", err)
	}
	if reference.doc == nil {
		return Result{Absent: true}, nil
	}
	var out []string
	for _, x := range xs {
		out = append(out, errorsOf(x)...)
	}
	return Result{Errors: out}, nil
}

func schemaLocal(name string, v any) (Result, error) {
	if err := load(); err != nil {
		return Result{}, fmt.Errorf("loading the reference description: %w", err)
	}
	if reference.doc == nil {
		return Result{Absent: true}, nil
	}
	ref := reference.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return Result{}, fmt.Errorf("the reference defines no schema %s", name)
	}
	var out []string
	if err := ref.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		for _, se := range schemaErrors(err) {
			out = append(out, fmt.Sprintf("%s at /%s: %s", name, strings.Join(se.JSONPointer(), "/"), se.Reason))
		}
	}
	return Result{Errors: out}, nil
}

// Serve answers Check and Schema for the processes of a test run on ln
// until it is closed; the reference is parsed on the first question.
func Serve(ln net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /check", func(w http.ResponseWriter, r *http.Request) {
		var xs []Exchange
		answer(w, json.NewDecoder(r.Body).Decode(&xs), func() (Result, error) { return checkLocal(xs) })
	})
	mux.HandleFunc("POST /schema", func(w http.ResponseWriter, r *http.Request) {
		var q schemaAsk
		answer(w, json.NewDecoder(r.Body).Decode(&q), func() (Result, error) { return schemaLocal(q.Name, q.Value) })
	})
	err := (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
	if errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func answer(w http.ResponseWriter, decodeErr error, check func() (Result, error)) {
	if decodeErr != nil {
		http.Error(w, decodeErr.Error(), http.StatusBadRequest)
		return
	}
	r, err := check()
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(r)
}

// ask posts q to the run's server on the unix socket sock and decodes its
// answer into out.
func ask(sock, path string, q, out any) error {
	body, err := json.Marshal(q)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	defer client.CloseIdleConnections()
	resp, err := client.Post("http://conformance"+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("asking the run's conformance server (%s): %w", sock, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, out)
}
