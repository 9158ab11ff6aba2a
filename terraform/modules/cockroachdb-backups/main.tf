# Object storage for one region's CockroachDB backups: a private, encrypted,
# versioned S3 bucket in the region (one per AWS region: a dedicated cluster
# in the same region shares it, under its own prefix), and an IAM role given
# to the CockroachDB nodes' ServiceAccount by an EKS Pod Identity association,
# so that the backup schedule's URL says AUTH=implicit and no key is stored.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = { source = "hashicorp/aws", version = ">= 5.0" }
  }
}

variable "bucket_name" {
  description = "the overlays' BACKUP_URI names tally-backups-<aws region> (S3 names are global: change both)"
  type        = string
}

variable "create_bucket" {
  description = "false when another cluster's module in the same AWS region made the bucket"
  type        = bool
  default     = true
}

variable "prefix" {
  description = "folder of this cluster's backups in the bucket: cockroach/<database>, as the overlay's BACKUP_URI"
  type        = string
}

variable "other_bucket_names" {
  description = "the other regions' backup buckets: in a multi-region CockroachDB cluster a BACKUP's data is written by the nodes holding it, in any region, so every region's nodes need every region's bucket"
  type        = list(string)
  default     = []
}

variable "iam_role_name" {
  type = string
}

variable "eks_cluster_name" {
  type = string
}

variable "namespace" {
  description = "namespace of the CockroachDB cluster"
  type        = string
}

variable "service_account" {
  description = "ServiceAccount of the CockroachDB nodes (deploy/cockroachdb/nodes: cockroachdb)"
  type        = string
}

variable "expire_after_days" {
  description = "backups older than this are deleted (a full backup and its incrementals must stay together: keep it well above the full-backup interval)"
  type        = number
  default     = 35
}

data "aws_s3_bucket" "existing" {
  count  = var.create_bucket ? 0 : 1
  bucket = var.bucket_name
}

locals {
  bucket_arn  = var.create_bucket ? aws_s3_bucket.backups[0].arn : data.aws_s3_bucket.existing[0].arn
  bucket_arns = distinct(concat([local.bucket_arn], [for b in var.other_bucket_names : "arn:aws:s3:::${b}"]))
}

resource "aws_s3_bucket" "backups" {
  count  = var.create_bucket ? 1 : 0
  bucket = var.bucket_name
}

resource "aws_s3_bucket_public_access_block" "backups" {
  count                   = var.create_bucket ? 1 : 0
  bucket                  = aws_s3_bucket.backups[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "backups" {
  count  = var.create_bucket ? 1 : 0
  bucket = aws_s3_bucket.backups[0].id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "backups" {
  count  = var.create_bucket ? 1 : 0
  bucket = aws_s3_bucket.backups[0].id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "aws:kms"
    }
    bucket_key_enabled = true
  }
}

# Versioning keeps an overwritten or deleted backup file recoverable for a
# while (a mistaken or malicious delete through the nodes' role).
resource "aws_s3_bucket_versioning" "backups" {
  count  = var.create_bucket ? 1 : 0
  bucket = aws_s3_bucket.backups[0].id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "backups" {
  count  = var.create_bucket ? 1 : 0
  bucket = aws_s3_bucket.backups[0].id
  rule {
    id     = "expire"
    status = "Enabled"
    filter {
      prefix = "cockroach/"
    }
    expiration {
      days = var.expire_after_days
    }
    noncurrent_version_expiration {
      noncurrent_days = 7
    }
  }
  depends_on = [aws_s3_bucket_versioning.backups]
}

# What BACKUP, RESTORE and SHOW BACKUPS need of the bucket.
data "aws_iam_policy_document" "s3" {
  statement {
    actions   = ["s3:ListBucket", "s3:GetBucketLocation"]
    resources = local.bucket_arns
  }
  statement {
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
    resources = [for arn in local.bucket_arns : "${arn}/cockroach/*"]
  }
}

module "role" {
  source           = "../pod-identity-role"
  name             = var.iam_role_name
  eks_cluster_name = var.eks_cluster_name
  namespace        = var.namespace
  service_account  = var.service_account
  policy_name      = "crdb-backups"
  policy           = data.aws_iam_policy_document.s3.json
}

# Where the role was made here, before modules/pod-identity-role.
moved {
  from = aws_iam_role.nodes
  to   = module.role.aws_iam_role.this
}

moved {
  from = aws_iam_role_policy.s3
  to   = module.role.aws_iam_role_policy.this
}

moved {
  from = aws_eks_pod_identity_association.nodes
  to   = module.role.aws_eks_pod_identity_association.this
}

output "url" {
  description = "the backup collection URL for CREATE SCHEDULE … FOR BACKUP INTO and RESTORE … IN"
  value       = "s3://${var.bucket_name}/${var.prefix}?AUTH=implicit"
}

output "bucket" {
  value = var.bucket_name
}

output "iam_role_arn" {
  value = module.role.arn
}
