//! Phase 3: NAT gateways of the CAPA-managed VPC carrying CAPA's ownership tag. Deletion is asynchronous: a pass requests it and
//! reports "waiting" while the gateway is `deleting`; a `deleted` gateway is no longer a target.

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, requested, settle};
use crate::aws::discovery::tags;
use crate::aws::errors::call;
use async_trait::async_trait;

pub struct NatGateways;

const KIND: &str = "natgateway";

#[async_trait]
impl Cleaner for NatGateways {
    type Detail = ();

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        10
    }
    fn gates_later(&self) -> bool {
        true
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        if ctx.vpc_ids.is_empty() {
            return Ok(Vec::new());
        }
        let out = call("ec2.DescribeNatGateways", || {
            ctx.clients
                .ec2
                .describe_nat_gateways()
                .filter(tags::ec2_filter("vpc-id", ctx.vpc_ids))
                .filter(tags::ec2_tag_filter(&ctx.capa_key(), tags::OWNED))
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeNatGateways"))?;
        let mut targets = Vec::new();
        for n in out.nat_gateways() {
            let Some(id) = n.nat_gateway_id() else {
                continue;
            };
            let state = n.state().map(|s| s.as_str()).unwrap_or_default();
            if state == "deleted" {
                continue;
            }
            let mut t = Target::plain(id).with_tags(tags::ec2_pairs(n.tags()));
            if state == "deleting" {
                t.blocked = Some("waiting for the NAT gateway to be deleted".into());
            }
            targets.push(t);
        }
        Ok(targets)
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.DeleteNatGateway", || {
            ctx.clients
                .ec2
                .delete_nat_gateway()
                .nat_gateway_id(&t.id)
                .send()
        })
        .await;
        // Accepted, not finished: the EIP and subnets wait for the next pass to see `deleted`.
        Ok(requested(settle(res, KIND, &t.id, "DeleteNatGateway")?))
    }
}
