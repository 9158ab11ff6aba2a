# One Tally cluster in one Kubernetes cluster: what the overlay in deploy/
# expects to exist before `kubectl apply -k deploy/clusters/<cluster>`
# (namespace, Secrets, the ClusterIssuer its Certificates name, the bucket its
# backup schedule writes to) and, once its router has a load balancer, the
# DNS records of every public host.
#
# Providers are not configured here: the environment passes this region's
# (providers = { aws = aws.us1, kubernetes = kubernetes.us1 }), so each
# region lands in its own Kubernetes cluster and AWS region.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws        = { source = "hashicorp/aws", version = ">= 5.0" }
    kubernetes = { source = "hashicorp/kubernetes", version = ">= 2.20" }
  }
}

data "aws_secretsmanager_secret_version" "tally" {
  for_each  = toset(var.secrets_manager_secret_ids)
  secret_id = each.value
}

locals {
  from_secrets_manager = merge([for id in var.secrets_manager_secret_ids : jsondecode(data.aws_secretsmanager_secret_version.tally[id].secret_string)]...)

  given = {
    identity_secret          = var.identity_secret
    identity_secret_previous = var.identity_secret_previous
    operator_secret          = var.operator_secret
    operator_secret_previous = var.operator_secret_previous
    tenancy_database_url     = var.tenancy_database_url
    regional_database_url    = var.regional_database_url
    cockroachdb_organization = var.cockroachdb_organization
    cockroachdb_license      = var.cockroachdb_license
  }
  # The variable, else Secrets Manager's key, else "" (checked below).
  secret = { for k, v in local.given : k => try(coalesce(v, lookup(local.from_secrets_manager, k, null)), "") }

  labels = {
    "app.kubernetes.io/part-of"    = "tally"
    "app.kubernetes.io/managed-by" = "terraform"
    "tally.dev/cluster"            = var.cluster
  }
}

resource "kubernetes_namespace_v1" "tally" {
  metadata {
    name   = var.namespace
    labels = local.labels
  }
}

# The Secrets the overlay's secretKeyRefs name (deploy/base). The "previous"
# keys exist only during a rotation: the manifests mark them optional.

resource "kubernetes_secret_v1" "identity" {
  metadata {
    name      = "tally-identity"
    namespace = kubernetes_namespace_v1.tally.metadata[0].name
    labels    = local.labels
  }
  data = merge(
    { secret = local.secret.identity_secret },
    local.secret.identity_secret_previous == "" ? {} : { previous = local.secret.identity_secret_previous },
  )
  lifecycle {
    precondition {
      condition     = can(regex("^[0-9a-fA-F]{32,}$", local.secret.identity_secret))
      error_message = "identity_secret must be 32+ hex digits: give the variable, or the key identity_secret in one of secrets_manager_secret_ids."
    }
  }
}

resource "kubernetes_secret_v1" "operator" {
  metadata {
    name      = "tally-operator"
    namespace = kubernetes_namespace_v1.tally.metadata[0].name
    labels    = local.labels
  }
  data = merge(
    { secret = local.secret.operator_secret },
    local.secret.operator_secret_previous == "" ? {} : { previous = local.secret.operator_secret_previous },
  )
  lifecycle {
    precondition {
      condition     = can(regex("^[0-9a-fA-F]{32,}$", local.secret.operator_secret))
      error_message = "operator_secret must be 32+ hex digits: give the variable, or the key operator_secret in one of secrets_manager_secret_ids."
    }
  }
}

resource "kubernetes_secret_v1" "tenancy_db" {
  metadata {
    name      = "tally-tenancy-db"
    namespace = kubernetes_namespace_v1.tally.metadata[0].name
    labels    = local.labels
  }
  data = { url = local.secret.tenancy_database_url }
  lifecycle {
    precondition {
      condition     = startswith(local.secret.tenancy_database_url, "postgres")
      error_message = "tenancy_database_url must be a postgresql:// URL: give the variable, or the key tenancy_database_url in one of secrets_manager_secret_ids."
    }
  }
}

resource "kubernetes_secret_v1" "regional_db" {
  metadata {
    name      = "tally-regional-db"
    namespace = kubernetes_namespace_v1.tally.metadata[0].name
    labels    = local.labels
  }
  data = { url = local.secret.regional_database_url }
  lifecycle {
    precondition {
      condition     = startswith(local.secret.regional_database_url, "postgres")
      error_message = "regional_database_url must be a postgresql:// URL: give the variable, or the key regional_database_url in one of secrets_manager_secret_ids."
    }
  }
}

