# The public DNS records of one Tally cluster: its API host, its download host
# and any extra host, each a CNAME to the router's load balancer.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = { source = "hashicorp/aws", version = ">= 5.0" }
  }
}

variable "zone_id" {
  description = "Route 53 hosted zone of the base domain"
  type        = string
}

variable "base_domain" {
  description = "e.g. tally.example.com"
  type        = string
}

variable "cluster" {
  description = "api (Europe), us1, as1, or a dedicated cluster's name"
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,30}$", var.cluster))
    error_message = "cluster is a DNS label: lower-case letters, digits and '-'."
  }
}

variable "router_hostname" {
  description = "DNS name of the cluster's router load balancer (the tally-router Service's status); null makes no records yet, only the names"
  type        = string
  default     = null
}

variable "extra_hosts" {
  description = "more public host names served by this cluster's router (full names inside the zone)"
  type        = list(string)
  default     = []
}

variable "ttl" {
  type    = number
  default = 60
}

locals {
  # The names the router maps to clusters (README, Architecture): the shared
  # Europe cluster is "api", every other one "<name>.api".
  api_host      = var.cluster == "api" ? "api.${var.base_domain}" : "${var.cluster}.api.${var.base_domain}"
  download_host = var.cluster == "api" ? "download.${var.base_domain}" : "${var.cluster}.download.${var.base_domain}"
  hosts         = distinct(concat([local.api_host, local.download_host], var.extra_hosts))
}

resource "aws_route53_record" "host" {
  for_each = var.router_hostname == null ? toset([]) : toset(local.hosts)

  zone_id = var.zone_id
  name    = each.value
  type    = "CNAME"
  ttl     = var.ttl
  records = [var.router_hostname]
}

output "api_host" {
  value = local.api_host
}

output "download_host" {
  value = local.download_host
}

output "hosts" {
  description = "every public host of the cluster, for its TLS certificate"
  value       = local.hosts
}
