package deploytest

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

var (
	listenRe  = regexp.MustCompile(`^(?:0\.0\.0\.0|\[::\])?:(\d+)$`)
	podAddrRe = regexp.MustCompile(`^127\.0\.0\.1:(\d+)$`)
	urlRe     = regexp.MustCompile(`([a-z][a-z0-9+.-]*)://([A-Za-z0-9.-]+)(?::(\d+))?`)
	svcRe     = regexp.MustCompile(`\b([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(?:\.cluster\.local)?\.?(?::(\d+))?`)
	pathRe    = regexp.MustCompile(`(^|[=,\s])(/[A-Za-z0-9._/-]*)`)
)

// rewrite maps one environment value or argument onto this machine.
func (p *Platform) rewrite(cc *container, env, v string) (string, error) {
	w := cc.w
	prefix := ""
	if i := strings.Index(v, "="); strings.HasPrefix(v, "-") && i > 0 { // --flag=value
		prefix, v = v[:i+1], v[i+1:]
	}
	// The pod's own IP (status.podIP, 127.0.0.1 here) and one of its
	// ports, as a pod advertises itself: that port's local one.
	if m := podAddrRe.FindStringSubmatch(v); m != nil {
		n, _ := strconv.Atoi(m[1])
		if port, ok := w.ports[int32(n)]; ok {
			return prefix + "127.0.0.1:" + strconv.Itoa(port), nil
		}
	}
	if m := listenRe.FindStringSubmatch(v); m != nil {
		n, _ := strconv.Atoi(m[1])
		port, ok := w.ports[int32(n)]
		if !ok {
			var err error
			if port, err = freePort(); err != nil {
				return "", err
			}
			w.ports[int32(n)] = port
			p.cfg.Logf("%s listens on %s, which no containerPort declares", w, v)
		}
		return prefix + "127.0.0.1:" + strconv.Itoa(port), nil
	}
	if strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") {
		u, err := p.database(cc, env, v)
		return prefix + u, err
	}
	var rerr error
	out := urlRe.ReplaceAllStringFunc(v, func(m string) string {
		sm := urlRe.FindStringSubmatch(m)
		scheme, host, portStr := sm[1], sm[2], sm[3]
		port, _ := strconv.Atoi(portStr)
		addr, ok, err := p.resolve(w.scope, w.Namespace, host, port, scheme)
		if err != nil {
			rerr = fmt.Errorf("%q: %w", v, err)
			return m
		}
		if !ok {
			return m
		}
		return scheme + "://" + addr
	})
	if !strings.Contains(v, "://") {
		out = svcRe.ReplaceAllStringFunc(out, func(m string) string {
			sm := svcRe.FindStringSubmatch(m)
			port, _ := strconv.Atoi(sm[5])
			addr, _, err := p.resolve(w.scope, w.Namespace, strings.TrimSuffix(strings.SplitN(m, ":", 2)[0], "."), port, "")
			if err != nil {
				rerr = fmt.Errorf("%q: %w", v, err)
				return m
			}
			return addr
		})
	}
	if rerr != nil {
		return "", rerr
	}
	return prefix + cc.localPaths(out), nil
}

// localPath maps an absolute path of the container's file system that is
// a mount, under one or above one, onto the container's root here.
func (cc *container) localPath(f string) (string, bool) {
	f = path.Clean(f)
	for _, m := range cc.c.VolumeMounts {
		mp := path.Clean(m.MountPath)
		if f == mp || strings.HasPrefix(f, mp+"/") || strings.HasPrefix(mp, f+"/") {
			return filepath.Join(cc.root, f), true
		}
	}
	return f, false
}

func (cc *container) localPaths(v string) string {
	return pathRe.ReplaceAllStringFunc(v, func(m string) string {
		sm := pathRe.FindStringSubmatch(m)
		if l, ok := cc.localPath(sm[2]); ok {
			return sm[1] + l
		}
		return m
	})
}

func (p *Platform) database(cc *container, env, raw string) (string, error) {
	w := cc.w
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("database URL: %w", err)
	}
	q := u.Query()
	// The files a verify-full connection needs must be mounted.
	for _, k := range []string{"sslrootcert", "sslcert", "sslkey"} {
		f := q.Get(k)
		if f == "" {
			continue
		}
		local, ok := cc.localPath(f)
		if !ok {
			return "", fmt.Errorf("database URL's %s=%s: no volumeMount of container %q holds that path", k, f, cc.c.Name)
		}
		if _, err := os.Stat(local); err != nil {
			return "", fmt.Errorf("database URL's %s=%s: the volume mounted there has no such file", k, f)
		}
	}
	// Its host must be something this cluster resolves.
	if h := u.Hostname(); h != "127.0.0.1" {
		where, err := p.exists(w.scope, w.Namespace, h)
		if err != nil {
			return "", fmt.Errorf("database URL's host %s: %w", h, err)
		}
		p.cfg.Logf("%s: database host %s is %s", cc.name, h, where)
	}
	if p.cfg.Database == nil {
		return "", errors.New("a database URL, and the test gives no local database")
	}
	return p.cfg.Database(DatabaseRef{Overlay: w.Overlay.Dir, Namespace: w.Namespace, Workload: w.Name, Env: env, URL: u})
}
