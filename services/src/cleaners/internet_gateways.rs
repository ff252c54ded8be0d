//! Phase 3: internet gateways attached to the CAPA-managed VPC and carrying CAPA's ownership tag:
//! detached, then deleted.

use super::vpc_owned::{InVpcs, before_delete};
use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::tags;
use crate::model::Phase;
use async_trait::async_trait;

pub struct InternetGateways;

/// A gateway and the VPCs it must be detached from first.
#[derive(Clone, Debug, PartialEq)]
pub struct Gateway {
    pub gateway_id: String,
    pub vpc_ids: Vec<String>,
}

const KIND: &str = "internet-gateway";

pub const DESCRIPTOR: Descriptor = Descriptor {
    iam_actions: &[
        "ec2:DescribeInternetGateways",
        "ec2:DetachInternetGateway",
        "ec2:DeleteInternetGateway",
    ],
    ..Descriptor::new("ec2", KIND, Phase::Network, 30)
};

#[async_trait]
impl Cleaner for InternetGateways {
    type Detail = Gateway;

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Gateway>>, CleanError> {
        let Some(at) = InVpcs::of(ctx) else {
            return Ok(Vec::new());
        };
        let out = call("ec2.DescribeInternetGateways", || {
            at.ec2
                .describe_internet_gateways()
                .set_filters(Some(at.owned("attachment.vpc-id")))
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
        let ec2 = &ctx.clients.ec2;
        let Gateway {
            gateway_id,
            vpc_ids,
        } = &t.detail;
        for vpc in vpc_ids {
            let res = call("ec2.DetachInternetGateway", || {
                ec2.detach_internet_gateway()
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
            if let Some(wait) = before_delete(res, KIND, &t.id, "DetachInternetGateway")? {
                return Ok(wait);
            }
        }
        let res = call("ec2.DeleteInternetGateway", || {
            ec2.delete_internet_gateway()
                .internet_gateway_id(gateway_id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteInternetGateway")
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::cleaners::{CleanCtx, Cleaner};
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, assert_calls, code, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::delete_internet_gateway::DeleteInternetGatewayOutput;
    use aws_sdk_ec2::operation::describe_internet_gateways::DescribeInternetGatewaysOutput;
    use aws_sdk_ec2::operation::detach_internet_gateway::{
        DetachInternetGatewayError, DetachInternetGatewayOutput,
    };
    use aws_sdk_ec2::types::{InternetGateway, InternetGatewayAttachment};

    fn gateway(vpcs: &[&str]) -> Target<Gateway> {
        Target::new(
            "igw-1",
            Gateway {
                gateway_id: "igw-1".into(),
                vpc_ids: vpcs.iter().map(|v| v.to_string()).collect(),
            },
        )
    }

    #[tokio::test]
    async fn without_a_capa_managed_vpc_nothing_is_asked() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        let found = InternetGateways.discover(&ctx(&c, &inv)).await.unwrap();
        assert!(found.is_empty());
    }

    #[tokio::test]
    async fn asks_for_capa_owned_gateways_attached_to_the_vpc_and_records_attachments() {
        let describe = mock!(Client::describe_internet_gateways)
            .match_requests(|r| {
                filter_is(r.filters(), "attachment.vpc-id", &["vpc-1"])
                    && filter_is(r.filters(), &format!("tag:{CAPA_KEY}"), &["owned"])
                    && r.filters().len() == 2
            })
            .then_output(|| {
                DescribeInternetGatewaysOutput::builder()
                    .internet_gateways(
                        InternetGateway::builder()
                            .internet_gateway_id("igw-1")
                            .attachments(
                                InternetGatewayAttachment::builder().vpc_id("vpc-1").build(),
                            )
                            .tags(tag(CAPA_KEY, "owned"))
                            .build(),
                    )
                    .build()
            });
        let c = mocked::in_order(&[&describe]);
        let inv = Inventory::default();
        let vpcs = ["vpc-1".to_string()];
        let cx = CleanCtx {
            vpc_ids: &vpcs,
            ..ctx(&c, &inv)
        };
        let found = InternetGateways.discover(&cx).await.unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].detail, gateway(&["vpc-1"]).detail);
        assert_calls(&describe, 1, "DescribeInternetGateways");
    }

    #[tokio::test]
    async fn detaches_from_each_vpc_then_deletes() {
        let detach = mock!(Client::detach_internet_gateway)
            .match_requests(|r| {
                r.internet_gateway_id() == Some("igw-1") && r.vpc_id() == Some("vpc-1")
            })
            .then_output(|| DetachInternetGatewayOutput::builder().build());
        // Already detached (by an earlier pass): not an error.
        let not_attached = mock!(Client::detach_internet_gateway)
            .match_requests(|r| r.vpc_id() == Some("vpc-2"))
            .then_error(|| DetachInternetGatewayError::generic(code("Gateway.NotAttached")));
        let delete = mock!(Client::delete_internet_gateway)
            .match_requests(|r| r.internet_gateway_id() == Some("igw-1"))
            .then_output(|| DeleteInternetGatewayOutput::builder().build());
        let c = mocked::in_order(&[&detach, &not_attached, &delete]);
        let inv = Inventory::default();
        let out = InternetGateways
            .delete(&ctx(&c, &inv), &gateway(&["vpc-1", "vpc-2"]))
            .await
            .unwrap();
        assert_eq!(out, Outcome::Deleted);
        assert_calls(&delete, 1, "DeleteInternetGateway");
    }

    #[tokio::test]
    async fn a_detach_still_refused_leaves_it_remaining_without_a_delete() {
        // DependencyViolation is transient: the call's own retry asks four times in all.
        let detach = mock!(Client::detach_internet_gateway)
            .sequence()
            .error(|| DetachInternetGatewayError::generic(code("DependencyViolation")))
            .times(4)
            .build();
        let c = mocked::in_order(&[&detach]);
        let inv = Inventory::default();
        let out = InternetGateways
            .delete(&ctx(&c, &inv), &gateway(&["vpc-1"]))
            .await
            .unwrap();
        assert!(matches!(out, Outcome::Remaining(r)
            if r.kind == crate::model::FailureKind::Dependency
                && r.message.contains("DependencyViolation")));
        assert_calls(&detach, 4, "DetachInternetGateway");
    }
}
