package router_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/router"
	"github.com/tallyhq/tally/tenancy"
)

// certFiles writes a self-signed certificate for names, with serial, as
// a mounted kubernetes.io/tls Secret: dir/tls.crt and dir/tls.key, each
// replaced by a rename as the kubelet swaps a renewed Secret in.
func certFiles(t *testing.T, dir string, serial int64, names ...string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	writeAtomically(t, filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	c, _ := x509.ParseCertificate(der)
	return c
}

func writeAtomically(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// served is the leaf certificate a TLS client asking for serverName gets.
func served(t *testing.T, addr, serverName string) *x509.Certificate {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("handshake for %q: %v", serverName, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

// With --tls-dir the router's public listener serves HTTPS: the
// certificate whose SANs name the SNI host (a wildcard for the regional
// hosts), the first pair without SNI, renewed files without a restart, TLS
// 1.2 at least and HTTP/1.1; the request goes upstream marked https, from
// the TCP client's address, and a request framed two ways is still
// refused, since the framing follower reads the decrypted bytes. Broken
// pairs are skipped; the plain listener redirects with 308.
func TestRouterServesTLSByNameAndPicksUpRenewals(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	got := make(chan *http.Request, 1)
	p := upstreamCluster(t, e, "echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r:
		default:
		}
		io.WriteString(w, "hello")
	}))

	dir := t.TempDir()
	apiCert := certFiles(t, filepath.Join(dir, "api"), 1, "api.example.test")
	wildCert := certFiles(t, filepath.Join(dir, "regions"), 2, "*.api.example.test")
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil { // a Secret not yet issued
		t.Fatal(err)
	}
	writeAtomically(t, filepath.Join(dir, "broken", "tls.crt"), []byte("not a certificate"))
	writeAtomically(t, filepath.Join(dir, "broken", "tls.key"), []byte("not a key"))
	log := telemetry.NewLogger(io.Discard, 0)
	certs, err := router.LoadCertDir(dir, router.CertDirOptions{CheckEvery: 20 * time.Millisecond, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if names := certs.Names(); len(names) != 2 {
		t.Fatalf("loaded %v, want the two good pairs", names)
	}
	rt, err := router.New(router.Config{BaseDomain: "localhost", IdentitySecret: stacktest.Secret,
		Resolver: tenancy.NewResolver(e.Stack.Tenancy, tenancy.ResolverOptions{Log: log}), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := rt.PublicOptions()
	public.TLS = certs.TLSConfig()
	go httpx.ServePublic(ctx, l, rt.Handler(), public)
	addr := l.Addr().String()

	for sni, want := range map[string]*x509.Certificate{
		"api.example.test":     apiCert,
		"us1.api.example.test": wildCert,
		"AS1.api.example.test": wildCert,
		"":                     apiCert, // no SNI: the first pair by name
		"other.example.test":   apiCert, // no SAN names it: the first too
	} {
		if c := served(t, addr, sni); c.SerialNumber.Cmp(want.SerialNumber) != 0 {
			t.Errorf("SNI %q: served %v, want %v", sni, c.DNSNames, want.DNSNames)
		}
	}
	if _, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "api.example.test", InsecureSkipVerify: true,
		MaxVersion: tls.VersionTLS11}); err == nil {
		t.Error("a TLS 1.1 handshake succeeded")
	}

	// A request end to end, verified against the certificates, HTTP/2 offered.
	roots := x509.NewCertPool()
	roots.AddCert(apiCert)
	roots.AddCert(wildCert)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "echo.api.example.test"},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
	req, _ := http.NewRequest("GET", "https://echo.api.localhost/v1/anything", nil)
	req.Header = p.Header()
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "hello" || res.Proto != "HTTP/1.1" {
		t.Fatalf("through TLS: %s %d %s", res.Proto, res.StatusCode, body)
	}
	in := <-got
	if in.Header.Get("X-Forwarded-Proto") != "https" || in.Header.Get("X-Forwarded-For") != "127.0.0.1" {
		t.Errorf("upstream saw X-Forwarded-Proto %q, X-Forwarded-For %q; want https and the TCP client's address",
			in.Header.Get("X-Forwarded-Proto"), in.Header.Get("X-Forwarded-For"))
	}

	// Content-Length with Transfer-Encoding, over TLS.
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "echo.api.example.test", RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "POST /v1/anything HTTP/1.1\r\nHost: echo.api.localhost\r\nX-App-Id: "+p.AppID+"\r\nX-App-Token: "+p.AppToken+
		"\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if !strings.HasPrefix(line, "HTTP/1.1 400") {
		t.Errorf("a request framed two ways over TLS: %q, want 400", line)
	}

	// Renewal: new files for api.example.test, picked up with no restart;
	// a renewal that does not load keeps the certificate loaded.
	renewed := certFiles(t, filepath.Join(dir, "api"), 3, "api.example.test")
	writeAtomically(t, filepath.Join(dir, "regions", "tls.crt"), []byte("half-written"))
	stacktest.Eventually(t, 5*time.Second, "the renewed certificate is served", func() bool {
		return served(t, addr, "api.example.test").SerialNumber.Cmp(renewed.SerialNumber) == 0
	})
	time.Sleep(50 * time.Millisecond)
	if c := served(t, addr, "us1.api.example.test"); c.SerialNumber.Cmp(wildCert.SerialNumber) != 0 {
		t.Errorf("after a renewal that does not load: served %v %v, want the loaded wildcard", c.SerialNumber, c.DNSNames)
	}

	// The plain listener: 308 to the same URL over https, a write's too.
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plain := rt.PublicOptions()
	go httpx.ServePublic(ctx, pl, router.RedirectToHTTPS(), plain)
	noFollow := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, pl.Addr().String())
		}}}
	for _, method := range []string{"GET", "POST"} {
		req, _ := http.NewRequest(method, "http://us1.api.example.test:8080/v1/customers?limit=1&email=a%40b", strings.NewReader("{}"))
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if want := "https://us1.api.example.test/v1/customers?limit=1&email=a%40b"; res.StatusCode != 308 || res.Header.Get("Location") != want {
			t.Errorf("%s over plain HTTP: %d Location %q, want 308 %s", method, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
}

// The router does not start on a directory from which no pair loads.
func TestCertDirWithoutALoadablePairIsRefused(t *testing.T) {
	dir := t.TempDir()
	writeAtomically(t, filepath.Join(dir, "broken", "tls.crt"), []byte("not a certificate"))
	writeAtomically(t, filepath.Join(dir, "broken", "tls.key"), []byte("not a key"))
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	log := telemetry.NewLogger(io.Discard, 0)
	for _, d := range []string{dir, filepath.Join(dir, "missing")} {
		if _, err := router.LoadCertDir(d, router.CertDirOptions{Log: log}); err == nil {
			t.Errorf("LoadCertDir(%s) succeeded", d)
		}
	}
}
