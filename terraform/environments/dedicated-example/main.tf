# A dedicated cluster for one customer ("acme"), reachable at
# acme.api.<domain> and acme.download.<domain>: its own EKS cluster (in its own
# VPC, peered with the shared regions' VPCs it talks to: deploy/README.md,
# "A dedicated cluster"), its own CockroachDB, its own secrets; the overlay is
# deploy/dedicated/example. Copy this folder and rename for the next customer.
#
# It shares only the directory (the tenancy database, in the shared
# CockroachDB cluster). Its namespace gets a client certificate for its own
# SQL user there (tenancy_<name>, which the control plane's Job grants the
# tenancy database only) and the shared CA's certificate: the certificate is
# signed here, on the shared side, with the shared CA's key from Secrets
# Manager, which never reaches the customer's cluster.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws        = { source = "hashicorp/aws", version = ">= 5.0" }
    kubernetes = { source = "hashicorp/kubernetes", version = ">= 2.20" }
    tls        = { source = "hashicorp/tls", version = ">= 4.0" }
  }
  # State in S3, encrypted: it holds the shared CA's key (read to sign the
  # tenancy client certificate), as the saas environment's state does.
  backend "s3" {}
}

variable "name" {
  description = "the dedicated cluster's name: its hosts are <name>.api.<base_domain> and <name>.download.<base_domain>"
  type        = string
  default     = "acme"
}

variable "aws_region" {
  type    = string
  default = "eu-west-1"
}

variable "eks_cluster_name" {
  type    = string
  default = "tally-acme"
}

variable "base_domain" {
  type    = string
  default = "tally.example.com"
}

variable "zone_id" {
  type = string
}

variable "acme_email" {
  type = string
}

variable "tenancy_nodes" {
  description = "the shared region whose CockroachDB nodes this cluster reaches the tenancy database through (its VPC is peered with this cluster's): api, us1 or as1; the host is <tenancy_nodes>.db.internal.<base_domain>"
  type        = string
  default     = "api"
}

variable "secrets_prefix" {
  description = "Secrets Manager names: <prefix>/shared (the platform's secrets and CA) and <prefix>/<name> (this cluster's)"
  type        = string
  default     = "tally"
}

variable "tenancy_client_cert_validity_hours" {
  description = "life of the tenancy client certificate; terraform signs a new one on the first apply within early_renewal_hours of its end (then restart the pods: deploy/README.md)"
  type        = number
  default     = 8760
}

variable "router_deployed" {
  description = "true once deploy/dedicated/<name> is applied: then its DNS records are made"
  type        = bool
  default     = false
}

provider "aws" {
  alias  = "acme"
  region = var.aws_region
}

data "aws_eks_cluster" "acme" {
  provider = aws.acme
  name     = var.eks_cluster_name
}

provider "kubernetes" {
  alias                  = "acme"
  host                   = data.aws_eks_cluster.acme.endpoint
  cluster_ca_certificate = base64decode(data.aws_eks_cluster.acme.certificate_authority[0].data)
  exec {
    api_version = "client.authentication.k8s.io/v1beta1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", var.eks_cluster_name, "--region", var.aws_region]
  }
}

# --- The directory's client certificate, signed on the shared side ------------

data "aws_secretsmanager_secret_version" "shared" {
  provider  = aws.acme
  secret_id = "${var.secrets_prefix}/shared"
}

data "aws_secretsmanager_secret_version" "own" {
  provider  = aws.acme
  secret_id = "${var.secrets_prefix}/${var.name}"
}

locals {
  shared = jsondecode(data.aws_secretsmanager_secret_version.shared.secret_string)
  own    = jsondecode(data.aws_secretsmanager_secret_version.own.secret_string)
  # The SQL user of this cluster in the tenancy database: the control plane's
  # TENANCY_CLIENT_USERS lists it (deploy/control-plane).
  tenancy_user = "tenancy_${replace(var.name, "-", "_")}"
  tenancy_host = "${var.tenancy_nodes}.db.internal.${var.base_domain}"
}

resource "tls_private_key" "tenancy_client" {
  algorithm = "RSA"
  rsa_bits  = 2048
}

