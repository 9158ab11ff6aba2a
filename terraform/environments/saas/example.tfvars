# terraform apply -var-file=example.tfvars (after filling in the zone). After `kubectl apply -k deploy/clusters/<cluster>`, set
# that cluster's router_deployed = true and apply again for its DNS records.
base_domain = "tally.example.com"
zone_id     = "Z0123456789EXAMPLE"
acme_email  = "ops@example.com"
regions = {
  api = { aws_region = "eu-west-1", eks_cluster_name = "tally-api", router_deployed = false }
  us1 = { aws_region = "us-east-1", eks_cluster_name = "tally-us1", router_deployed = false }
  as1 = { aws_region = "ap-southeast-1", eks_cluster_name = "tally-as1", router_deployed = false }
}
