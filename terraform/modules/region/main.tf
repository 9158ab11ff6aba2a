terraform {
  required_providers {
    kubernetes = { source = "hashicorp/kubernetes", version = ">= 2.20" }
  }
}

variable "cluster" {
  description = "the Tally cluster this region serves (api, us1, as1)"
  type        = string
}

variable "namespace" {
  type    = string
  default = "tally"
}

variable "identity_secret" {
  description = "hex secret shared by routers and services in every region"
  type        = string
  sensitive   = true
}

variable "tenancy_database_url" {
  type      = string
  sensitive = true
}

variable "regional_database_url" {
  description = "the region's CockroachDB cluster"
  type        = string
  sensitive   = true
}

variable "zone_id" {
  type = string
}

variable "base_domain" {
  type = string
}

variable "router_hostname" {
  description = "DNS name of the router's load balancer in this region"
  type        = string
}

resource "kubernetes_namespace" "tally" {
  metadata {
    name = var.namespace
  }
}

resource "kubernetes_secret" "identity" {
  metadata {
    name      = "tally-identity"
    namespace = kubernetes_namespace.tally.metadata[0].name
  }
  data = { secret = var.identity_secret }
}

resource "kubernetes_secret" "tenancy_db" {
  metadata {
    name      = "tally-tenancy-db"
    namespace = kubernetes_namespace.tally.metadata[0].name
  }
  data = { url = var.tenancy_database_url }
}

resource "kubernetes_secret" "regional_db" {
  metadata {
    name      = "tally-regional-db"
    namespace = kubernetes_namespace.tally.metadata[0].name
  }
  data = { url = var.regional_database_url }
}

module "dns" {
  source          = "../cluster-dns"
  zone_id         = var.zone_id
  base_domain     = var.base_domain
  cluster         = var.cluster
  router_hostname = var.router_hostname
}

output "api_host" {
  value = module.dns.api_host
}
