//! Load balancers, classic and v2. Phase 1 deletes the CAPA API-server load balancer (CAPA tag);
//! phase 2 deletes the ones the cloud provider / LB controller created (from the inventory).
//! The API is chosen from what discovery recorded (ARN shape or the API it came from), so a delete
//! is one call with no Describe first.

use super::{CleanCtx, CleanError, Cleaner, Detail, Outcome, Target, settle, tag_scan, tags};
use crate::aws::errors::call;
use crate::aws::teardown::GcTask;
use async_trait::async_trait;

/// Where the load balancers to delete come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Phase 1: carrying `sigs.k8s.io/cluster-api-provider-aws/cluster/N=owned`.
    CapaOwned,
    /// Phase 2: the inventory.
    External,
}

pub struct LoadBalancers(pub Source);

const KIND: &str = "load-balancer";

#[async_trait]
impl Cleaner for LoadBalancers {
    fn service(&self) -> &'static str {
        "elasticloadbalancing"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        10
    }
    fn task(&self) -> Option<GcTask> {
        match self.0 {
            Source::CapaOwned => None,
            Source::External => Some(GcTask::LoadBalancer),
        }
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        if self.0 == Source::External {
            return Ok(ctx.inventory.load_balancers.clone());
        }
        let capa = tags::capa_key(ctx.cluster);
        let mut out = Vec::new();
        for lb in tag_scan::classic_load_balancers(ctx.clients).await? {
            if tags::is_owned(lb.pairs(), &capa) {
                out.push(Target::new(
                    lb.id.clone(),
                    Detail::ClassicLoadBalancer { name: lb.id },
                ));
            }
        }
        for lb in tag_scan::v2_load_balancers(ctx.clients).await? {
            if tags::is_owned(lb.pairs(), &capa) {
                out.push(Target::new(
                    lb.id.clone(),
                    Detail::V2LoadBalancer { arn: lb.id },
                ));
            }
        }
        Ok(out)
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        match &t.detail {
            Detail::ClassicLoadBalancer { name } => {
                let res = call("elb.DeleteLoadBalancer", || {
                    ctx.clients
                        .elb
                        .delete_load_balancer()
                        .load_balancer_name(name)
                        .send()
                })
                .await;
                settle(res, KIND, &t.id, "DeleteLoadBalancer")
            }
            Detail::V2LoadBalancer { arn } => {
                let res = call("elbv2.DeleteLoadBalancer", || {
                    ctx.clients
                        .elbv2
                        .delete_load_balancer()
                        .load_balancer_arn(arn)
                        .send()
                })
                .await;
                settle(res, KIND, &t.id, "DeleteLoadBalancer")
            }
            other => Ok(Outcome::Remaining(format!(
                "internal: load balancer target with {other:?}"
            ))),
        }
    }
}
