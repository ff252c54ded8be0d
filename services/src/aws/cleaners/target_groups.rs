//! Target groups, after the load balancers: one bulk DescribeTargetGroups tells which are still
//! attached (LoadBalancerArns); those are reported in use and left for a later pass, the rest are
//! deleted. A ResourceInUse from the delete itself is retried, then reported the same way.

use super::{CleanCtx, CleanError, Cleaner, Detail, Outcome, Target, settle, tag_scan};
use crate::aws::errors::call;
use crate::aws::teardown::GcTask;
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};

pub struct TargetGroups;

const KIND: &str = "target-group";

#[async_trait]
impl Cleaner for TargetGroups {
    fn service(&self) -> &'static str {
        "elasticloadbalancing"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        20
    }
    fn task(&self) -> Option<GcTask> {
        Some(GcTask::TargetGroup)
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        let ours = &ctx.inventory.target_groups;
        if ours.is_empty() {
            return Ok(Vec::new());
        }
        // Runs after the load balancer cleaner, so attachments reflect this pass's deletes.
        let mut users: HashMap<String, Vec<String>> = tag_scan::target_groups(ctx.clients)
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
            let live: HashSet<String> = tag_scan::v2_load_balancer_arns(ctx.clients)
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
                let mut t = Target::new(arn.clone(), Detail::Plain);
                if !lbs.is_empty() {
                    t.blocked = Some(format!("in use by load balancer(s) {}", lbs.join(", ")));
                }
                Some(t)
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
