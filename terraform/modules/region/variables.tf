variable "cluster" {
  description = "the Tally cluster this module deploys: api (Europe), us1, as1, or a dedicated cluster's name"
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,30}$", var.cluster))
    error_message = "cluster is a DNS label: lower-case letters, digits and '-'."
  }
}

variable "aws_region" {
  description = "the AWS region of this cluster, as its CockroachDB nodes' locality names it: eu-west-1, us-east-1, ap-southeast-1 (deploy/clusters/*: COCKROACH_REGION)"
  type        = string
}

variable "eks_cluster_name" {
  description = "the EKS cluster the kubernetes provider points at (its OIDC provider backs the IAM roles below)"
  type        = string
}

variable "namespace" {
  description = "the overlay's namespace: tally for a shared cluster, tally-<name> for a dedicated one"
  type        = string
  default     = "tally"
}

variable "base_domain" {
  description = "e.g. tally.example.com"
  type        = string
}

variable "zone_id" {
  description = "Route 53 hosted zone of base_domain"
  type        = string
}

variable "extra_hosts" {
  description = "more public hosts this cluster's router serves (full names), besides its API and download hosts"
  type        = list(string)
  default     = []
}

# --- Secrets -----------------------------------------------------------------
# Each value comes from its variable or, when that is null, from the key of
# the same name in the JSON of one of secrets_manager_secret_ids (later ids
# win). Keep them in Secrets Manager: variables end up in the state anyway, but
# not in a tfvars file in someone's checkout.

variable "secrets_manager_secret_ids" {
  description = "Secrets Manager secrets (names or ARNs, in this region) holding a JSON object with keys named like the variables below, e.g. [\"tally/shared\", \"tally/us1\"]"
  type        = list(string)
  default     = []
}

variable "identity_secret" {
  description = "hex, 32+ digits, the same in every region: the router signs the identity header, services verify it"
  type        = string
  default     = null
  sensitive   = true
}

variable "identity_secret_previous" {
  description = "during a rotation only: the old identity secret, still accepted by the services (deploy/README.md)"
  type        = string
  default     = null
  sensitive   = true
}

variable "operator_secret" {
  description = "hex, 32+ digits, the same in every region: management signs its /internal calls to regional services"
  type        = string
  default     = null
  sensitive   = true
}

variable "operator_secret_previous" {
  description = "during a rotation only: the old operator secret, still accepted by regional services"
  type        = string
  default     = null
  sensitive   = true
}

variable "tenancy_database_url" {
  description = "the multi-region tenancy database (sslmode=verify-full, certificate paths under /etc/tally/db/tenancy)"
  type        = string
  default     = null
  sensitive   = true
}

variable "regional_database_url" {
  description = "this cluster's own database (sslmode=verify-full, certificate paths under /etc/tally/db/regional)"
  type        = string
  default     = null
  sensitive   = true
}

variable "cockroachdb_organization" {
  description = "the organization the CockroachDB licence is issued to (cluster setting cluster.organization)"
  type        = string
  default     = null
  sensitive   = true
}

variable "cockroachdb_license" {
  description = "the CockroachDB licence key, crl-… (cluster setting enterprise.license; since v24.3 a cluster without one is throttled after its grace period)"
  type        = string
  default     = null
  sensitive   = true
}

# --- Router and DNS ------------------------------------------------------------

variable "router_deployed" {
  description = "false on the first apply (before `kubectl apply -k` of the overlay); true afterwards: the DNS records are made from the tally-router Service's load balancer"
  type        = bool
  default     = false
}

variable "router_hostname" {
  description = "the router load balancer's DNS name, when it is not read from the tally-router Service"
  type        = string
  default     = null
}

# --- TLS -----------------------------------------------------------------------

variable "create_cluster_issuer" {
  description = "make cert-manager's ClusterIssuer (once per Kubernetes cluster: false for a second Tally cluster in the same Kubernetes cluster)"
  type        = bool
  default     = true
}

variable "cluster_issuer_name" {
  description = "the issuerRef name of the overlays' Certificates"
  type        = string
  default     = "letsencrypt"
}

variable "acme_email" {
  type    = string
  default = null
}

variable "acme_server" {
  type    = string
  default = "https://acme-v02.api.letsencrypt.org/directory"
}

# --- CockroachDB backups ----------------------------------------------------------

variable "regional_database" {
  description = "the cluster's database (the overlay's REGIONAL_DATABASE); null: tally_<cluster>"
  type        = string
  default     = null
}

variable "backup_bucket_name" {
  description = "S3 bucket of the overlay's BACKUP_URI (tally-backups-<aws region>); null: no backup bucket nor role"
  type        = string
  default     = null
}

variable "create_backup_bucket" {
  description = "false when another cluster's module in the same AWS region makes the bucket"
  type        = bool
  default     = true
}

variable "other_backup_bucket_names" {
  description = "the other regions' buckets, which this region's nodes write to as members of the same multi-region CockroachDB cluster"
  type        = list(string)
  default     = []
}

variable "cockroachdb_service_account" {
  description = "ServiceAccount of the CockroachDB nodes (deploy/cockroachdb/nodes), in the Tally namespace"
  type        = string
  default     = "cockroachdb"
}

# --- CockroachDB certificate authorities -------------------------------------------
# The overlay's cert-manager Issuers sign the SQL user's client certificates
# (tally-regional-db-client, tally-tenancy-db-client) with these CAs, read from
# kubernetes.io/tls Secrets in the namespace: cockroachdb-ca, the CA of the
# CockroachDB cluster of the namespace's databases. Never the platform CA in a
# dedicated cluster's namespace: its tenancy client certificate is signed on
# the shared side (environments/dedicated-example) and written as a Secret.

variable "ca_secrets" {
  description = "CA Secrets to make in the namespace, by name: the Secrets Manager keys (in secrets_manager_secret_ids) of their PEM certificate and key"
  type = map(object({
    certificate_key = string
    private_key_key = string
  }))
  default = {
    cockroachdb-ca = { certificate_key = "cockroachdb_ca_crt", private_key_key = "cockroachdb_ca_key" }
  }
}
