# cert-manager's ACME ClusterIssuer for one Kubernetes cluster ("letsencrypt",
# the issuerRef of the Certificates in deploy/), solving DNS-01 challenges in
# Route 53: the one source of that ClusterIssuer in clusters terraform manages
# (deploy/cert-manager/ is the by-hand alternative, never applied beside it).
# The router serves TLS itself from the Secrets those Certificates write.
#
# Credentials: no access keys. An IAM role allowed to change only TXT records
# of the one zone, given to cert-manager's controller ServiceAccount by an EKS
# Pod Identity association (the cluster runs the eks-pod-identity-agent
# add-on); the solver uses those ambient credentials.
#
# cert-manager and its CRDs must be installed in the cluster before this is
# applied: kubernetes_manifest reads the ClusterIssuer's schema at plan time.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws        = { source = "hashicorp/aws", version = ">= 5.0" }
    kubernetes = { source = "hashicorp/kubernetes", version = ">= 2.20" }
  }
}

variable "name" {
  description = "the ClusterIssuer's name: the issuerRef of the Certificates in deploy/"
  type        = string
  default     = "letsencrypt"
}

variable "iam_role_name" {
  description = "name of the IAM role cert-manager assumes (IAM names are global to the account: one per Kubernetes cluster)"
  type        = string
}

variable "eks_cluster_name" {
  description = "the EKS cluster whose cert-manager gets the role (Pod Identity)"
  type        = string
}

variable "aws_region" {
  description = "region for cert-manager's AWS calls (Route 53 is global; STS is regional)"
  type        = string
}

variable "zone_id" {
  description = "Route 53 hosted zone of the base domain"
  type        = string
}

variable "acme_email" {
  description = "contact address of the ACME account (expiry warnings)"
  type        = string
}

variable "acme_server" {
  description = "ACME directory; Let's Encrypt's staging one is https://acme-staging-v02.api.letsencrypt.org/directory"
  type        = string
  default     = "https://acme-v02.api.letsencrypt.org/directory"
}

variable "cert_manager_namespace" {
  type    = string
  default = "cert-manager"
}

variable "cert_manager_controller_service_account" {
  description = "ServiceAccount of cert-manager's controller (the Helm chart's default), which does the DNS-01 calls"
  type        = string
  default     = "cert-manager"
}

data "aws_iam_policy_document" "route53" {
  statement {
    actions   = ["route53:GetChange"]
    resources = ["arn:aws:route53:::change/*"]
  }
  # cert-manager's documented policy; with hostedZoneID set the solver does
  # not look zones up, but the list is harmless and keeps a solver without
  # it working. deploy/cert-manager/ lists the same permissions.
  statement {
    actions   = ["route53:ListHostedZonesByName"]
    resources = ["*"]
  }
  statement {
    actions   = ["route53:ChangeResourceRecordSets", "route53:ListResourceRecordSets"]
    resources = ["arn:aws:route53:::hostedzone/${var.zone_id}"]
    condition {
      test     = "ForAllValues:StringEquals"
      variable = "route53:ChangeResourceRecordSetsRecordTypes"
      values   = ["TXT"]
    }
  }
}

module "role" {
  source           = "../pod-identity-role"
  name             = var.iam_role_name
  eks_cluster_name = var.eks_cluster_name
  namespace        = var.cert_manager_namespace
  service_account  = var.cert_manager_controller_service_account
  policy_name      = "route53-dns01"
  policy           = data.aws_iam_policy_document.route53.json
}

# Where the role was made here, before modules/pod-identity-role.
moved {
  from = aws_iam_role.dns01
  to   = module.role.aws_iam_role.this
}

moved {
  from = aws_iam_role_policy.dns01
  to   = module.role.aws_iam_role_policy.this
}

moved {
  from = aws_eks_pod_identity_association.cert_manager
  to   = module.role.aws_eks_pod_identity_association.this
}

resource "kubernetes_manifest" "cluster_issuer" {
  manifest = {
    apiVersion = "cert-manager.io/v1"
    kind       = "ClusterIssuer"
    metadata   = { name = var.name }
    spec = {
      acme = {
        server              = var.acme_server
        email               = var.acme_email
        privateKeySecretRef = { name = "${var.name}-account" }
        solvers = [{
          dns01 = {
            route53 = {
              region       = var.aws_region
              hostedZoneID = var.zone_id
            }
          }
        }]
      }
    }
  }
  depends_on = [module.role]
}

output "name" {
  value = var.name
}

output "iam_role_arn" {
  value = module.role.arn
}
