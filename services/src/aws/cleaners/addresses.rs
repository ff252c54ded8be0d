//! Phase 3: Elastic IPs CAPA allocated for the cluster's NAT gateways (CAPA tags them). Released
//! once no longer associated; while a NAT gateway still holds one, it is reported waiting.

use super::{CleanCtx, CleanError, Cleaner, Detail, Outcome, Target, settle, tags};
use crate::aws::errors::call;
use async_trait::async_trait;

pub struct Addresses;

const KIND: &str = "elastic-ip";

#[async_trait]
impl Cleaner for Addresses {
    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        20
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        // Only with a CAPA-managed VPC: EIPs belong to the network phase.
        if ctx.vpc_ids.is_empty() {
            return Ok(Vec::new());
        }
        let out = call("ec2.DescribeAddresses", || {
            ctx.clients
                .ec2
                .describe_addresses()
                .filters(tags::ec2_tag_filter(
                    &tags::capa_key(ctx.cluster),
                    tags::OWNED,
                ))
                .send()
        })
        .await
        .map_err(|source| CleanError::Discover {
            kind: KIND,
            op: "DescribeAddresses",
            source,
        })?;
        Ok(out
            .addresses()
            .iter()
            .filter_map(|a| {
                let mut t = Target::new(a.allocation_id()?, Detail::Plain);
                if let Some(assoc) = a.association_id() {
                    t.blocked = Some(format!(
                        "still associated ({assoc}); waiting for its NAT gateway"
                    ));
                }
                Some(t)
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.ReleaseAddress", || {
            ctx.clients
                .ec2
                .release_address()
                .allocation_id(&t.id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "ReleaseAddress")
    }
}