resource "tls_cert_request" "tenancy_client" {
  private_key_pem = tls_private_key.tenancy_client.private_key_pem
  subject {
    common_name = local.tenancy_user # CockroachDB: the CN is the SQL user
  }
}

resource "tls_locally_signed_cert" "tenancy_client" {
  cert_request_pem      = tls_cert_request.tenancy_client.cert_request_pem
  ca_cert_pem           = local.shared.cockroachdb_ca_crt
  ca_private_key_pem    = local.shared.cockroachdb_ca_key
  validity_period_hours = var.tenancy_client_cert_validity_hours
  early_renewal_hours   = 720
  allowed_uses          = ["client_auth", "digital_signature", "key_encipherment"]
}

# What the overlay's pods mount at /etc/tally/db/tenancy (the overlay deletes
# base's Certificate and Issuer of that name): the client certificate, its
# key and the shared CA's certificate, never the CA's key.
resource "kubernetes_secret_v1" "tenancy_client" {
  provider = kubernetes.acme
  metadata {
    name      = "tally-tenancy-db-client"
    namespace = module.acme.namespace
    labels    = { "app.kubernetes.io/part-of" = "tally", "app.kubernetes.io/managed-by" = "terraform" }
  }
  type = "kubernetes.io/tls"
  data = {
    "tls.crt" = tls_locally_signed_cert.tenancy_client.cert_pem
    "tls.key" = tls_private_key.tenancy_client.private_key_pem_pkcs8
    "ca.crt"  = local.shared.cockroachdb_ca_crt
  }
}

check "own_cockroachdb_ca" {
  assert {
    condition     = lookup(local.own, "dedicated_cockroachdb_ca_crt", "") != "" && lookup(local.own, "dedicated_cockroachdb_ca_crt", "") != lookup(local.shared, "cockroachdb_ca_crt", "")
    error_message = "${var.secrets_prefix}/${var.name} must hold this cluster's own CA (dedicated_cockroachdb_ca_crt/_key), not the shared one."
  }
}

module "acme" {
  source    = "../../modules/region"
  providers = { aws = aws.acme, kubernetes = kubernetes.acme }

  cluster          = var.name
  namespace        = "tally-${var.name}"
  aws_region       = var.aws_region
  eks_cluster_name = var.eks_cluster_name
  base_domain      = var.base_domain
  zone_id          = var.zone_id
  acme_email       = var.acme_email
  router_deployed  = var.router_deployed
  # tally/shared: the platform's identity and operator secrets, the
  # CockroachDB licence; tally/<name>: this cluster's database URL and its
  # own CockroachDB CA (dedicated_cockroachdb_ca_*, never the shared one).
  secrets_manager_secret_ids = ["${var.secrets_prefix}/shared", "${var.secrets_prefix}/${var.name}"]
  # Its own user, through the peered shared region's nodes; no password (the
  # client certificate above authenticates).
  tenancy_database_url = "postgresql://${local.tenancy_user}@${local.tenancy_host}:26257/tally_tenancy?sslmode=verify-full&sslrootcert=/etc/tally/db/tenancy/ca.crt&sslcert=/etc/tally/db/tenancy/tls.crt&sslkey=/etc/tally/db/tenancy/tls.key"
  ca_secrets = {
    cockroachdb-ca = { certificate_key = "dedicated_cockroachdb_ca_crt", private_key_key = "dedicated_cockroachdb_ca_key" }
  }
  # The region's bucket, made by the shared cluster of the region (saas);
  # this cluster's backups go under cockroach/tally_<name>/.
  backup_bucket_name   = "tally-backups-${var.aws_region}"
  create_backup_bucket = false
}

output "hosts" {
  value = module.acme.hosts
}

output "backup_url" {
  value = module.acme.backup_url
}

output "backup_role_arn" {
  value = module.acme.backup_role_arn
}

output "tenancy_user" {
  description = "add it to TENANCY_CLIENT_USERS in deploy/control-plane and re-run the tally-tenancy-global Job"
  value       = local.tenancy_user
}

output "tenancy_client_cert_expires" {
  value = tls_locally_signed_cert.tenancy_client.validity_end_time
}
