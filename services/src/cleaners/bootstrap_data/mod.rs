//! Phase 2 (task `bootstrap-data`): CAPA's bootstrap data that AWSMachines left behind, in
//! Secrets Manager (`aws.cluster.x-k8s.io/<uuid>-<n>`) and SSM Parameter Store
//! (`/cluster.x-k8s.io/<uuid>/<n>`). What CAPA writes, quoting its code, and the rule (CAPA's name
//! shape and `sigs.k8s.io/cluster-api-provider-aws/cluster/<N>=owned`) are
//! `policy::bootstrap_data`'s.
//!
//! Found with the services' own listings, filtered on the server by CAPA's name prefix and CAPA's
//! tag key for the cluster (the tagging API's phase-2 scan asks for the cloud provider's key and
//! leaves CAPA-tagged resources to phases 1 and 3): one `ListSecrets` and one `DescribeParameters`
//! per page of 100 and 50. Secrets Manager's `TagKey` filter is a prefix match (cluster `c1`'s key
//! also finds `c10`'s), so every listed secret's tags, which the listing returns, go through the
//! rule; SSM's `tag:<key>` filter is exact (key and value `owned`) and is the rule's tag check.
//! Secrets are deleted one call each, with a 7-day recovery window (a secret pending deletion is
//! no longer listed, and one that is anyway is skipped); parameters ten at a time
//! (`DeleteParameters`).
//!
//! CAPA's bootstrap data in S3 (task `bootstrap-data-s3`, its own task: see [`TASK_S3`]) is
//! **reported, never deleted**: the objects carry no tag and their keys name machines, not the
//! cluster, and nothing proves CAPA created the bucket for this cluster (the rule, quoting CAPA's
//! code: `policy::bootstrap_s3`). Only the bucket the cluster's object names
//! (`spec.s3Bucket.name`, `PassRequest::s3_bucket`) is read: one `ListObjectsV2` per page of
//! 1000 under each of CAPA's three prefixes (`objects`), one `GetBucketTagging` (`bucket`), both
//! only to say in the report what is there and what its tags claim.

mod bucket;
mod objects;
mod parameters;
mod secrets;

use super::{CleanCtx, Descriptor, Outcome, Target};
use crate::model::{Failure, FailureKind, GcTask, Phase};
use crate::policy::Verdict;

pub use bucket::BootstrapBucket;
pub use objects::BootstrapObjects;
pub use parameters::BootstrapParameters;
pub use secrets::BootstrapSecrets;

/// Selects CAPA's bootstrap data (on by default).
pub const TASK: GcTask = GcTask::new("bootstrap-data");

/// Selects the report of CAPA's bootstrap data in S3 (on by default). A task of its own, not
/// `bootstrap-data`'s: it deletes nothing, reads a bucket the user names (whose own policy may
/// deny sweeper), and needs `s3:` permissions the secrets and parameters do not; a cluster can
/// drop the report without giving up the deletes, and a future rule that may delete (should CAPA
/// ever tag its objects) comes under its own name.
pub const TASK_S3: GcTask = GcTask::new("bootstrap-data-s3");

/// The recovery window of a deleted secret: Secrets Manager's minimum.
pub const RECOVERY_DAYS: i64 = 7;

/// Nothing in AWS depends on them (order 30).
pub const SECRETS: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &["secretsmanager:ListSecrets", "secretsmanager:DeleteSecret"],
    ..Descriptor::new("secretsmanager", "bootstrap-secret", Phase::Tagged, 30)
};

/// Nothing in AWS depends on them (order 30).
pub const PARAMETERS: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &["ssm:DescribeParameters", "ssm:DeleteParameters"],
    ..Descriptor::new("ssm", "bootstrap-parameter", Phase::Tagged, 30)
};

/// Report only, so nothing orders it before the bucket (order 30 too).
pub const OBJECTS: Descriptor = Descriptor {
    task: Some(TASK_S3),
    iam_actions: &["s3:ListBucket"],
    ..Descriptor::new("s3", "bootstrap-object", Phase::Tagged, 30)
};

/// Report only (order 30).
pub const BUCKET: Descriptor = Descriptor {
    task: Some(TASK_S3),
    iam_actions: &["s3:GetBucketTagging"],
    ..Descriptor::new("s3", "bootstrap-bucket", Phase::Tagged, 30)
};

/// The ARN of `bucket` (`key`: of an object in it) in the session's partition.
pub(super) fn s3_arn(ctx: &CleanCtx<'_>, bucket: &str, key: Option<&str>) -> String {
    let partition = ctx
        .clients
        .scope
        .as_ref()
        .map_or("aws", |s| s.partition.as_str());
    match key {
        Some(k) => format!("arn:{partition}:s3:::{bucket}/{k}"),
        None => format!("arn:{partition}:s3:::{bucket}"),
    }
}

/// What a report-only kind's `delete` answers, should the runner ever ask: nothing is called.
pub(super) fn never_deleted() -> Outcome {
    Outcome::Remaining(Failure::new(
        FailureKind::Other,
        "reported only: sweeper never deletes CAPA's S3 bootstrap data",
    ))
}

/// A found secret or parameter as the rule leaves it: a target, a reported one, or none.
pub(super) fn judged<D>(t: Target<D>, verdict: Verdict) -> Option<Target<D>> {
    match verdict {
        Verdict::Keep(why) => {
            tracing::info!(id = %t.id, %why, "bootstrap data not proven CAPA's: reported, kept");
            Some(t.kept(why))
        }
        v => t.judged(v),
    }
}
