//! Target groups, after the load balancers: one bulk DescribeTargetGroups tells which are still
//! attached (LoadBalancerArns); those are reported in use and left for a later pass, the rest are
//! deleted (`policy::target_groups` decides). A ResourceInUse from the delete itself is retried, then reported the same way.

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, claim_into, settle};
use crate::discovery::describe;
use crate::discovery::inventory::Inventory;
use crate::discovery::tagging::TaggedResource;
use crate::errors::call;
use crate::model::{AwsClients, GcTask, Phase};
use crate::policy::{self, Candidate, Ownership};
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};

/// Selects phase 2's target groups.
pub const TASK: GcTask = GcTask::new("target-group");

pub struct TargetGroups;

const KIND: &str = "target-group";

/// Phase 2's target group ARNs in the inventory.
#[derive(Debug, Default)]
struct ExternalShare(Vec<String>);

/// The target group ARNs phase 2's discovery found.
pub fn external(inv: &Inventory) -> &[String] {
    inv.get::<ExternalShare>().map_or(&[], |s| &s.0)
}

pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &[
        "elasticloadbalancing:DescribeTargetGroups",
        "elasticloadbalancing:DescribeTags",
        // Which load balancers still use a group.
        "elasticloadbalancing:DescribeLoadBalancers",
        "elasticloadbalancing:DeleteTargetGroup",
    ],
    ..Descriptor::new("elasticloadbalancing", KIND, Phase::External, 20)
};

#[async_trait]
impl Cleaner for TargetGroups {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    fn claim(&self, r: &TaggedResource, inv: &mut Inventory) -> bool {
        let kind = ("elasticloadbalancing", "targetgroup");
        claim_into(r, inv, kind, |s: &mut ExternalShare, r| {
            s.0.push(r.arn.to_string())
        })
    }

    async fn describe_owned(
        &self,
        c: &AwsClients,
        own: &Ownership,
        inv: &mut Inventory,
    ) -> Result<(), CleanError> {
        let groups = describe::target_groups(c).await?;
        let vpc_of: HashMap<String, Option<String>> = groups
            .iter()
            .map(|t| (t.arn.clone(), t.vpc.clone()))
            .collect();
        let arns = groups.into_iter().map(|t| t.arn).collect();
        // The cluster tag, or the LB controller's in the cluster's VPC.
        let ours: Vec<String> = describe::v2_tags(c, arns, KIND)
            .await?
            .into_iter()
            .filter(|tg| {
                let tags: Vec<_> = tg.pairs().collect();
                let vpc = vpc_of.get(&tg.id).and_then(|v| v.as_deref());
                own.decide(&Candidate { tags: &tags, vpc }).is_delete()
            })
            .map(|tg| tg.id)
            .collect();
        inv.share_mut::<ExternalShare>().0.extend(ours);
        Ok(())
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        let ours = external(ctx.inventory);
        if ours.is_empty() {
            return Ok(Vec::new());
        }
        // Runs after the load balancer cleaner, so attachments reflect this pass's deletes.
        let mut users: HashMap<String, Vec<String>> = describe::target_groups(ctx.clients)
            .await?
            .into_iter()
            .map(|t| (t.arn, t.load_balancer_arns))
            .collect();
        // LocalStack (and briefly AWS) keeps listing a deleted load balancer in LoadBalancerArns:
        // only load balancers that still exist count as users. One bulk call, and only when needed.
        let attached = ours
            .iter()
            .any(|arn| users.get(arn).is_some_and(|l| !l.is_empty()));
        if attached {
            let live: HashSet<String> = describe::v2_load_balancer_arns(ctx.clients)
                .await?
                .into_iter()
                .collect();
            for lbs in users.values_mut() {
                lbs.retain(|l| live.contains(l));
            }
        }
        Ok(ours
            .iter()
            // Not listed any more: already deleted, nothing to do.
            .filter_map(|arn| {
                let lbs = users.get(arn)?;
                Target::plain(arn.clone()).judged(policy::target_groups::decide(lbs))
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("elbv2.DeleteTargetGroup", || {
            ctx.clients
                .elbv2
                .delete_target_group()
                .target_group_arn(&t.id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteTargetGroup")
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::mocked::{self, assert_calls, mock};
    use aws_sdk_elasticloadbalancingv2::Client;
    use aws_sdk_elasticloadbalancingv2::operation::delete_target_group::DeleteTargetGroupOutput;
    use aws_sdk_elasticloadbalancingv2::operation::describe_load_balancers::DescribeLoadBalancersOutput;
    use aws_sdk_elasticloadbalancingv2::operation::describe_target_groups::DescribeTargetGroupsOutput;
    use aws_sdk_elasticloadbalancingv2::types::{LoadBalancer, TargetGroup};

    fn tg(arn: &str, lbs: &[&str]) -> TargetGroup {
        let mut b = TargetGroup::builder().target_group_arn(arn);
        for l in lbs {
            b = b.load_balancer_arns(*l);
        }
        b.build()
    }

    #[tokio::test]
    async fn only_the_inventorys_groups_are_targets_and_one_a_live_balancer_uses_waits() {
        let mut inv = Inventory::default();
        inv.share_mut::<ExternalShare>().0.extend([
            "tg-free".to_string(),
            "tg-attached".to_string(),
            "tg-gone".to_string(),
        ]);
        let groups = mock!(Client::describe_target_groups).then_output(|| {
            DescribeTargetGroupsOutput::builder()
                .target_groups(tg("tg-free", &["lb-deleted"]))
                .target_groups(tg("tg-attached", &["lb-live", "lb-deleted"]))
                // Someone else's: listed by the region, never a target.
                .target_groups(tg("tg-theirs", &[]))
                .build()
        });
        let live = mock!(Client::describe_load_balancers).then_output(|| {
            DescribeLoadBalancersOutput::builder()
                .load_balancers(LoadBalancer::builder().load_balancer_arn("lb-live").build())
                .build()
        });
        let delete = mock!(Client::delete_target_group)
            .match_requests(|r| r.target_group_arn() == Some("tg-free"))
            .then_output(|| DeleteTargetGroupOutput::builder().build());
        let c = mocked::in_order(&[&groups, &live, &delete]);
        let cx = ctx(&c, &inv);
        let found = TargetGroups.discover(&cx).await.unwrap();
        let seen: Vec<(&str, Option<&str>)> = found
            .iter()
            .map(|t| (t.id.as_str(), t.blocked.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [
                ("tg-free", None),
                ("tg-attached", Some("in use by load balancer(s) lb-live")),
            ]
        );
        assert_eq!(
            TargetGroups.delete(&cx, &found[0]).await.unwrap(),
            Outcome::Deleted
        );
        assert_calls(&delete, 1, "DeleteTargetGroup");
    }

    #[tokio::test]
    async fn nothing_in_the_inventory_asks_nothing() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        assert!(
            TargetGroups
                .discover(&ctx(&c, &inv))
                .await
                .unwrap()
                .is_empty()
        );
    }
}
