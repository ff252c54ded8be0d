//! Phase 3: NAT gateways of the CAPA-managed VPC carrying CAPA's ownership tag. Deletion is
//! asynchronous: a pass requests it; which state waits and which is no longer a target is
//! `policy::network::nat_gateway`'s.

use super::vpc_owned::InVpcs;
use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, requested, settle};
use crate::errors::call;
use crate::locate::tags;
use crate::model::Phase;
use crate::policy::network as policy;
use async_trait::async_trait;

pub struct NatGateways;

const KIND: &str = "natgateway";

/// First of the network (order 10), with the endpoints. Its delete is only requested, finished
/// later: it gates the Elastic IPs and subnets.
pub const DESCRIPTOR: Descriptor = Descriptor {
    gates_later: true,
    iam_actions: &["ec2:DescribeNatGateways", "ec2:DeleteNatGateway"],
    ..Descriptor::new("ec2", KIND, Phase::Network, 10)
};

#[async_trait]
impl Cleaner for NatGateways {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        let Some(at) = InVpcs::of(ctx) else {
            return Ok(Vec::new());
        };
        // The VPCs' gateways as the pass listed them (the blocker check did), CAPA's taken here.
        let nats = ctx.view.nat_gateways(ctx.clients, at.vpcs).await?;
        Ok(nats
            .iter()
            .filter(|n| at.is_capas(n.tags()))
            .filter_map(|n| {
                let t = Target::plain(n.nat_gateway_id()?).with_tags(tags::ec2_pairs(n.tags()));
                t.judged(policy::nat_gateway(n.state().map(|s| s.as_str())))
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let ec2 = &ctx.clients.ec2;
        let res = call("ec2.DeleteNatGateway", || {
            ec2.delete_nat_gateway().nat_gateway_id(&t.id).send()
        })
        .await;
        // Accepted, not finished: the EIP and subnets wait for the next pass to see `deleted`.
        Ok(requested(settle(res, KIND, &t.id, "DeleteNatGateway")?))
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::cleaners::{CleanCtx, Cleaner};
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, assert_calls, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::delete_nat_gateway::DeleteNatGatewayOutput;
    use aws_sdk_ec2::operation::describe_nat_gateways::DescribeNatGatewaysOutput;
    use aws_sdk_ec2::types::{NatGateway, NatGatewayState};

    fn nat(id: &str, state: &str) -> NatGateway {
        NatGateway::builder()
            .nat_gateway_id(id)
            .vpc_id("vpc-1")
            .state(NatGatewayState::from(state))
            .tags(tag(CAPA_KEY, "owned"))
            .build()
    }

    #[tokio::test]
    async fn without_a_capa_managed_vpc_nothing_is_asked() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        assert!(
            NatGateways
                .discover(&ctx(&c, &inv))
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn deleted_gateways_are_skipped_deleting_ones_waited_for_and_a_delete_only_requested() {
        // The VPC's gateways, every owner's (the pass's one listing, `locate::view`): only
        // CAPA's are targets.
        let describe = mock!(Client::describe_nat_gateways)
            .match_requests(|r| {
                filter_is(r.filter(), "vpc-id", &["vpc-1"]) && r.filter().len() == 1
            })
            .then_output(|| {
                let theirs = NatGateway::builder()
                    .nat_gateway_id("nat-theirs")
                    .vpc_id("vpc-1")
                    .state(NatGatewayState::Available)
                    .tags(tag(CAPA_KEY, "shared"))
                    .build();
                DescribeNatGatewaysOutput::builder()
                    .nat_gateways(nat("nat-live", "available"))
                    .nat_gateways(nat("nat-deleting", "deleting"))
                    .nat_gateways(nat("nat-deleted", "deleted"))
                    .nat_gateways(theirs)
                    .build()
            });
        let delete = mock!(Client::delete_nat_gateway)
            .match_requests(|r| r.nat_gateway_id() == Some("nat-live"))
            .then_output(|| DeleteNatGatewayOutput::builder().build());
        let c = mocked::in_order(&[&describe, &delete]);
        let inv = Inventory::default();
        let vpcs = ["vpc-1".to_string()];
        let cx = CleanCtx {
            vpc_ids: &vpcs,
            ..ctx(&c, &inv)
        };
        let found = NatGateways.discover(&cx).await.unwrap();
        let seen: Vec<(&str, bool)> = found
            .iter()
            .map(|t| (t.id.as_str(), t.blocked.is_some()))
            .collect();
        assert_eq!(seen, [("nat-live", false), ("nat-deleting", true)]);
        // Accepted is not finished: the EIPs and subnets wait for `deleted`.
        let out = NatGateways.delete(&cx, &found[0]).await.unwrap();
        assert!(matches!(out, Outcome::Requested(_)), "{out:?}");
        assert_calls(&delete, 1, "DeleteNatGateway");
    }
}
