package tenancy

import (
	"errors"
	"time"
)

// Cluster kinds.
const (
	Shared    = "shared"
	Dedicated = "dedicated"
)

// Cluster is one deployment of the regional service with its own database.
type Cluster struct {
	Name         string // api, us1, as1, or a dedicated cluster's name
	Region       string // e.g. europe, us, asia
	Kind         string // Shared or Dedicated
	APIHost      string // the public API host, e.g. us1.api.example.com
	DownloadHost string // the public download host, or ""
	UpstreamURL  string // where the router reaches the cluster's regional instances
	CreatedAt    time.Time
}

// HostKind says which of a cluster's hosts a request came to.
type HostKind int

// The hosts of a cluster.
const (
	APIHost HostKind = iota
	DownloadHost
)

// Settings are a project's options, in the reference's field names.
type Settings struct {
	Timezone                              string   `json:"timezone"`
	Currency                              string   `json:"currency"`
	DialCode                              *string  `json:"dial_code"`
	WebhookVersion                        string   `json:"webhook_version"`
	CaseSensitiveCodes                    bool     `json:"case_sensitive_codes"`
	IsSandbox                             bool     `json:"is_sandbox"`
	ClientTrustedDomains                  []string `json:"client_trusted_domains"`
	ClientRedeemEnabled                   bool     `json:"client_redeem_enabled"`
	ClientPublishEnabled                  bool     `json:"client_publish_enabled"`
	ClientListVouchersEnabled             bool     `json:"client_list_vouchers_enabled"`
	ClientCreateCustomerEnabled           bool     `json:"client_create_customer_enabled"`
	ClientLoyaltyEventsEnabled            bool     `json:"client_loyalty_events_enabled"`
	ClientSetVoucherExpirationDateEnabled bool     `json:"client_set_voucher_expiration_date_enabled"`
	// ClientIPLimit limits each client address on the client-side API
	// (nil: DefaultClientIPLimit).
	ClientIPLimit *IPLimit `json:"client_ip_rate_limit,omitempty"`
}

// IPLimit is at most Requests requests per Seconds seconds.
type IPLimit struct {
	Requests int `json:"requests"`
	Seconds  int `json:"seconds"`
}

// DefaultClientIPLimit is the interface's client-side limit: 5 requests
// per 5 seconds from one address.
var DefaultClientIPLimit = IPLimit{Requests: 5, Seconds: 5}

// ClientLimit is the project's per-address limit on the client-side API.
func (s Settings) ClientLimit() IPLimit {
	if s.ClientIPLimit != nil {
		return *s.ClientIPLimit
	}
	return DefaultClientIPLimit
}

// Project is a tenant. It lives in exactly one cluster.
type Project struct {
	ID          string
	Name        string
	Description *string
	Cluster     string
	APIVersion  string
	Plan        string
	Settings    Settings
	CreatedAt   time.Time
	UpdatedAt   *time.Time
	// WebhookSecret signs webhooks; the previous secret keeps signing (as a
	// second signature) for a day after a rotation.
	WebhookSecret         string
	WebhookSecretPrevious *string
	WebhookSecretRotated  *time.Time
}

// Plan grants features and limits its projects' requests on the
// application API (0: unlimited).
type Plan struct {
	Name              string   `json:"name"`
	Features          []string `json:"features"`
	RequestsPerMinute int64    `json:"requests_per_minute"`
	RequestsPerHour   int64    `json:"requests_per_hour"`
	// ClusterShare is the share of a regional instance's database
	// connections that one project of the plan may hold at once (0 < share
	// <= 1). Read from the directory it is never 0: a plan that sets none
	// has DefaultClusterShare; PutPlan stores 0 as none.
	ClusterShare float64 `json:"cluster_share"`
}

// DefaultClusterShare is a project's share of a regional instance's
// database connections when its plan sets none.
const DefaultClusterShare = 0.25

// Share is the plan's ClusterShare, or the default.
func (p Plan) Share() float64 {
	if p.ClusterShare <= 0 || p.ClusterShare > 1 {
		return DefaultClusterShare
	}
	return p.ClusterShare
}

// Has reports whether the plan grants feature.
func (p Plan) Has(feature string) bool {
	for _, f := range p.Features {
		if f == feature {
			return true
		}
	}
	return false
}

// Features the platform checks.
const (
	FeatureWebhooks = "webhooks"
)

// DefaultPlan is given to projects created without one.
const DefaultPlan = "standard"

// Webhook is a webhook configuration.
type Webhook struct {
	ID        string
	ProjectID string
	TargetURL string
	Events    []string
	Active    bool
	CreatedAt time.Time
	UpdatedAt *time.Time
}

// Subscribed reports whether the webhook wants events of type t.
func (w Webhook) Subscribed(t string) bool {
	for _, e := range w.Events {
		if e == t || e == "*" {
			return true
		}
	}
	return false
}

// Key kinds of application keys.
const (
	KeyApp    = "app"    // server-side
	KeyClient = "client" // client-side (browser, mobile)
)

// AppKey is an application key pair; the token itself is never stored.
type AppKey struct {
	AppID     string
	ProjectID string
	Kind      string
	Name      string
	CreatedAt time.Time
	RevokedAt *time.Time
	tokenHash []byte
}

// ManagementKey authenticates platform admins on the management API.
type ManagementKey struct {
	ID        string
	Name      string
	CreatedAt time.Time
	RevokedAt *time.Time
	tokenHash []byte
}

// Errors of the directory.
var (
	ErrUnknownHost     = errors.New("tenancy: unknown host")
	ErrBadCredentials  = errors.New("tenancy: missing or invalid credentials")
	ErrUnknownCluster  = errors.New("tenancy: unknown cluster")
	ErrProjectNotFound = errors.New("tenancy: project not found")
	ErrKeyNotFound     = errors.New("tenancy: key not found")
	ErrPlanNotFound    = errors.New("tenancy: plan not found")
	ErrWebhookNotFound = errors.New("tenancy: webhook not found")
)
