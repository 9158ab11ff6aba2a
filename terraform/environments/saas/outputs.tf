output "clusters" {
  description = "per cluster: namespace, public hosts, the load balancer they point at, the backup collection and the role its CockroachDB nodes assume"
  value = {
    for name, m in { api = module.api, us1 = module.us1, as1 = module.as1 } : name => {
      namespace          = m.namespace
      hosts              = m.hosts
      router_hostname    = m.router_hostname
      backup_url         = m.backup_url
      backup_role_arn    = m.backup_role_arn
    }
  }
}
