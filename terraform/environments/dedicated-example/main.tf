# A dedicated cluster for one customer ("acme"), reachable at
# acme.api.<domain> and acme.download.<domain>: its own EKS cluster, its own
# CockroachDB, its own secrets; the overlay is deploy/dedicated/example.
# Copy this folder and rename for the next customer.
#
# To run a dedicated cluster inside a shared Kubernetes cluster instead, point
# the providers at that cluster and set create_cluster_issuer = false (the
# shared cluster's module made the ClusterIssuer).

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws        = { source = "hashicorp/aws", version = ">= 5.0" }
    kubernetes = { source = "hashicorp/kubernetes", version = ">= 2.20" }
  }
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
  # tally/shared: the platform's identity, operator and tenancy database;
  # tally/<name>: this cluster's database URL, its CockroachDB CA, and the
  # platform CA (tenancy_ca_*) its tenancy client certificate is signed by.
  secrets_manager_secret_ids = ["tally/shared", "tally/${var.name}"]
  ca_secrets = {
    cockroachdb-ca = { certificate_key = "cockroachdb_ca_crt", private_key_key = "cockroachdb_ca_key" }
    tenancy-ca     = { certificate_key = "tenancy_ca_crt", private_key_key = "tenancy_ca_key" }
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
