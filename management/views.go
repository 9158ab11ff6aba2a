package management

import (
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/tenancy"
)

// projectView is the reference's ManagementProjectBaseWithConfig.
type projectView struct {
	ID                                    string          `json:"id"`
	Name                                  string          `json:"name"`
	Description                           *string         `json:"description"`
	Timezone                              string          `json:"timezone"`
	Currency                              string          `json:"currency"`
	DialCode                              *string         `json:"dial_code"`
	WebhookVersion                        string          `json:"webhook_version"`
	ClientTrustedDomains                  []string        `json:"client_trusted_domains"`
	ClientRedeemEnabled                   bool            `json:"client_redeem_enabled"`
	ClientPublishEnabled                  bool            `json:"client_publish_enabled"`
	ClientListVouchersEnabled             bool            `json:"client_list_vouchers_enabled"`
	ClientCreateCustomerEnabled           bool            `json:"client_create_customer_enabled"`
	ClientLoyaltyEventsEnabled            bool            `json:"client_loyalty_events_enabled"`
	ClientSetVoucherExpirationDateEnabled bool            `json:"client_set_voucher_expiration_date_enabled"`
	APIUsageNotifications                 any             `json:"api_usage_notifications"`
	WebhooksCalloutNotifications          any             `json:"webhooks_callout_notifications"`
	ClusterID                             string          `json:"cluster_id"`
	CaseSensitiveCodes                    bool            `json:"case_sensitive_codes"`
	APIVersion                            string          `json:"api_version"`
	IsSandbox                             bool            `json:"is_sandbox"`
	WebhookToken                          *string         `json:"webhook_token"`
	Plan                                  string          `json:"plan"`
	ClientIPRateLimit                     tenancy.IPLimit `json:"client_ip_rate_limit"`
	CreatedAt                             jsonx.Time      `json:"created_at"`
	UpdatedAt                             *jsonx.Time     `json:"updated_at"`
}

func viewProject(p tenancy.Project) projectView {
	s := p.Settings
	domains := s.ClientTrustedDomains
	if domains == nil {
		domains = []string{}
	}
	return projectView{
		ID: p.ID, Name: p.Name, Description: p.Description, Timezone: s.Timezone, Currency: s.Currency, DialCode: s.DialCode,
		WebhookVersion: s.WebhookVersion, ClientTrustedDomains: domains, ClientRedeemEnabled: s.ClientRedeemEnabled,
		ClientPublishEnabled: s.ClientPublishEnabled, ClientListVouchersEnabled: s.ClientListVouchersEnabled,
		ClientCreateCustomerEnabled: s.ClientCreateCustomerEnabled, ClientLoyaltyEventsEnabled: s.ClientLoyaltyEventsEnabled,
		ClientSetVoucherExpirationDateEnabled: s.ClientSetVoucherExpirationDateEnabled, ClusterID: p.Cluster,
		CaseSensitiveCodes: s.CaseSensitiveCodes, APIVersion: p.APIVersion, IsSandbox: s.IsSandbox,
		CreatedAt: jsonx.Time{Time: p.CreatedAt}, UpdatedAt: jsonx.Ptr(p.UpdatedAt), WebhookToken: &p.WebhookSecret, Plan: p.Plan,
		ClientIPRateLimit: s.ClientLimit(),
	}
}

type keyPair struct {
	AppID    string `json:"app_id"`
	AppToken string `json:"app_token"`
}

// createdProjectView adds the first key pair; the token is shown this once.
type createdProjectView struct {
	projectView
	ServerSideKey *keyPair `json:"server_side_key"`
	ClientSideKey *keyPair `json:"client_side_key"`
}

type keyView struct {
	AppID     string      `json:"app_id"`
	AppToken  string      `json:"app_token,omitempty"`
	ProjectID string      `json:"project_id"`
	Kind      string      `json:"kind"`
	Name      string      `json:"name"`
	CreatedAt jsonx.Time  `json:"created_at"`
	RevokedAt *jsonx.Time `json:"revoked_at"`
	Object    string      `json:"object"`
}

func viewKey(k tenancy.AppKey, token string) keyView {
	kind := "server"
	if k.Kind == tenancy.KeyClient {
		kind = "client"
	}
	return keyView{AppID: k.AppID, AppToken: token, ProjectID: k.ProjectID, Kind: kind, Name: k.Name,
		CreatedAt: jsonx.Time{Time: k.CreatedAt}, RevokedAt: jsonx.Ptr(k.RevokedAt), Object: "api_key"}
}

type clusterView struct {
	Name         string     `json:"name"`
	Region       string     `json:"region"`
	Kind         string     `json:"kind"`
	APIHost      string     `json:"api_host"`
	DownloadHost *string    `json:"download_host"`
	UpstreamURL  string     `json:"upstream_url"`
	CreatedAt    jsonx.Time `json:"created_at"`
	Object       string     `json:"object"`
}

func viewCluster(c tenancy.Cluster) clusterView {
	v := clusterView{Name: c.Name, Region: c.Region, Kind: c.Kind, APIHost: c.APIHost, UpstreamURL: c.UpstreamURL,
		CreatedAt: jsonx.Time{Time: c.CreatedAt}, Object: "cluster"}
	if c.DownloadHost != "" {
		v.DownloadHost = &c.DownloadHost
	}
	return v
}
