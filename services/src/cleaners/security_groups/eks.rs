//! Phase 2 (task `eks-security-group`, EKS only): the cluster security group EKS made for the
//! cluster (tagged `aws:eks:cluster-name=<eksName>`). EKS deletes it with the cluster, but it
//! sometimes outlives it (eksctl#5135), and then the cluster's network waits forever behind it.
//!
//! Which group is EKS's for the cluster, and when it may go (EKS reports the cluster gone, no
//! network interface uses it; until then it is left alone and phase 3 lists it as a blocker of
//! the VPC, as it always did), is `policy::security_groups`'s ([`eks_candidate`], [`eks_group`]).
//!
//! [`eks_candidate`]: crate::policy::security_groups::eks_candidate
//! [`eks_group`]: crate::policy::security_groups::eks_group
//!
//! Rules in other groups of its VPC that reference it are revoked first, as for every group.

use super::Group;
use crate::cleaners::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target};
use crate::errors::call;
use crate::locate::eks::{self, EksCluster};
use crate::locate::{describe, tags};
use crate::model::{GcTask, Phase};
use crate::policy::{self, Candidate, Eks};
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};

/// Selects EKS's cluster security group (on by default: without it, the network waits for EKS).
pub const TASK: GcTask = GcTask::new("eks-security-group");

pub struct EksClusterSecurityGroup;

const KIND: &str = "security-group";

/// After the other groups of phase 2 (order 45), whose rules may reference it.
pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &[
        "ec2:DescribeSecurityGroups",
        // Whether EKS reports the cluster gone, then whether an interface still uses the group.
        "eks:DescribeCluster",
        "ec2:DescribeNetworkInterfaces",
        "ec2:RevokeSecurityGroupIngress",
        "ec2:RevokeSecurityGroupEgress",
        "ec2:DeleteSecurityGroup",
    ],
    ..Descriptor::new("ec2", KIND, Phase::Tagged, 45)
};

#[async_trait]
impl Cleaner for EksClusterSecurityGroup {
    type Detail = Group;

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Group>>, CleanError> {
        if ctx.eks.is_none() || ctx.cluster_vpcs.is_empty() {
            return Ok(Vec::new());
        }
        let filters = vec![
            tags::ec2_tag_filter(tags::EKS_CLUSTER_TAG, ctx.cluster),
            tags::ec2_filter("vpc-id", ctx.cluster_vpcs),
        ];
        let candidates: Vec<(String, String)> = describe::security_groups(ctx.clients, filters)
            .await?
            .iter()
            .filter(|g| {
                let tags: Vec<(&str, &str)> = tags::ec2_pairs(g.tags()).collect();
                let c = Candidate {
                    tags: &tags,
                    vpc: g.vpc_id(),
                };
                policy::security_groups::eks_candidate(&c, ctx.cluster, ctx.cluster_vpcs)
                    .is_delete()
            })
            .filter_map(|g| Some((g.group_id()?.to_string(), g.vpc_id()?.to_string())))
            .collect();
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let said = eks::describe(ctx.clients, ctx.cluster).await;
        let failure;
        let eks = match &said {
            Ok(EksCluster::Gone) => Eks::Gone,
            Ok(EksCluster::Live(l)) => Eks::Live {
                name: &l.name,
                status: &l.status,
            },
            Err(f) => {
                tracing::warn!(cluster = %ctx.cluster, error = %f, "EKS cannot be asked whether the cluster is gone: its security group is kept (a blocker of the VPC)");
                failure = f.to_string();
                Eks::Unknown(&failure)
            }
        };
        // EKS is asked before the interfaces: while it keeps the group, they are not asked about.
        let verdict = policy::security_groups::eks_group(eks, None);
        if !verdict.is_delete() {
            tracing::debug!(cluster = %ctx.cluster, ?verdict, "EKS's cluster security group: kept");
            return Ok(Vec::new());
        }
        let mut ours = HashMap::new();
        let mut vpcs = HashSet::new();
        for (id, vpc) in candidates {
            let used = call("ec2.DescribeNetworkInterfaces", || {
                ctx.clients
                    .ec2
                    .describe_network_interfaces()
                    .filters(tags::ec2_filter("group-id", std::slice::from_ref(&id)))
                    .max_results(5)
                    .send()
            })
            .await
            .map_err(CleanError::discover(KIND, "DescribeNetworkInterfaces"))?;
            let user = used
                .network_interfaces()
                .first()
                .map(|n| n.network_interface_id().unwrap_or("(no id)"));
            let verdict = policy::security_groups::eks_group(Eks::Gone, user);
            if !verdict.is_delete() {
                tracing::info!(group = %id, ?verdict, "EKS's cluster security group: kept");
                continue;
            }
            ours.insert(id.clone(), id);
            vpcs.insert(vpc);
        }
        if ours.is_empty() {
            return Ok(Vec::new());
        }
        let vpcs: Vec<String> = vpcs.into_iter().collect();
        let all =
            describe::security_groups(ctx.clients, vec![tags::ec2_filter("vpc-id", &vpcs)]).await?;
        super::planned_with_holders(ctx, ours, all).await
    }

    fn also_changes(&self, detail: &Group) -> Vec<crate::model::Audited> {
        super::refs::planned(&detail.group_id, &detail.revokes)
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<Group>) -> Result<Outcome, CleanError> {
        super::delete_group(ctx, t).await
    }
}
