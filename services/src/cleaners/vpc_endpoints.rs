//! Phase 3: VPC endpoints CAPA created in the cluster's CAPA-managed VPC (CAPA's ownership tag),
//! before the route tables, subnets and VPC they hold (CAPA#4426: an endpoint left behind keeps
//! the VPC from being deleted). Any other endpoint in the VPC is someone else's: it is named as a
//! blocker of the VPC (`vpcs::blockers`) and never deleted. Deletion is asynchronous, as for NAT
//! gateways: a pass requests it; which state waits and which is no longer a target is
//! `policy::network::vpc_endpoint`'s.

use super::vpc_owned::InVpcs;
use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, requested, settle};
use crate::errors::{ApiFailure, call, classify};
use crate::locate::tags;
use crate::model::Phase;
use crate::policy::network as policy;
use async_trait::async_trait;

pub struct VpcEndpoints;

const KIND: &str = "vpc-endpoint";

/// With the NAT gateways (order 10): nothing of the network depends on an endpoint, and an
/// endpoint holds route tables (gateway endpoints) and subnets (interface endpoints' ENIs). Its
/// delete is only requested, finished later: it gates the later kinds.
pub const DESCRIPTOR: Descriptor = Descriptor {
    gates_later: true,
    iam_actions: &["ec2:DescribeVpcEndpoints", "ec2:DeleteVpcEndpoints"],
    ..Descriptor::new("ec2", KIND, Phase::Network, 10)
};

#[async_trait]
impl Cleaner for VpcEndpoints {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        let Some(at) = InVpcs::of(ctx) else {
            return Ok(Vec::new());
        };
        // The VPCs' endpoints as the pass listed them (the blocker check did), CAPA's taken here.
        let endpoints = ctx.view.vpc_endpoints(ctx.clients, at.vpcs).await?;
        Ok(endpoints
            .iter()
            .filter(|e| at.is_capas(e.tags()))
            .filter_map(|e| {
                let t = Target::plain(e.vpc_endpoint_id()?).with_tags(tags::ec2_pairs(e.tags()));
                t.judged(policy::vpc_endpoint(e.state().map(|s| s.as_str())))
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let ec2 = &ctx.clients.ec2;
        let res = call("ec2.DeleteVpcEndpoints", || {
            ec2.delete_vpc_endpoints().vpc_endpoint_ids(&t.id).send()
        })
        .await;
        // A batch API: the call succeeds and names the endpoints it could not delete.
        let res = res.and_then(|out| {
            match out
                .unsuccessful()
                .iter()
                .find(|u| u.resource_id() == Some(t.id.as_str()))
                .and_then(|u| u.error())
            {
                None => Ok(()),
                Some(e) => Err(ApiFailure {
                    class: classify(e.code(), None),
                    code: e.code().map(str::to_string),
                    message: e.message().unwrap_or_default().to_string(),
                    kind: crate::errors::kind_of(e.code(), None),
                }),
            }
        });
        // Accepted, not finished: the route tables and subnets wait until it is deleted.
        Ok(requested(settle(res, KIND, &t.id, "DeleteVpcEndpoints")?))
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
    use aws_sdk_ec2::operation::delete_vpc_endpoints::DeleteVpcEndpointsOutput;
    use aws_sdk_ec2::operation::describe_vpc_endpoints::DescribeVpcEndpointsOutput;
    use aws_sdk_ec2::types::{State, UnsuccessfulItem, UnsuccessfulItemError, VpcEndpoint};

    fn endpoint(id: &str, state: &str) -> VpcEndpoint {
        VpcEndpoint::builder()
            .vpc_endpoint_id(id)
            .vpc_id("vpc-1")
            .state(State::from(state))
            .tags(tag(CAPA_KEY, "owned"))
            .build()
    }

    #[tokio::test]
    async fn without_a_capa_managed_vpc_nothing_is_asked() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        assert!(
            VpcEndpoints
                .discover(&ctx(&c, &inv))
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn capa_owned_live_endpoints_of_the_vpc_are_requested_deleted() {
        // The VPC's endpoints, every owner's (the pass's one listing, `locate::view`): only
        // CAPA's are targets.
        let describe = mock!(Client::describe_vpc_endpoints)
            .match_requests(|r| {
                filter_is(r.filters(), "vpc-id", &["vpc-1"]) && r.filters().len() == 1
            })
            .then_output(|| {
                let theirs = VpcEndpoint::builder()
                    .vpc_endpoint_id("vpce-theirs")
                    .vpc_id("vpc-1")
                    .state(State::from("available"))
                    .tags(tag(
                        "sigs.k8s.io/cluster-api-provider-aws/cluster/c1-b",
                        "owned",
                    ))
                    .build();
                DescribeVpcEndpointsOutput::builder()
                    .vpc_endpoints(endpoint("vpce-live", "available"))
                    .vpc_endpoints(endpoint("vpce-deleting", "deleting"))
                    .vpc_endpoints(endpoint("vpce-gone", "deleted"))
                    .vpc_endpoints(theirs)
                    .build()
            });
        let delete = mock!(Client::delete_vpc_endpoints)
            .match_requests(|r| r.vpc_endpoint_ids() == ["vpce-live"])
            .then_output(|| DeleteVpcEndpointsOutput::builder().build());
        let c = mocked::in_order(&[&describe, &delete]);
        let inv = Inventory::default();
        let vpcs = ["vpc-1".to_string()];
        let cx = CleanCtx {
            vpc_ids: &vpcs,
            ..ctx(&c, &inv)
        };
        let found = VpcEndpoints.discover(&cx).await.unwrap();
        let seen: Vec<(&str, bool)> = found
            .iter()
            .map(|t| (t.id.as_str(), t.blocked.is_some()))
            .collect();
        assert_eq!(seen, [("vpce-live", false), ("vpce-deleting", true)]);
        let out = VpcEndpoints.delete(&cx, &found[0]).await.unwrap();
        assert!(
            matches!(out, Outcome::Requested(_)),
            "requested, not finished: {out:?}"
        );
        assert_calls(&delete, 1, "DeleteVpcEndpoints");
    }

    #[tokio::test]
    async fn an_endpoint_the_batch_reports_unsuccessful_is_a_named_error() {
        let delete = mock!(Client::delete_vpc_endpoints).then_output(|| {
            DeleteVpcEndpointsOutput::builder()
                .unsuccessful(
                    UnsuccessfulItem::builder()
                        .resource_id("vpce-1")
                        .error(
                            UnsuccessfulItemError::builder()
                                .code("UnauthorizedOperation")
                                .message("no")
                                .build(),
                        )
                        .build(),
                )
                .build()
        });
        let c = mocked::in_order(&[&delete]);
        let inv = Inventory::default();
        let err = VpcEndpoints
            .delete(&ctx(&c, &inv), &Target::plain("vpce-1"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("vpc-endpoint vpce-1"), "{err}");
    }
}
