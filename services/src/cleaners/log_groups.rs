//! Phase 2 (task `eks-log-group`, opt-in, EKS only): the CloudWatch Logs group EKS writes the
//! control-plane logs to, `/aws/eks/<eksName>/cluster`. EKS creates it with no retention and
//! never deletes it. Logs are evidence (an incident, an audit), so the task never runs unless the
//! cluster names it.
//!
//! Which group is the cluster's, and when it must wait for EKS to report the cluster gone, is
//! `policy::log_groups`'s: this cleaner describes, asks EKS and deletes.

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::{ErrorClass, call};
use crate::locate::eks::{self, EksCluster};
use crate::model::{GcTask, Phase};
use crate::policy::Eks;
use crate::policy::log_groups as policy;
use async_trait::async_trait;

pub use crate::policy::log_groups::{LogGroupFacts, control_plane_group};

/// Selects the EKS control-plane log group (opt-in: see the module doc).
pub const TASK: GcTask = GcTask::new("eks-log-group");

pub struct LogGroups;

const KIND: &str = "log-group";

/// Nothing in AWS depends on it (order 30).
pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &[
        "logs:DescribeLogGroups",
        // Whether EKS reports the cluster gone.
        "eks:DescribeCluster",
        "logs:DeleteLogGroup",
    ],
    ..Descriptor::new("logs", KIND, Phase::Tagged, 30)
};

#[async_trait]
impl Cleaner for LogGroups {
    /// The group's name (the target's id is its ARN when AWS gives one).
    type Detail = String;

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<String>>, CleanError> {
        if ctx.eks.is_none() {
            return Ok(Vec::new());
        }
        let name = control_plane_group(ctx.cluster);
        // A prefix query (there is no exact one): `/aws/eks/<name>/cluster-x` matches it too, and
        // is dropped by the rule.
        let listed = call("logs.DescribeLogGroups", || {
            ctx.clients
                .logs
                .describe_log_groups()
                .log_group_name_prefix(&name)
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeLogGroups"))?;
        let Some(g) = listed
            .log_groups()
            .iter()
            .find(|g| g.log_group_name() == Some(name.as_str()))
        else {
            return Ok(Vec::new());
        };
        let seen = LogGroupFacts {
            name: name.clone(),
            retention_days: g.retention_in_days(),
            deletion_protection: g.deletion_protection_enabled().unwrap_or(false),
        };
        if !policy::decide(&seen, ctx.cluster).is_delete() {
            tracing::info!(log_group = %name, retention_days = ?seen.retention_days, deletion_protection = seen.deletion_protection, "the EKS control-plane log group has a retention policy or deletion protection: someone keeps it, kept");
            return Ok(Vec::new());
        }
        let id = g
            .log_group_arn()
            .map_or_else(|| name.clone(), str::to_string);
        let t = Target::new(id, name);
        let verdict = match eks::describe(ctx.clients, ctx.cluster).await {
            Ok(EksCluster::Gone) => policy::by_eks(ctx.cluster, Eks::Gone),
            Ok(EksCluster::Live(l)) => policy::by_eks(
                ctx.cluster,
                Eks::Live {
                    name: &l.name,
                    status: &l.status,
                },
            ),
            Err(f) if f.class == ErrorClass::Transient => {
                policy::by_eks(ctx.cluster, Eks::Unknown(&f.to_string()))
            }
            Err(f) => {
                return Err(CleanError::Discover {
                    kind: KIND,
                    op: "eks:DescribeCluster (kept: EKS must report the cluster gone)",
                    source: f,
                });
            }
        };
        Ok(t.judged(verdict).into_iter().collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<String>) -> Result<Outcome, CleanError> {
        let res = call("logs.DeleteLogGroup", || {
            ctx.clients
                .logs
                .delete_log_group()
                .log_group_name(&t.detail)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteLogGroup")
    }
}
