output "namespace" {
  value = kubernetes_namespace_v1.tally.metadata[0].name
}

output "api_host" {
  value = module.dns.api_host
}

output "download_host" {
  value = module.dns.download_host
}

output "hosts" {
  description = "every public host of the cluster: the dnsNames of its certificates"
  value       = module.dns.hosts
}

output "router_hostname" {
  description = "the load balancer the DNS records point at (null until router_deployed)"
  value       = local.router_hostname
}

output "cluster_issuer" {
  value = var.create_cluster_issuer ? module.issuer[0].name : null
}

output "backup_url" {
  description = "the backup collection for the overlay's backup schedule and restore (docs/runbooks/restore.md)"
  value       = var.backup_bucket_name == null ? null : module.backups[0].url
}

output "backup_role_arn" {
  description = "the role the CockroachDB nodes get through EKS Pod Identity"
  value       = var.backup_bucket_name == null ? null : module.backups[0].iam_role_arn
}
