//! Phase 2 (task `eks-log-group`, opt-in, EKS only): the CloudWatch Logs group EKS writes the
//! control-plane logs to, `/aws/eks/<eksName>/cluster`. EKS creates it with no retention and
//! never deletes it. Logs are evidence (an incident, an audit), so the task never runs unless the
//! cluster names it.
//!
//! A log group is a target only when every one of these holds:
//! - the cluster is an EKS cluster (`PassRequest::eks`);
//! - its name is exactly `/aws/eks/<eksName>/cluster`, in the region of the cluster's session
//!   (CloudWatch Logs is regional: the session's client only sees that region's groups);
//! - it has no retention policy and no deletion protection: either means someone set it up to
//!   keep it, so it is theirs;
//! - EKS reports the cluster gone (`DescribeCluster`: ResourceNotFound). While EKS still
//!   reports a cluster of that name, the group waits (the teardown waits for EKS anyway: the
//!   network cannot go before); when EKS cannot be asked, it is kept, with the reason.

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::discovery::eks::{self, EksCluster};
use crate::errors::{ErrorClass, call};
use crate::model::GcTask;
use async_trait::async_trait;

/// Selects the EKS control-plane log group (opt-in: see the module doc).
pub const TASK: GcTask = GcTask::new("eks-log-group");

pub struct LogGroups;

const KIND: &str = "log-group";

/// The only log group name this cleaner ever deletes for EKS cluster `eks_name`.
pub fn control_plane_group(eks_name: &str) -> String {
    format!("/aws/eks/{eks_name}/cluster")
}

/// What DescribeLogGroups says of one group, as the rule needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    pub name: String,
    pub retention_days: Option<i32>,
    pub deletion_protection: bool,
}

/// The rule for one described group (see the module doc), pure.
pub fn is_clusters_group(g: &Seen, eks_name: &str) -> bool {
    g.name == control_plane_group(eks_name) && g.retention_days.is_none() && !g.deletion_protection
}

#[async_trait]
impl Cleaner for LogGroups {
    /// The group's name (the target's id is its ARN when AWS gives one).
    type Detail = String;

    fn service(&self) -> &'static str {
        "logs"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    /// Nothing in AWS depends on it.
    fn order(&self) -> u32 {
        30
    }
    fn task(&self) -> Option<GcTask> {
        Some(TASK)
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
        let seen = Seen {
            name: name.clone(),
            retention_days: g.retention_in_days(),
            deletion_protection: g.deletion_protection_enabled().unwrap_or(false),
        };
        if !is_clusters_group(&seen, ctx.cluster) {
            tracing::info!(log_group = %name, retention_days = ?seen.retention_days, deletion_protection = seen.deletion_protection, "the EKS control-plane log group has a retention policy or deletion protection: someone keeps it, kept");
            return Ok(Vec::new());
        }
        let id = g
            .log_group_arn()
            .map_or_else(|| name.clone(), str::to_string);
        let mut t = Target::new(id, name);
        t.blocked = match eks::describe(ctx.clients, ctx.cluster).await {
            Ok(EksCluster::Gone) => None,
            Ok(EksCluster::Live(l)) => Some(format!(
                "EKS still reports cluster {} ({}): its logs wait until it is gone",
                l.name, l.status
            )),
            Err(f) if f.class == ErrorClass::Transient => Some(format!(
                "kept: EKS cannot be asked whether cluster {} is gone: {f}",
                ctx.cluster
            )),
            Err(f) => {
                return Err(CleanError::Discover {
                    kind: KIND,
                    op: "eks:DescribeCluster (kept: EKS must report the cluster gone)",
                    source: f,
                });
            }
        };
        Ok(vec![t])
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

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(name: &str, retention_days: Option<i32>, deletion_protection: bool) -> Seen {
        Seen {
            name: name.into(),
            retention_days,
            deletion_protection,
        }
    }

    #[test]
    fn the_clusters_control_plane_group_without_retention_is_a_target() {
        assert!(is_clusters_group(
            &seen("/aws/eks/ns_ek1/cluster", None, false),
            "ns_ek1"
        ));
    }

    #[test]
    fn look_alikes_are_not() {
        assert!(
            !is_clusters_group(&seen("/aws/eks/ns_ek1/cluster", Some(30), false), "ns_ek1"),
            "a retention policy: someone keeps it"
        );
        assert!(
            !is_clusters_group(&seen("/aws/eks/ns_ek1/cluster", None, true), "ns_ek1"),
            "deletion protection"
        );
        assert!(
            !is_clusters_group(&seen("/aws/eks/ns_ek1/cluster-x", None, false), "ns_ek1"),
            "a prefix match is another group"
        );
        assert!(
            !is_clusters_group(&seen("/aws/eks/ns_ek1-b/cluster", None, false), "ns_ek1"),
            "another cluster's"
        );
        assert!(
            !is_clusters_group(&seen("/aws/eks/ns_ek1/application", None, false), "ns_ek1"),
            "not the control plane's"
        );
    }
}
