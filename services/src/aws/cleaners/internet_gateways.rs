//! Phase 3: internet gateways attached to the CAPA-managed VPC and carrying CAPA's ownership tag:
//! detached, then deleted.

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::aws::discovery::tags;
use crate::aws::errors::call;
use async_trait::async_trait;

pub struct InternetGateways;

/// A gateway and the VPCs it must be detached from first.
#[derive(Clone, Debug, PartialEq)]
pub struct Gateway {
    pub gateway_id: String,
    pub vpc_ids: Vec<String>,
}

const KIND: &str = "internet-gateway";

#[async_trait]
impl Cleaner for InternetGateways {
    type Detail = Gateway;

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        30
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        if ctx.vpc_ids.is_empty() {
            return Ok(Vec::new());
        }
        let out = call("ec2.DescribeInternetGateways", || {
            ctx.clients
                .ec2
                .describe_internet_gateways()
                .filters(tags::ec2_filter("attachment.vpc-id", ctx.vpc_ids))
                .filters(tags::ec2_tag_filter(&ctx.capa_key(), tags::OWNED))
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeInternetGateways"))?;
        Ok(out
            .internet_gateways()
            .iter()
            .filter_map(|g| {
                let id = g.internet_gateway_id()?;
                let vpc_ids = g
                    .attachments()
                    .iter()
                    .filter_map(|a| a.vpc_id())
                    .map(str::to_string)
                    .collect();
                Some(
                    Target::new(
                        id,
                        Gateway {
                            gateway_id: id.to_string(),
                            vpc_ids,
                        },
                    )
                    .with_tags(tags::ec2_pairs(g.tags())),
                )
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<Gateway>) -> Result<Outcome, CleanError> {
        let Gateway {
            gateway_id,
            vpc_ids,
        } = &t.detail;
        for vpc in vpc_ids {
            let res = call("ec2.DetachInternetGateway", || {
                ctx.clients
                    .ec2
                    .detach_internet_gateway()
                    .internet_gateway_id(gateway_id)
                    .vpc_id(vpc)
                    .send()
            })
            .await;
            // Gateway.NotAttached and NotFound both mean "already detached".
            let res = res.map(|_| ()).or_else(|f| match f.code.as_deref() {
                Some("Gateway.NotAttached") => Ok(()),
                _ => Err(f),
            });
            match settle(res, KIND, &t.id, "DetachInternetGateway")? {
                Outcome::Remaining(r) => return Ok(Outcome::Remaining(r)),
                Outcome::Deleted | Outcome::DeletedWith(_) | Outcome::Gone => {}
            }
        }
        let res = call("ec2.DeleteInternetGateway", || {
            ctx.clients
                .ec2
                .delete_internet_gateway()
                .internet_gateway_id(gateway_id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteInternetGateway")
    }
}
