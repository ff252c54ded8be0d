//! Phase 3: the subnets of the CAPA-managed VPC that carry CAPA's ownership tag.

use super::vpc_owned::InVpcs;
use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::tags;
use crate::model::Phase;
use async_trait::async_trait;

pub struct Subnets;

const KIND: &str = "subnet";

pub const DESCRIPTOR: Descriptor = Descriptor {
    iam_actions: &["ec2:DescribeSubnets", "ec2:DeleteSubnet"],
    ..Descriptor::new("ec2", KIND, Phase::Network, 50)
};

#[async_trait]
impl Cleaner for Subnets {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        let Some(at) = InVpcs::of(ctx) else {
            return Ok(Vec::new());
        };
        // The VPCs' subnets as the pass listed them (the blocker check did), CAPA's taken here.
        let subnets = ctx.view.subnets(ctx.clients, at.vpcs).await?;
        Ok(subnets
            .iter()
            .filter(|s| at.is_capas(s.tags()))
            .filter_map(|s| {
                Some(Target::plain(s.subnet_id()?).with_tags(tags::ec2_pairs(s.tags())))
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let ec2 = &ctx.clients.ec2;
        let res = call("ec2.DeleteSubnet", || {
            ec2.delete_subnet().subnet_id(&t.id).send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteSubnet")
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
    use aws_sdk_ec2::operation::delete_subnet::{DeleteSubnetError, DeleteSubnetOutput};
    use aws_sdk_ec2::operation::describe_subnets::DescribeSubnetsOutput;
    use aws_sdk_ec2::types::Subnet;

    #[tokio::test]
    async fn without_a_capa_managed_vpc_nothing_is_asked() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        assert!(Subnets.discover(&ctx(&c, &inv)).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn asks_for_capa_owned_subnets_of_the_vpc_only_and_deletes_each() {
        // The VPC's subnets, every owner's (the pass's one listing, `locate::view`): only CAPA's
        // are targets; an untagged one and a `shared` one are not.
        let describe = mock!(Client::describe_subnets)
            .match_requests(|r| {
                filter_is(r.filters(), "vpc-id", &["vpc-1"]) && r.filters().len() == 1
            })
            .then_output(|| {
                let subnet = |id: &str| Subnet::builder().subnet_id(id).vpc_id("vpc-1");
                DescribeSubnetsOutput::builder()
                    .subnets(subnet("subnet-a").tags(tag(CAPA_KEY, "owned")).build())
                    .subnets(subnet("subnet-untagged").build())
                    .subnets(
                        subnet("subnet-shared")
                            .tags(tag(CAPA_KEY, "shared"))
                            .build(),
                    )
                    .build()
            });
        let delete = mock!(Client::delete_subnet)
            .match_requests(|r| r.subnet_id() == Some("subnet-a"))
            .then_output(|| DeleteSubnetOutput::builder().build());
        let c = mocked::in_order(&[&describe, &delete]);
        let inv = Inventory::default();
        let vpcs = ["vpc-1".to_string()];
        let cx = CleanCtx {
            vpc_ids: &vpcs,
            ..ctx(&c, &inv)
        };
        let targets = Subnets.discover(&cx).await.unwrap();
        assert_eq!(
            targets.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["subnet-a"]
        );
        assert_eq!(
            Subnets.delete(&cx, &targets[0]).await.unwrap(),
            Outcome::Deleted
        );
        assert_calls(&describe, 1, "DescribeSubnets");
        assert_calls(&delete, 1, "DeleteSubnet");
    }

    #[tokio::test]
    async fn a_subnet_already_gone_is_done_and_a_refusal_names_it() {
        let gone = mock!(Client::delete_subnet)
            .then_error(|| DeleteSubnetError::generic(code("InvalidSubnetID.NotFound")));
        let denied = mock!(Client::delete_subnet)
            .then_error(|| DeleteSubnetError::generic(code("UnauthorizedOperation")));
        let c = mocked::in_order(&[&gone, &denied]);
        let inv = Inventory::default();
        let t = Target::plain("subnet-a");
        assert_eq!(
            Subnets.delete(&ctx(&c, &inv), &t).await.unwrap(),
            Outcome::Gone
        );
        let err = Subnets.delete(&ctx(&c, &inv), &t).await.unwrap_err();
        assert!(err.to_string().contains("subnet subnet-a"), "{err}");
    }
}
