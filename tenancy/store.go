package tenancy

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apiversion"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
)

// Change kinds logged in directory_changes.
const (
	ChangeCluster       = "cluster"
	ChangeProject       = "project"
	ChangeAppKey        = "app_key"
	ChangeManagementKey = "management_key"
	ChangeWebhooks      = "webhooks" // key: the project id
	ChangePlan          = "plan"
)

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func tokenMatches(hash []byte, token string) bool {
	return subtle.ConstantTimeCompare(hash, hashToken(token)) == 1
}

// RecordChange logs that something a cache may hold changed; call it in the
// transaction that makes the change, last. The change is dated when it is
// written (clock_timestamp), not when its transaction began (now): a
// transaction that waited longer than WatchLookback before committing would
// otherwise be dated before the watchers' window and never seen.
func RecordChange(ctx context.Context, q db.Querier, kind, key string) error {
	_, err := q.Exec(ctx, `INSERT INTO directory_changes (id, kind, key, changed_at) VALUES ($1, $2, $3, clock_timestamp())`,
		ids.New("dc_"), kind, key)
	return err
}

// writeOne runs a write that must match one row of the directory: notFound
// when it matches none, and otherwise it records c (RecordChange) in the
// same transaction, last, so that the caches holding the row learn of it.
func writeOne(ctx context.Context, q db.Querier, notFound error, c Change, sql string, args ...any) error {
	tag, err := q.Exec(ctx, sql, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return notFound
	}
	return RecordChange(ctx, q, c.Kind, c.Key)
}

// Change is one logged change.
type Change struct {
	Kind, Key string
	At        time.Time
}

// ChangesSince returns the changes logged after since, and the database's
// current time, which the caller passes back next time (the database's clock,
// so that the readers' clocks do not matter).
func ChangesSince(ctx context.Context, q db.Querier, since time.Time) ([]Change, time.Time, error) {
	var now time.Time
	if err := q.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, time.Time{}, err
	}
	rows, err := q.Query(ctx, `SELECT kind, key, changed_at FROM directory_changes WHERE changed_at > $1 ORDER BY changed_at`, since)
	if err != nil {
		return nil, time.Time{}, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Change, error) {
		var c Change
		err := r.Scan(&c.Kind, &c.Key, &c.At)
		return c, err
	})
	return out, now, err
}

// ChangesKept is how long change records are kept: far longer than a
// cache holds an entry (Options.TTL), so a reader whose polls failed for a
// while still finds every change that could concern what it holds.
const ChangesKept = time.Hour

// PruneChanges deletes the change records older than keep, at most batch
// (db.SweepBatch when 0) in each statement (db.Sweep); run it on a pool.
func PruneChanges(ctx context.Context, q db.Querier, keep time.Duration, batch int) (db.Swept, error) {
	return db.Sweep{Table: "directory_changes",
		Where: `changed_at < now() - $1::INT8 * INTERVAL '1 second'`, Args: []any{int64(keep.Seconds())},
		Order: []string{"changed_at", "id"}, Key: []string{"id"}, Batch: batch}.Run(ctx, q)
}

// UpsertCluster registers a cluster or updates its hosts and upstream.
func UpsertCluster(ctx context.Context, q db.Querier, c Cluster) error {
	if c.Kind != Shared && c.Kind != Dedicated {
		return fmt.Errorf("tenancy: cluster kind must be %q or %q", Shared, Dedicated)
	}
	var dl *string
	if c.DownloadHost != "" {
		dl = &c.DownloadHost
	}
	_, err := q.Exec(ctx, `
		INSERT INTO clusters (name, region, kind, api_host, download_host, upstream_url)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (name) DO UPDATE SET region = excluded.region, kind = excluded.kind, api_host = excluded.api_host,
			download_host = excluded.download_host, upstream_url = excluded.upstream_url, updated_at = now()`,
		c.Name, c.Region, c.Kind, c.APIHost, dl, c.UpstreamURL)
	if err != nil {
		return err
	}
	return RecordChange(ctx, q, ChangeCluster, c.Name)
}