# The CockroachDB licence the cockroachdb-setup Job sets (cluster.organization,
# enterprise.license): since v24.3 a cluster without one is throttled after
# its grace period. Kept out of git: Secrets Manager, then this Secret.
resource "kubernetes_secret_v1" "cockroachdb_license" {
  metadata {
    name      = "cockroachdb-license"
    namespace = kubernetes_namespace_v1.tally.metadata[0].name
    labels    = local.labels
  }
  data = {
    organization = local.secret.cockroachdb_organization
    license      = local.secret.cockroachdb_license
  }
  lifecycle {
    precondition {
      condition     = local.secret.cockroachdb_organization != "" && startswith(local.secret.cockroachdb_license, "crl-")
      error_message = "cockroachdb_organization and cockroachdb_license (a crl-… key from the CockroachDB Cloud console) must be set: give the variables, or the keys in one of secrets_manager_secret_ids."
    }
  }
}

# --- DNS: every public host of the cluster → the router's load balancer ------

data "kubernetes_service_v1" "router" {
  count = var.router_deployed && var.router_hostname == null ? 1 : 0
  metadata {
    name      = "tally-router"
    namespace = kubernetes_namespace_v1.tally.metadata[0].name
  }
}

locals {
  router_hostname = var.router_hostname != null ? var.router_hostname : (
    var.router_deployed ? try(data.kubernetes_service_v1.router[0].status[0].load_balancer[0].ingress[0].hostname, null) : null
  )
}

module "dns" {
  source          = "../cluster-dns"
  zone_id         = var.zone_id
  base_domain     = var.base_domain
  cluster         = var.cluster
  extra_hosts     = var.extra_hosts
  router_hostname = local.router_hostname
}

check "router_load_balancer" {
  assert {
    condition     = !var.router_deployed || local.router_hostname != null
    error_message = "router_deployed is true but the tally-router Service in ${var.namespace} has no load balancer hostname yet: wait for it (kubectl get svc tally-router) and apply again."
  }
}

# --- TLS: the ClusterIssuer of the overlays' Certificates ---------------------

module "issuer" {
  source = "../acme-issuer"
  count  = var.create_cluster_issuer ? 1 : 0

  name             = var.cluster_issuer_name
  iam_role_name    = "tally-${var.cluster}-cert-manager-dns01"
  eks_cluster_name = var.eks_cluster_name
  aws_region       = var.aws_region
  zone_id          = var.zone_id
  acme_email       = coalesce(var.acme_email, "hostmaster@${var.base_domain}")
  acme_server      = var.acme_server
}

# --- CockroachDB backups ---------------------------------------------------------

module "backups" {
  source = "../cockroachdb-backups"
  count  = var.backup_bucket_name == null ? 0 : 1

  bucket_name        = var.backup_bucket_name
  create_bucket      = var.create_backup_bucket
  other_bucket_names = var.other_backup_bucket_names
  prefix             = "cockroach/${coalesce(var.regional_database, "tally_${var.cluster}")}"
  iam_role_name      = "tally-${var.cluster}-cockroachdb-backups"
  eks_cluster_name   = var.eks_cluster_name
  namespace          = kubernetes_namespace_v1.tally.metadata[0].name
  service_account    = var.cockroachdb_service_account
}

# --- CockroachDB CAs for the overlay's client-certificate Issuers --------------

resource "kubernetes_secret_v1" "ca" {
  for_each = var.ca_secrets

  metadata {
    name      = each.key
    namespace = kubernetes_namespace_v1.tally.metadata[0].name
    labels    = local.labels
  }
  type = "kubernetes.io/tls"
  data = {
    "tls.crt" = lookup(local.from_secrets_manager, each.value.certificate_key, "")
    "tls.key" = lookup(local.from_secrets_manager, each.value.private_key_key, "")
  }
  lifecycle {
    precondition {
      condition     = strcontains(lookup(local.from_secrets_manager, each.value.certificate_key, ""), "BEGIN CERTIFICATE") && strcontains(lookup(local.from_secrets_manager, each.value.private_key_key, ""), "PRIVATE KEY")
      error_message = "CA Secret ${each.key}: the keys ${each.value.certificate_key} and ${each.value.private_key_key} must hold PEM in one of secrets_manager_secret_ids."
    }
  }
}
