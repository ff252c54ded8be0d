//! Phase 3's gate and last step: the VPC is ours only when it carries the CAPA-owned tag. A
//! bring-your-own VPC (untagged, or tagged for another owner) is never discovered, so nothing in
//! it is touched by phase 3.

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::aws::discovery::tags;
use crate::aws::errors::call;
use crate::aws::model::AwsClients;
use async_trait::async_trait;

pub struct Vpcs;

const KIND: &str = "vpc";

/// The cluster's CAPA-managed VPC ids (normally one).
pub async fn capa_vpcs(c: &AwsClients, cluster: &str) -> Result<Vec<String>, CleanError> {
    let out = call("ec2.DescribeVpcs", || {
        c.ec2
            .describe_vpcs()
            .filters(tags::ec2_tag_filter(&tags::capa_key(cluster), tags::OWNED))
            .send()
    })
    .await
    .map_err(CleanError::discover(KIND, "DescribeVpcs"))?;
    Ok(out
        .vpcs()
        .iter()
        .filter_map(|v| v.vpc_id())
        .map(str::to_string)
        .collect())
}

#[async_trait]
impl Cleaner for Vpcs {
    type Detail = ();

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        70
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        Ok(ctx
            .vpc_ids
            .iter()
            .map(|v| Target::plain(v.clone()))
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.DeleteVpc", || {
            ctx.clients.ec2.delete_vpc().vpc_id(&t.id).send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteVpc")
    }
}