const clusterColumns = `name, region, kind, api_host, COALESCE(download_host, ''), upstream_url, created_at`

func scanCluster(r pgx.Row) (Cluster, error) {
	var c Cluster
	err := r.Scan(&c.Name, &c.Region, &c.Kind, &c.APIHost, &c.DownloadHost, &c.UpstreamURL, &c.CreatedAt)
	return c, err
}

// ClusterByHost finds the cluster serving host, and which of its hosts it is.
func ClusterByHost(ctx context.Context, q db.Querier, host string) (Cluster, HostKind, error) {
	c, err := scanCluster(q.QueryRow(ctx, `SELECT `+clusterColumns+` FROM clusters WHERE api_host = $1 OR download_host = $1`, host))
	if errors.Is(err, db.ErrNotFound) {
		return Cluster{}, 0, ErrUnknownHost
	}
	if err != nil {
		return Cluster{}, 0, err
	}
	if c.APIHost == host {
		return c, APIHost, nil
	}
	return c, DownloadHost, nil
}

// GetCluster returns the cluster called name.
func GetCluster(ctx context.Context, q db.Querier, name string) (Cluster, error) {
	c, err := scanCluster(q.QueryRow(ctx, `SELECT `+clusterColumns+` FROM clusters WHERE name = $1`, name))
	if errors.Is(err, db.ErrNotFound) {
		return Cluster{}, ErrUnknownCluster
	}
	return c, err
}

// ListClusters returns every cluster, by name.
func ListClusters(ctx context.Context, q db.Querier) ([]Cluster, error) {
	rows, err := q.Query(ctx, `SELECT `+clusterColumns+` FROM clusters ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Cluster, error) { return scanCluster(r) })
}

// NewKeyPair makes an app id and token: the id is shown, the token once.
func newKeyPair() (id, token string) {
	return uuid.NewString(), uuid.NewString()
}

// CreateProject stores p (its ID is assigned) and its first server-side key
// pair, returning the token, which is never stored.
func CreateProject(ctx context.Context, q db.Querier, p *Project) (AppKey, string, error) {
	if _, err := GetCluster(ctx, q, p.Cluster); err != nil {
		return AppKey{}, "", err
	}
	p.ID = ids.New("proj_")
	p.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
	if p.APIVersion == "" {
		p.APIVersion = apiversion.Latest
	}
	if p.Plan == "" {
		p.Plan = DefaultPlan
	}
	if _, err := GetPlan(ctx, q, p.Plan); err != nil {
		return AppKey{}, "", err
	}
	p.WebhookSecret = newWebhookSecret()
	settings, err := json.Marshal(p.Settings)
	if err != nil {
		return AppKey{}, "", err
	}
	if _, err := q.Exec(ctx, `INSERT INTO projects (id, name, description, cluster, api_version, plan, settings, webhook_secret, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, p.ID, p.Name, p.Description, p.Cluster, p.APIVersion, p.Plan, settings,
		p.WebhookSecret, p.CreatedAt); err != nil {
		return AppKey{}, "", err
	}
	// Routers cache the origins their cluster's projects trust.
	if err := RecordChange(ctx, q, ChangeProject, p.ID); err != nil {
		return AppKey{}, "", err
	}
	return CreateAppKey(ctx, q, p.ID, KeyApp, "default")
}

const projectColumns = `id, name, description, cluster, api_version, plan, settings, created_at, updated_at,
	webhook_secret, webhook_secret_previous, webhook_secret_rotated_at`

func scanProject(r pgx.Row) (Project, error) {
	var p Project
	var settings []byte
	if err := r.Scan(&p.ID, &p.Name, &p.Description, &p.Cluster, &p.APIVersion, &p.Plan, &settings, &p.CreatedAt, &p.UpdatedAt,
		&p.WebhookSecret, &p.WebhookSecretPrevious, &p.WebhookSecretRotated); err != nil {
		return Project{}, err
	}
	if err := json.Unmarshal(settings, &p.Settings); err != nil {
		return Project{}, fmt.Errorf("tenancy: project %s settings: %w", p.ID, err)
	}
	return p, nil
}

// GetProject returns a live project.
func GetProject(ctx context.Context, q db.Querier, id string) (Project, error) {
	p, err := scanProject(q.QueryRow(ctx, `SELECT `+projectColumns+` FROM projects WHERE id = $1 AND deleted_at IS NULL`, id))
	if errors.Is(err, db.ErrNotFound) {
		return Project{}, ErrProjectNotFound
	}
	return p, err
}

// ListProjects returns up to limit live projects after the cursor, by ID.
func ListProjects(ctx context.Context, q db.Querier, lq listq.Query) ([]Project, error) {
	cond, orderBy, args := lq.Keyset("projects", "id", []any{lq.Limit + 1})
	rows, err := q.Query(ctx, `SELECT `+projectColumns+` FROM projects WHERE deleted_at IS NULL`+cond+` ORDER BY `+orderBy+` LIMIT $1`,
		args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Project, error) { return scanProject(r) })
}

