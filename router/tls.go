package router

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CertDir serves the router's TLS certificates from a directory whose
// subdirectories each hold a tls.crt (the chain, leaf first) and a tls.key,
// as a mounted kubernetes.io/tls Secret does: /etc/tally/tls/<secret>/.
// A handshake gets the certificate whose SANs name its SNI host (exact
// names before wildcards); without SNI, or for a host none names, the
// first subdirectory's by name. Renewed files (cert-manager rewrites the
// Secret, the kubelet swaps the mounted files) are picked up without a
// restart: at most every CheckEvery, a handshake looks at the files' times
// and sizes and reloads the pairs that changed.
type CertDir struct {
	dir        string
	log        *slog.Logger
	checkEvery time.Duration
	now        func() time.Time

	set      atomic.Pointer[certSet]
	checking sync.Mutex
	checked  atomic.Int64 // unix nanoseconds of the last look at the files
}

type certSet struct{ pairs []*certPair } // by subdirectory name

type certPair struct {
	name     string
	cert     *tls.Certificate
	names    []string // the leaf's DNS SANs, lower case
	crt, key fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// CertDirOptions tune a CertDir; the zero value is production's.
type CertDirOptions struct {
	// CheckEvery is how often, at most, the files are looked at for a
	// renewal (default 5 s).
	CheckEvery time.Duration
	Log        *slog.Logger
}

// LoadCertDir loads every pair in dir. A pair that is missing a file or
// does not load is logged and skipped; it fails only when none loads.
func LoadCertDir(dir string, o CertDirOptions) (*CertDir, error) {
	if o.CheckEvery <= 0 {
		o.CheckEvery = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	d := &CertDir{dir: dir, log: o.Log, checkEvery: o.CheckEvery, now: time.Now}
	set, err := d.scan(nil)
	if err != nil {
		return nil, err
	}
	if len(set.pairs) == 0 {
		return nil, fmt.Errorf("router: no certificate loads from %s: each subdirectory needs tls.crt and tls.key", dir)
	}
	d.set.Store(set)
	d.checked.Store(d.now().UnixNano())
	return d, nil
}

// TLSConfig is the listener's configuration: TLS 1.2 at least, the
// certificate chosen per handshake.
func (d *CertDir) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: d.GetCertificate}
}

// Names lists the loaded pairs' subdirectories and their SANs.
func (d *CertDir) Names() map[string][]string {
	out := map[string][]string{}
	for _, p := range d.set.Load().pairs {
		out[p.name] = p.names
	}
	return out
}

// GetCertificate picks the certificate for a handshake (tls.Config).
func (d *CertDir) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	d.maybeReload()
	return d.set.Load().choose(hello.ServerName), nil
}

func (s *certSet) choose(serverName string) *tls.Certificate {
	host := strings.ToLower(strings.TrimSuffix(serverName, "."))
	if host != "" && net.ParseIP(host) == nil {
		for _, p := range s.pairs {
			for _, n := range p.names {
				if n == host {
					return p.cert
				}
			}
		}
		// A wildcard covers one label: *.api.example.com names
		// us1.api.example.com, not api.example.com nor a.b.api.example.com.
		if i := strings.IndexByte(host, '.'); i > 0 {
			wild := "*" + host[i:]
			for _, p := range s.pairs {
				for _, n := range p.names {
					if n == wild {
						return p.cert
					}
				}
			}
		}
	}
	return s.pairs[0].cert
}

// maybeReload looks at the files when CheckEvery has passed since the
// last look; one handshake looks while the others go on with what is loaded.
func (d *CertDir) maybeReload() {
	now := d.now()
	if now.UnixNano()-d.checked.Load() < int64(d.checkEvery) || !d.checking.TryLock() {
		return
	}
	defer d.checking.Unlock()
	d.checked.Store(now.UnixNano())
	set, err := d.scan(d.set.Load())
	if err != nil {
		d.log.Error("tls: reading the certificate directory; serving what is loaded", "dir", d.dir, "err", err.Error())
		return
	}
	if len(set.pairs) == 0 {
		d.log.Error("tls: no certificate loads any more; serving what is loaded", "dir", d.dir)
		return
	}
	d.set.Store(set)
}

// scan reads the directory, keeping from old the pairs whose files did not
// change, and the old pair of one whose new files do not load (a renewal
// caught halfway is read again on the next look).
func (d *CertDir) scan(old *certSet) (*certSet, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	prev := map[string]*certPair{}
	if old != nil {
		for _, p := range old.pairs {
			prev[p.name] = p
		}
	}
	set := &certSet{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // the kubelet's ..data and timestamped directories
		}
		sub := filepath.Join(d.dir, name)
		if fi, err := os.Stat(sub); err != nil || !fi.IsDir() {
			continue
		}
		crt, errC := stamp(filepath.Join(sub, "tls.crt"))
		key, errK := stamp(filepath.Join(sub, "tls.key"))
		p := prev[name]
		if errC != nil || errK != nil {
			if p != nil {
				d.log.Error("tls: a certificate's files are gone; serving the loaded one", "pair", sub, "err", errors.Join(errC, errK).Error())
				set.pairs = append(set.pairs, p)
			} else {
				d.log.Warn("tls: skipping a directory without tls.crt and tls.key", "dir", sub, "err", errors.Join(errC, errK).Error())
			}
			continue
		}
		if p != nil && p.crt.same(crt) && p.key.same(key) {
			set.pairs = append(set.pairs, p)
			continue
		}
		np, err := loadPair(name, sub, crt, key)
		switch {
		case err == nil:
			if p != nil {
				d.log.Info("tls: reloaded a renewed certificate", "pair", sub, "names", np.names, "not_after", np.cert.Leaf.NotAfter)
			}
			set.pairs = append(set.pairs, np)
		case p != nil:
			d.log.Error("tls: a renewed certificate does not load; serving the loaded one", "pair", sub, "err", err.Error())
			set.pairs = append(set.pairs, p)
		default:
			d.log.Error("tls: skipping a certificate that does not load", "pair", sub, "err", err.Error())
		}
	}
	sort.Slice(set.pairs, func(i, j int) bool { return set.pairs[i].name < set.pairs[j].name })
	return set, nil
}

func (a fileStamp) same(b fileStamp) bool { return a.mod.Equal(b.mod) && a.size == b.size }

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path) // through the kubelet's symbolic links
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

func loadPair(name, dir string, crt, key fileStamp) (*certPair, error) {
	c, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, err
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, err
		}
	}
	p := &certPair{name: name, cert: &c, crt: crt, key: key}
	for _, n := range c.Leaf.DNSNames {
		p.names = append(p.names, strings.ToLower(n))
	}
	return p, nil
}

// RedirectToHTTPS answers every request 308 to the same host, path and
// query over https (on its default port): the plain-HTTP listener of a
// router that serves TLS. 308 keeps the method and body of a write, so a
// client that posts to http:// is not turned into a GET.
func RedirectToHTTPS() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := hostOnly(r.Host)
		if host == "" || strings.ContainsAny(host, "/\\@?#") {
			http.Error(w, "a Host header is required", http.StatusBadRequest)
			return
		}
		if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
			host = "[" + host + "]" // a bare IPv6 address
		}
		target := r.URL.RequestURI()
		if !strings.HasPrefix(target, "/") {
			target = "/" // OPTIONS *
		}
		w.Header().Set("Location", "https://"+host+target)
		w.WriteHeader(http.StatusPermanentRedirect)
	})
}
