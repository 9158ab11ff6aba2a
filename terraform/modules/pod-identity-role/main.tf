# An IAM role given to one Kubernetes ServiceAccount by an EKS Pod Identity
# association (the cluster runs the eks-pod-identity-agent add-on), with one
# inline policy: how the modules give a pod AWS credentials without storing
# a key (cert-manager's DNS-01 solver, the CockroachDB nodes' backups).

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = { source = "hashicorp/aws", version = ">= 5.0" }
  }
}

variable "name" {
  description = "the IAM role's name (IAM names are global to the account: one per Kubernetes cluster and use)"
  type        = string
}

variable "eks_cluster_name" {
  type = string
}

variable "namespace" {
  type = string
}

variable "service_account" {
  description = "the ServiceAccount whose pods get the role"
  type        = string
}

variable "policy_name" {
  type = string
}

variable "policy" {
  description = "the inline policy's JSON (an aws_iam_policy_document's json)"
  type        = string
}

data "aws_iam_policy_document" "trust" {
  statement {
    actions = ["sts:AssumeRole", "sts:TagSession"]
    principals {
      type        = "Service"
      identifiers = ["pods.eks.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "this" {
  name               = var.name
  assume_role_policy = data.aws_iam_policy_document.trust.json
}

resource "aws_iam_role_policy" "this" {
  name   = var.policy_name
  role   = aws_iam_role.this.id
  policy = var.policy
}

resource "aws_eks_pod_identity_association" "this" {
  cluster_name    = var.eks_cluster_name
  namespace       = var.namespace
  service_account = var.service_account
  role_arn        = aws_iam_role.this.arn
}

output "arn" {
  value = aws_iam_role.this.arn
}