// CountProjects counts live projects.
func CountProjects(ctx context.Context, q db.Querier) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM projects WHERE deleted_at IS NULL`).Scan(&n)
	return n, err
}

// UpdateProject writes p's name, description, API version and settings.
func UpdateProject(ctx context.Context, q db.Querier, p *Project) error {
	settings, err := json.Marshal(p.Settings)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := GetPlan(ctx, q, p.Plan); err != nil {
		return err
	}
	if err := writeOne(ctx, q, ErrProjectNotFound, Change{Kind: ChangeProject, Key: p.ID},
		`UPDATE projects SET name = $2, description = $3, api_version = $4, settings = $5, updated_at = $6,
		plan = $7 WHERE id = $1 AND deleted_at IS NULL`, p.ID, p.Name, p.Description, p.APIVersion, settings, now, p.Plan); err != nil {
		return err
	}
	p.UpdatedAt = &now
	return nil
}

// DeleteProject marks a project deleted and revokes all its keys at once.
func DeleteProject(ctx context.Context, q db.Querier, id string) error {
	tag, err := q.Exec(ctx, `UPDATE projects SET deleted_at = now() WHERE id = $1 AND deleted_at IS NULL`, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrProjectNotFound
	}
	rows, err := q.Query(ctx, `UPDATE app_keys SET revoked_at = now() WHERE project_id = $1 AND revoked_at IS NULL RETURNING app_id`, id)
	if err != nil {
		return err
	}
	revoked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, appID := range revoked {
		if err := RecordChange(ctx, q, ChangeAppKey, appID); err != nil {
			return err
		}
	}
	return RecordChange(ctx, q, ChangeProject, id)
}

// CreateAppKey makes a key pair for a live project and returns the token.
func CreateAppKey(ctx context.Context, q db.Querier, projectID, kind, name string) (AppKey, string, error) {
	if kind != KeyApp && kind != KeyClient {
		return AppKey{}, "", fmt.Errorf("tenancy: key kind must be %q or %q", KeyApp, KeyClient)
	}
	var live bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM projects WHERE id = $1 AND deleted_at IS NULL)`, projectID).Scan(&live); err != nil {
		return AppKey{}, "", err
	}
	if !live {
		return AppKey{}, "", ErrProjectNotFound
	}
	id, token := newKeyPair()
	k := AppKey{AppID: id, ProjectID: projectID, Kind: kind, Name: name, CreatedAt: time.Now().UTC().Truncate(time.Millisecond),
		tokenHash: hashToken(token)}
	if _, err := q.Exec(ctx, `INSERT INTO app_keys (app_id, project_id, kind, name, token_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		k.AppID, k.ProjectID, k.Kind, k.Name, k.tokenHash, k.CreatedAt); err != nil {
		return AppKey{}, "", err
	}
	// A router may hold this app id in its negative cache.
	return k, token, RecordChange(ctx, q, ChangeAppKey, k.AppID)
}

const appKeyColumns = `app_id, project_id, kind, name, token_hash, created_at, revoked_at`

func scanAppKey(r pgx.Row) (AppKey, error) {
	var k AppKey
	err := r.Scan(&k.AppID, &k.ProjectID, &k.Kind, &k.Name, &k.tokenHash, &k.CreatedAt, &k.RevokedAt)
	return k, err
}

// GetAppKey returns a key, revoked or not.
func GetAppKey(ctx context.Context, q db.Querier, appID string) (AppKey, error) {
	k, err := scanAppKey(q.QueryRow(ctx, `SELECT `+appKeyColumns+` FROM app_keys WHERE app_id = $1`, appID))
	if errors.Is(err, db.ErrNotFound) {
		return AppKey{}, ErrKeyNotFound
	}
	return k, err
}

// ListAppKeys returns a project's keys, revoked ones included, oldest first.
func ListAppKeys(ctx context.Context, q db.Querier, projectID string) ([]AppKey, error) {
	rows, err := q.Query(ctx, `SELECT `+appKeyColumns+` FROM app_keys WHERE project_id = $1 ORDER BY created_at, app_id`, projectID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AppKey, error) { return scanAppKey(r) })
}

// RevokeAppKey revokes a project's key; revoking twice is not an error.
func RevokeAppKey(ctx context.Context, q db.Querier, projectID, appID string) (AppKey, error) {
	k, err := scanAppKey(q.QueryRow(ctx, `UPDATE app_keys SET revoked_at = COALESCE(revoked_at, now())
		WHERE project_id = $1 AND app_id = $2 RETURNING `+appKeyColumns, projectID, appID))
	if errors.Is(err, db.ErrNotFound) {
		return AppKey{}, ErrKeyNotFound
	}
	if err != nil {
		return AppKey{}, err
	}
	return k, RecordChange(ctx, q, ChangeAppKey, appID)
}

// CreateManagementKey makes a management key pair and returns the token.
func CreateManagementKey(ctx context.Context, q db.Querier, name string) (ManagementKey, string, error) {
	id, token := newKeyPair()
	k := ManagementKey{ID: id, Name: name, CreatedAt: time.Now().UTC().Truncate(time.Millisecond), tokenHash: hashToken(token)}
	_, err := q.Exec(ctx, `INSERT INTO management_keys (id, name, token_hash, created_at) VALUES ($1, $2, $3, $4)`,
		k.ID, k.Name, k.tokenHash, k.CreatedAt)
	if err != nil {
		return ManagementKey{}, "", err
	}
	return k, token, RecordChange(ctx, q, ChangeManagementKey, k.ID)
}

// GetManagementKey returns a management key, revoked or not.
func GetManagementKey(ctx context.Context, q db.Querier, id string) (ManagementKey, error) {
	var k ManagementKey
	err := q.QueryRow(ctx, `SELECT id, name, token_hash, created_at, revoked_at FROM management_keys WHERE id = $1`, id).
		Scan(&k.ID, &k.Name, &k.tokenHash, &k.CreatedAt, &k.RevokedAt)
	if errors.Is(err, db.ErrNotFound) {
		return ManagementKey{}, ErrKeyNotFound
	}
	return k, err
}

// RevokeManagementKey revokes a management key.
func RevokeManagementKey(ctx context.Context, q db.Querier, id string) error {
	return writeOne(ctx, q, ErrKeyNotFound, Change{Kind: ChangeManagementKey, Key: id},
		`UPDATE management_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1`, id)
}
