package router

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/tenancy"
)

// clusterResolver finds a cluster by its name (tenancy.Resolver).
type clusterResolver interface {
	ClusterByName(ctx context.Context, name string) (tenancy.Cluster, error)
}

// clusterStep refuses a project's request that came to another cluster's
// host, with 421 and the base URL its requests belong at: a project lives
// in one region and its data never leaves it.
type clusterStep struct {
	clusters clusterResolver
	// scheme and port build a cluster's base URL from its API host:
	// "https" and "" in production, "http" and "8080" in `tally dev`.
	scheme, port string
	// publicURLs are the base URLs of clusters served on a port of their
	// own (Config.PublicURLs), told to a request that came by one.
	publicURLs map[string]string
}

func (s clusterStep) serve(c echo.Context, x *call, next handler) error {
	if !x.caller.hasProject() || x.caller.project.Cluster == x.route.cluster.Name {
		return next(c, x)
	}
	ctx := c.Request().Context()
	p := x.caller.project
	home, err := s.clusters.ClusterByName(ctx, p.Cluster)
	if err != nil {
		return resolverError(err)
	}
	base := ""
	if _, byPort := ctx.Value(fixedHostKey{}).(string); byPort {
		base = s.publicURLs[home.Name]
	}
	if base == "" {
		base = s.scheme + "://" + home.APIHost
		if s.port != "" {
			base += ":" + s.port
		}
	}
	return &apierr.Error{Status: http.StatusMisdirectedRequest, Key: "wrong_cluster", Message: "Wrong cluster",
		Details: fmt.Sprintf("Project %s lives in cluster %s; send its requests to %s", p.ID, home.Name, base)}
}
