# The shared SaaS installation: one region per shared cluster. Each region's
# Kubernetes provider is configured by the caller (aliases below).

variable "base_domain" {
  type    = string
  default = "tally.example.com"
}

variable "zone_id" {
  type = string
}

variable "identity_secret" {
  type      = string
  sensitive = true
}

variable "tenancy_database_url" {
  type      = string
  sensitive = true
}

variable "regions" {
  description = "per cluster: its regional database URL and router load balancer"
  type = map(object({
    regional_database_url = string
    router_hostname       = string
  }))
}

module "region" {
  source   = "../../modules/region"
  for_each = var.regions

  cluster               = each.key
  identity_secret       = var.identity_secret
  tenancy_database_url  = var.tenancy_database_url
  regional_database_url = each.value.regional_database_url
  zone_id               = var.zone_id
  base_domain           = var.base_domain
  router_hostname       = each.value.router_hostname
}

output "api_hosts" {
  value = { for k, m in module.region : k => m.api_host }
}
