# The shared SaaS installation: three Tally clusters, each in its own AWS
# region and its own EKS cluster, with its own CockroachDB nodes:
#
#   api  Europe  eu-west-1
#   us1  US      us-east-1
#   as1  Asia    ap-southeast-1
#
# One aws and one kubernetes provider per region (aliases named by cluster),
# passed to that region's module: nothing of one region lands in another's
# Kubernetes cluster. The EKS clusters exist already (data sources); so do
# cert-manager, the AWS Load Balancer Controller and the Route 53 zone
# (deploy/README.md, "What must exist first").

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws        = { source = "hashicorp/aws", version = ">= 5.0" }
    kubernetes = { source = "hashicorp/kubernetes", version = ">= 2.20" }
  }
  # State in S3 (bucket, key, region, lock table given at init:
  # terraform init -backend-config=backend.hcl).
  backend "s3" {}
}

# --- Regions -------------------------------------------------------------------

provider "aws" {
  alias  = "api"
  region = var.regions.api.aws_region
}

provider "aws" {
  alias  = "us1"
  region = var.regions.us1.aws_region
}

provider "aws" {
  alias  = "as1"
  region = var.regions.as1.aws_region
}

data "aws_eks_cluster" "api" {
  provider = aws.api
  name     = var.regions.api.eks_cluster_name
}

data "aws_eks_cluster" "us1" {
  provider = aws.us1
  name     = var.regions.us1.eks_cluster_name
}

data "aws_eks_cluster" "as1" {
  provider = aws.as1
  name     = var.regions.as1.eks_cluster_name
}

# Short-lived tokens from `aws eks get-token` at each run, not a token stored
# in the state.
provider "kubernetes" {
  alias                  = "api"
  host                   = data.aws_eks_cluster.api.endpoint
  cluster_ca_certificate = base64decode(data.aws_eks_cluster.api.certificate_authority[0].data)
  exec {
    api_version = "client.authentication.k8s.io/v1beta1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", var.regions.api.eks_cluster_name, "--region", var.regions.api.aws_region]
  }
}

provider "kubernetes" {
  alias                  = "us1"
  host                   = data.aws_eks_cluster.us1.endpoint
  cluster_ca_certificate = base64decode(data.aws_eks_cluster.us1.certificate_authority[0].data)
  exec {
    api_version = "client.authentication.k8s.io/v1beta1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", var.regions.us1.eks_cluster_name, "--region", var.regions.us1.aws_region]
  }
}

provider "kubernetes" {
  alias                  = "as1"
  host                   = data.aws_eks_cluster.as1.endpoint
  cluster_ca_certificate = base64decode(data.aws_eks_cluster.as1.certificate_authority[0].data)
  exec {
    api_version = "client.authentication.k8s.io/v1beta1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", var.regions.as1.eks_cluster_name, "--region", var.regions.as1.aws_region]
  }
}

# --- The three clusters ----------------------------------------------------------

module "api" {
  source    = "../../modules/region"
  providers = { aws = aws.api, kubernetes = kubernetes.api }

  cluster                    = "api"
  aws_region                 = var.regions.api.aws_region
  eks_cluster_name           = var.regions.api.eks_cluster_name
  base_domain                = var.base_domain
  zone_id                    = var.zone_id
  secrets_manager_secret_ids = ["${var.secrets_prefix}/shared", "${var.secrets_prefix}/api"]
  router_deployed            = var.regions.api.router_deployed
  acme_email                 = var.acme_email
  backup_bucket_name         = "tally-backups-${var.regions.api.aws_region}"
  other_backup_bucket_names  = ["tally-backups-${var.regions.us1.aws_region}", "tally-backups-${var.regions.as1.aws_region}"]
}

module "us1" {
  source    = "../../modules/region"
  providers = { aws = aws.us1, kubernetes = kubernetes.us1 }

  cluster                    = "us1"
  aws_region                 = var.regions.us1.aws_region
  eks_cluster_name           = var.regions.us1.eks_cluster_name
  base_domain                = var.base_domain
  zone_id                    = var.zone_id
  secrets_manager_secret_ids = ["${var.secrets_prefix}/shared", "${var.secrets_prefix}/us1"]
  router_deployed            = var.regions.us1.router_deployed
  acme_email                 = var.acme_email
  backup_bucket_name         = "tally-backups-${var.regions.us1.aws_region}"
  other_backup_bucket_names  = ["tally-backups-${var.regions.api.aws_region}", "tally-backups-${var.regions.as1.aws_region}"]
}

module "as1" {
  source    = "../../modules/region"
  providers = { aws = aws.as1, kubernetes = kubernetes.as1 }

  cluster                    = "as1"
  aws_region                 = var.regions.as1.aws_region
  eks_cluster_name           = var.regions.as1.eks_cluster_name
  base_domain                = var.base_domain
  zone_id                    = var.zone_id
  secrets_manager_secret_ids = ["${var.secrets_prefix}/shared", "${var.secrets_prefix}/as1"]
  router_deployed            = var.regions.as1.router_deployed
  acme_email                 = var.acme_email
  backup_bucket_name         = "tally-backups-${var.regions.as1.aws_region}"
  other_backup_bucket_names  = ["tally-backups-${var.regions.api.aws_region}", "tally-backups-${var.regions.us1.aws_region}"]
}
