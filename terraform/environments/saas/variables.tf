variable "base_domain" {
  description = "the platform's domain: api.<base_domain>, us1.api.<base_domain>, …"
  type        = string
  default     = "tally.example.com"
}

variable "zone_id" {
  description = "Route 53 hosted zone of base_domain"
  type        = string
}

variable "acme_email" {
  description = "contact of the Let's Encrypt account"
  type        = string
}

variable "secrets_prefix" {
  description = "Secrets Manager names: <prefix>/shared (identity_secret, operator_secret, tenancy_database_url, cockroachdb_ca_crt, cockroachdb_ca_key, cockroachdb_organization, cockroachdb_license, and the *_previous keys during a rotation), replicated to every region, and <prefix>/<cluster> (regional_database_url); terraform/README.md, \"Values\""
  type        = string
  default     = "tally"
}

variable "regions" {
  description = "per cluster: its AWS region (the CockroachDB locality of its nodes), its EKS cluster, and whether its overlay is applied yet (then DNS points at its router)"
  type = object({
    api = object({ aws_region = string, eks_cluster_name = string, router_deployed = bool })
    us1 = object({ aws_region = string, eks_cluster_name = string, router_deployed = bool })
    as1 = object({ aws_region = string, eks_cluster_name = string, router_deployed = bool })
  })
  default = {
    api = { aws_region = "eu-west-1", eks_cluster_name = "tally-api", router_deployed = false }
    us1 = { aws_region = "us-east-1", eks_cluster_name = "tally-us1", router_deployed = false }
    as1 = { aws_region = "ap-southeast-1", eks_cluster_name = "tally-as1", router_deployed = false }
  }
}
