terraform {
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
}

variable "router_hostname" {
  description = "DNS name of the region's router load balancer"
  type        = string
}

locals {
  api_host      = var.cluster == "api" ? "api.${var.base_domain}" : "${var.cluster}.api.${var.base_domain}"
  download_host = var.cluster == "api" ? "download.${var.base_domain}" : "${var.cluster}.download.${var.base_domain}"
}

resource "aws_route53_record" "api" {
  zone_id = var.zone_id
  name    = local.api_host
  type    = "CNAME"
  ttl     = 300
  records = [var.router_hostname]
}

resource "aws_route53_record" "download" {
  zone_id = var.zone_id
  name    = local.download_host
  type    = "CNAME"
  ttl     = 300
  records = [var.router_hostname]
}

output "api_host" {
  value = local.api_host
}

output "download_host" {
  value = local.download_host
}
