package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/peerlimit"
	"github.com/tallyhq/tally/internal/pglocal"
	"github.com/tallyhq/tally/internal/telemetry/tracing"
	"github.com/tallyhq/tally/regional/bin"
	"github.com/tallyhq/tally/regional/webhooks"
	"github.com/tallyhq/tally/tenancy"
)

// runDev runs the whole platform locally over four PostgreSQL servers kept
// under the data dir, until Ctrl-C.
func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ExitOnError)
	dataDir := fs.String("data-dir", ".tally", "where the databases, the identity secret and credentials.json live")
	addr := fs.String("addr", ":8080", "router listen address")
	clusterPort := fs.Int("cluster-port", 8081, "first port of the clusters' own ports (api, us1, as1), served whatever the Host; 0 picks free ports")
	adminPort := fs.Int("admin-port", 9090, "first port of the admin endpoints (router, management, api, us1, as1); 0 turns them off")
	domain := fs.String("base-domain", "localhost", "domain of the cluster hosts")
	retention := fs.Duration("bin-retention", bin.DefaultRetention, "how long deleted products and SKUs stay in the bin")
	routers := fs.Int("routers", 1, "router replicas to run, each on a port of its own (the first on --addr), as one ring keeping the per-address limits; their base URLs are listed in credentials.json as routers")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *routers < 1 {
		return errors.New("--routers: at least 1")
	}
	log := logger()
	shutdown, err := tracing.Setup(ctx, "tally-dev")
	if err != nil {
		return err
	}
	defer func() { _ = shutdown(context.Background()) }()
	dir, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}

	// Four servers: the directory and one per region.
	names := []string{"tenancy", "api", "us1", "as1"}
	servers := make([]*pglocal.Server, len(names))
	defer func() {
		for i, s := range servers {
			if s != nil {
				if err := s.Stop(); err != nil {
					log.Error("stopping PostgreSQL", "server", names[i], "err", err.Error())
				}
			}
		}
		log.Info("PostgreSQL servers stopped")
	}()
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			s, err := pglocal.Start(gctx, pglocal.Options{Dir: filepath.Join(dir, "pg", name)})
			if err != nil {
				return fmt.Errorf("%s database: %w", name, err)
			}
			servers[i] = s
			return s.CreateDatabase(gctx, "tally")
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	log.Info("PostgreSQL servers started", "dir", filepath.Join(dir, "pg"))

	key, err := secretFile(dir, "identity.secret")
	if err != nil {
		return err
	}
	operator, err := secretFile(dir, "operator.secret")
	if err != nil {
		return err
	}
	regions := devstack.DefaultRegions()
	for i := range regions {
		regions[i].DatabaseURL = servers[i+1].URL("tally")
	}
	stack, err := devstack.Start(ctx, devstack.Config{BaseDomain: *domain, RouterAddr: *addr, TenancyURL: servers[0].URL("tally"),
		Regions: regions, IdentitySecret: key, OperatorSecret: operator, AdminBasePort: *adminPort, Log: log,
		// Local receivers are the point of trying webhooks on one machine.
		Webhooks: webhooks.Options{AllowPrivateTargets: true}, BinRetention: *retention, ClusterBasePort: *clusterPort,
		Routers: *routers, StartRing: peerlimit.StartMember})
	if err != nil {
		return err
	}
	defer stack.Close()

	creds, err := devCredentials(ctx, stack, filepath.Join(dir, "credentials.json"))
	if err != nil {
		return err
	}
	printWelcome(os.Stdout, creds, filepath.Join(dir, "credentials.json"), *adminPort)
	select {
	case <-ctx.Done():
		log.Info("stopping")
	case err := <-stack.Errors():
		return err
	}
	return nil
}

// secretFile is a secret kept in the data dir, so that restarts keep
// their keys valid.
func secretFile(dir, name string) ([]byte, error) {
	p := filepath.Join(dir, name)
	if b, err := os.ReadFile(p); err == nil {
		return hex.DecodeString(string(b))
	}
	s := ids.Secret(32)
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		return nil, err
	}
	return hex.DecodeString(s)
}

// devCredentials reads credentials.json when its keys still exist, and
// otherwise bootstraps a management key and a demo project per cluster.
func devCredentials(ctx context.Context, stack *devstack.Stack, path string) (devstack.Credentials, error) {
	var creds devstack.Credentials
	if b, err := os.ReadFile(path); err == nil {
		if json.Unmarshal(b, &creds) == nil {
			_, err := tenancy.GetManagementKey(ctx, stack.Tenancy, creds.Management.ID)
			if err == nil {
				for i := range creds.Projects { // the ports may have changed
					creds.Projects[i].BaseURL = stack.BaseURL(creds.Projects[i].Cluster)
					creds.Projects[i].HostURL = stack.HostURL(creds.Projects[i].Cluster)
				}
				creds.Routers = stack.RouterURLs
				return creds, writeJSON(path, creds)
			}
			if !errors.Is(err, tenancy.ErrKeyNotFound) {
				return creds, err
			}
		}
	}
	creds, err := stack.Bootstrap(ctx)
	if err != nil {
		return creds, err
	}
	creds.Routers = stack.RouterURLs
	return creds, writeJSON(path, creds)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// printWelcome writes the banner of `tally dev`: the credentials, curl
// lines to try, and where the router's metrics are (the first admin port,
// adminPort; none when 0 turned the admin endpoints off).
func printWelcome(w io.Writer, c devstack.Credentials, path string, adminPort int) {
	fmt.Fprintf(w, "\nTally is running. Credentials (also in %s):\n\n", path)
	fmt.Fprintf(w, "  management  X-Management-Id: %s\n              X-Management-Token: %s\n\n", c.Management.ID, c.Management.Token)
	for _, p := range c.Projects {
		fmt.Fprintf(w, "  %-4s %s (or %s)  project %s\n       X-App-Id: %s\n       X-App-Token: %s\n\n", p.Cluster, p.BaseURL, p.HostURL,
			p.ProjectID, p.AppID, p.AppToken)
	}
	fmt.Fprintln(w, "Try:")
	for _, p := range c.Projects {
		fmt.Fprintf(w, "  curl %s/v1/customers -H 'X-App-Id: %s' -H 'X-App-Token: %s'\n", p.BaseURL, p.AppID, p.AppToken)
	}
	if len(c.Projects) > 0 {
		p := c.Projects[0]
		fmt.Fprintf(w, "  curl %s/v1/customers -H 'X-App-Id: %s' -H 'X-App-Token: %s' -H 'Content-Type: application/json' -d '{\"source_id\":\"ann\",\"name\":\"Ann\"}'\n",
			p.BaseURL, p.AppID, p.AppToken)
		fmt.Fprintf(w, "  curl %s/management/v1/projects -H 'X-Management-Id: %s' -H 'X-Management-Token: %s'\n",
			p.BaseURL, c.Management.ID, c.Management.Token)
	}
	if len(c.Routers) > 1 {
		fmt.Fprintf(w, "\nRouter replicas (one ring for the per-address limits): %s\n", strings.Join(c.Routers, " "))
	}
	if adminPort != 0 {
		fmt.Fprintf(w, "\nMetrics: http://127.0.0.1:%d/metrics (router). Ctrl-C stops everything.\n\n", adminPort)
	} else {
		fmt.Fprintf(w, "\nCtrl-C stops everything.\n\n")
	}
}
