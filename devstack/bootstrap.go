package devstack

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/tenancy"
)

// Credentials are what `tally dev` prints and writes to credentials.json.
type Credentials struct {
	Management ManagementCredentials `json:"management"`
	Projects   []ProjectCredentials  `json:"projects"`
	// Routers are the base URLs of the router replicas (`tally dev
	// --routers N`), the usual one first: one ring keeps the per-address
	// limits whichever a request goes to.
	Routers []string `json:"routers"`
}

// ManagementCredentials are a management key pair.
type ManagementCredentials struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// ProjectCredentials are a demo project's key pair and where to use it.
type ProjectCredentials struct {
	Cluster string `json:"cluster"`
	// BaseURL serves the project's cluster on a port of its own: it works
	// from any client. HostURL names the cluster's host on the router's
	// port, for clients that resolve *.localhost.
	BaseURL   string `json:"base_url"`
	HostURL   string `json:"host_url"`
	ProjectID string `json:"project_id"`
	AppID     string `json:"app_id"`
	AppToken  string `json:"app_token"`
	// The client-side pair, for /client/v1 from a trusted origin.
	ClientAppID string `json:"client_app_id"`
	ClientToken string `json:"client_app_token"`
}

// BaseURL is where this stack serves a cluster on a port of its own, a
// base URL that works from any client.
func (s *Stack) BaseURL(cluster string) string { return s.ClusterURLs[cluster] }

// HostURL is a cluster's base URL by its host name on the router's port.
func (s *Stack) HostURL(cluster string) string {
	api, _ := ClusterHosts(cluster, s.cfg.BaseDomain)
	return s.cfg.PublicScheme + "://" + api + ":" + s.RouterPort
}

// CreateManagementKey makes a management key pair.
func (s *Stack) CreateManagementKey(ctx context.Context, name string) (ManagementCredentials, error) {
	var out ManagementCredentials
	err := db.InTx(ctx, s.Tenancy, func(tx pgx.Tx) error {
		k, token, err := tenancy.CreateManagementKey(ctx, tx, name)
		out = ManagementCredentials{ID: k.ID, Token: token}
		return err
	})
	return out, err
}

// Bootstrap creates a management key and one demo project in every cluster.
func (s *Stack) Bootstrap(ctx context.Context) (Credentials, error) {
	var creds Credentials
	var err error
	if creds.Management, err = s.CreateManagementKey(ctx, "dev"); err != nil {
		return creds, err
	}
	for _, r := range s.cfg.Regions {
		p, err := s.CreateProject(ctx, "Demo "+r.Cluster, r.Cluster, "")
		if err != nil {
			return creds, err
		}
		creds.Projects = append(creds.Projects, p)
	}
	return creds, nil
}

// CreateProject makes a project in cluster on plan (the default when
// empty) with a server-side and a client-side key.
func (s *Stack) CreateProject(ctx context.Context, name, cluster, plan string) (ProjectCredentials, error) {
	p := tenancy.Project{Name: name, Cluster: cluster, Plan: plan,
		Settings: tenancy.Settings{Timezone: "UTC", Currency: "USD", WebhookVersion: "v2024-01-01"}}
	var key, client tenancy.AppKey
	var token, clientToken string
	err := db.InTx(ctx, s.Tenancy, func(tx pgx.Tx) error {
		var err error
		if key, token, err = tenancy.CreateProject(ctx, tx, &p); err != nil {
			return err
		}
		client, clientToken, err = tenancy.CreateAppKey(ctx, tx, p.ID, tenancy.KeyClient, "default")
		return err
	})
	return ProjectCredentials{Cluster: cluster, BaseURL: s.BaseURL(cluster), HostURL: s.HostURL(cluster), ProjectID: p.ID,
		AppID: key.AppID, AppToken: token, ClientAppID: client.AppID, ClientToken: clientToken}, err
}
