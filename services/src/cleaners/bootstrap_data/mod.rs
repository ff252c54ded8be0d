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

mod parameters;
mod secrets;

use super::{Descriptor, Target};
use crate::model::{GcTask, Phase};
use crate::policy::Verdict;

pub use parameters::BootstrapParameters;
pub use secrets::BootstrapSecrets;

/// Selects CAPA's bootstrap data (on by default).
pub const TASK: GcTask = GcTask::new("bootstrap-data");

/// The recovery window of a deleted secret: Secrets Manager's minimum.
pub const RECOVERY_DAYS: i64 = 7;

/// Nothing in AWS depends on them (order 30).
pub const SECRETS: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &["secretsmanager:ListSecrets", "secretsmanager:DeleteSecret"],
    ..Descriptor::new("secretsmanager", "bootstrap-secret", Phase::External, 30)
};

/// Nothing in AWS depends on them (order 30).
pub const PARAMETERS: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &["ssm:DescribeParameters", "ssm:DeleteParameters"],
    ..Descriptor::new("ssm", "bootstrap-parameter", Phase::External, 30)
};

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
