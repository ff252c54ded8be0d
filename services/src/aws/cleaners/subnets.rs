//! Phase 3: the subnets of the CAPA-managed VPC that carry CAPA's ownership tag.

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::aws::discovery::tags;
use crate::aws::errors::call;
use async_trait::async_trait;

pub struct Subnets;

const KIND: &str = "subnet";

#[async_trait]
impl Cleaner for Subnets {
    type Detail = ();

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        50
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        if ctx.vpc_ids.is_empty() {
            return Ok(Vec::new());
        }
        let out = call("ec2.DescribeSubnets", || {
            ctx.clients
                .ec2
                .describe_subnets()
                .filters(tags::ec2_filter("vpc-id", ctx.vpc_ids))
                .filters(tags::ec2_tag_filter(&ctx.capa_key(), tags::OWNED))
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeSubnets"))?;
        Ok(out
            .subnets()
            .iter()
            .filter_map(|s| {
                Some(Target::plain(s.subnet_id()?).with_tags(tags::ec2_pairs(s.tags())))
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.DeleteSubnet", || {
            ctx.clients.ec2.delete_subnet().subnet_id(&t.id).send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteSubnet")
    }
}
