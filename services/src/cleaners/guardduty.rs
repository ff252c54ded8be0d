//! Phase 3 (issue #44): GuardDuty Runtime Monitoring's managed VPC endpoint
//! (`com.amazonaws.<region>.guardduty-data`, tagged `GuardDutyManaged=true`) and its security
//! group (`GuardDutyManagedSecurityGroup-<vpc-id>`), deleted **only in the cluster's
//! CAPA-managed VPC** (`policy::guardduty` decides; in any other VPC they are never asked for).
//! The endpoint goes late in phase 3 but before the subnets its interfaces live in (order 45,
//! waited for until deleted); the group once the endpoint is gone (order 60), before the VPC.
//! GuardDuty may put the endpoint back while the VPC still runs workloads; by phase 3 none runs.

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, requested, settle};
use crate::errors::{ApiFailure, call, classify};
use crate::locate::{tags, view};
use crate::model::{AwsClients, Phase};
use crate::policy::{Candidate, guardduty, network};
use async_trait::async_trait;

/// The region the session's EC2 client acts in (the endpoint's service name carries it).
pub fn region(c: &AwsClients) -> String {
    c.ec2
        .config()
        .region()
        .map(|r| r.to_string())
        .unwrap_or_default()
}

/// GuardDuty's managed endpoint.
pub struct GuardDutyEndpoint;
/// GuardDuty's managed security group.
pub struct GuardDutyGroup;

/// One file, two kinds: both declare what the file calls.
const IAM_ACTIONS: &[&str] = &[
    "ec2:DescribeVpcEndpoints",
    "ec2:DeleteVpcEndpoints",
    "ec2:DescribeSecurityGroups",
    "ec2:DeleteSecurityGroup",
];

pub const ENDPOINT: Descriptor = Descriptor {
    gates_later: true,
    iam_actions: IAM_ACTIONS,
    ..Descriptor::new("ec2", "vpc-endpoint", Phase::Network, 45)
};

pub const GROUP: Descriptor = Descriptor {
    iam_actions: IAM_ACTIONS,
    ..Descriptor::new("ec2", "security-group", Phase::Network, 60)
};

#[async_trait]
impl Cleaner for GuardDutyEndpoint {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &ENDPOINT
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        if ctx.vpc_ids.is_empty() {
            return Ok(Vec::new());
        }
        let region = region(ctx.clients);
        let service = guardduty::service_name(&region);
        let (key, value) = guardduty::MANAGED_TAG;
        // The VPCs' endpoints as the pass listed them (the blocker check did), GuardDuty's taken
        // here as the server's filters would: its service name, its managed tag.
        let endpoints = ctx.view.vpc_endpoints(ctx.clients, ctx.vpc_ids).await?;
        Ok(endpoints
            .iter()
            .filter(|e| {
                e.service_name() == Some(service.as_str()) && view::tagged(e.tags(), key, value)
            })
            .filter_map(|e| {
                let pairs: Vec<_> = tags::ec2_pairs(e.tags()).collect();
                let c = Candidate {
                    tags: &pairs,
                    vpc: e.vpc_id(),
                };
                if !guardduty::endpoint(&c, e.service_name(), &region, ctx.vpc_ids).is_delete() {
                    return None;
                }
                let t = Target::plain(e.vpc_endpoint_id()?).with_tags(pairs.iter().copied());
                t.judged(network::vpc_endpoint(e.state().map(|s| s.as_str())))
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.DeleteVpcEndpoints", || {
            ctx.clients
                .ec2
                .delete_vpc_endpoints()
                .vpc_endpoint_ids(&t.id)
                .send()
        })
        .await
        .and_then(
            |out| match out.unsuccessful().iter().find_map(|u| u.error()) {
                None => Ok(()),
                Some(e) => Err(ApiFailure {
                    class: classify(e.code(), None),
                    code: e.code().map(str::to_string),
                    message: e.message().unwrap_or_default().to_string(),
                    kind: crate::errors::kind_of(e.code(), None),
                }),
            },
        );
        // Accepted, not finished: the subnets and the group wait until it is deleted.
        Ok(requested(settle(
            res,
            ENDPOINT.kind,
            &t.id,
            "DeleteVpcEndpoints",
        )?))
    }
}

#[async_trait]
impl Cleaner for GuardDutyGroup {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &GROUP
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        if ctx.vpc_ids.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<String> = ctx
            .vpc_ids
            .iter()
            .map(|v| guardduty::group_name(v))
            .collect();
        // The VPCs' groups as the pass listed them (the blocker check did), GuardDuty's taken
        // here by name as the server's `group-name` filter would.
        let groups = ctx.view.security_groups(ctx.clients, ctx.vpc_ids).await?;
        Ok(groups
            .iter()
            .filter(|g| g.group_name().is_some_and(|n| names.iter().any(|m| m == n)))
            .filter(|g| guardduty::group(g.group_name(), g.vpc_id(), ctx.vpc_ids).is_delete())
            .filter_map(|g| Some(Target::plain(g.group_id()?).with_tags(tags::ec2_pairs(g.tags()))))
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.DeleteSecurityGroup", || {
            ctx.clients
                .ec2
                .delete_security_group()
                .group_id(&t.id)
                .send()
        })
        .await;
        // A DependencyViolation (the endpoint's interfaces not yet gone) is transient: retried.
        settle(res, GROUP.kind, &t.id, "DeleteSecurityGroup")
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, assert_calls, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::delete_security_group::DeleteSecurityGroupOutput;
    use aws_sdk_ec2::operation::delete_vpc_endpoints::DeleteVpcEndpointsOutput;
    use aws_sdk_ec2::operation::describe_security_groups::DescribeSecurityGroupsOutput;
    use aws_sdk_ec2::operation::describe_vpc_endpoints::DescribeVpcEndpointsOutput;
    use aws_sdk_ec2::types::{SecurityGroup, State, VpcEndpoint};

    const SERVICE: &str = "com.amazonaws.us-east-1.guardduty-data";

    #[tokio::test]
    async fn without_a_capa_managed_vpc_nothing_is_asked() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        let byo = ["vpc-byo".to_string()];
        let cx = CleanCtx {
            byo_vpcs: &byo,
            cluster_vpcs: &byo,
            ..ctx(&c, &inv)
        };
        assert!(GuardDutyEndpoint.discover(&cx).await.unwrap().is_empty());
        assert!(GuardDutyGroup.discover(&cx).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn guarddutys_endpoint_and_group_of_the_capa_vpc_are_deleted_and_nothing_else() {
        // The VPC's endpoints and groups, every one (the pass's listings, `locate::view`):
        // GuardDuty's are taken by its service name, managed tag and group name here.
        let endpoints = mock!(Client::describe_vpc_endpoints)
            .match_requests(|r| {
                let f = r.filters();
                f.len() == 1 && filter_is(f, "vpc-id", &["vpc-1"])
            })
            .then_output(|| {
                let e = |id: &str, service: &str, managed: bool| {
                    let b = VpcEndpoint::builder()
                        .vpc_endpoint_id(id)
                        .vpc_id("vpc-1")
                        .service_name(service)
                        .state(State::Available);
                    (if managed {
                        b.tags(tag("GuardDutyManaged", "true"))
                    } else {
                        b
                    })
                    .build()
                };
                let other_value = VpcEndpoint::builder()
                    .vpc_endpoint_id("vpce-false")
                    .vpc_id("vpc-1")
                    .service_name(SERVICE)
                    .state(State::Available)
                    .tags(tag("GuardDutyManaged", "false"))
                    .build();
                DescribeVpcEndpointsOutput::builder()
                    .vpc_endpoints(e("vpce-gd", SERVICE, true))
                    // Not GuardDuty's managed endpoint: kept.
                    .vpc_endpoints(e("vpce-untagged", SERVICE, false))
                    .vpc_endpoints(e("vpce-s3", "com.amazonaws.us-east-1.s3", true))
                    .vpc_endpoints(other_value)
                    .build()
            });
        let delete_endpoint = mock!(Client::delete_vpc_endpoints)
            .match_requests(|r| r.vpc_endpoint_ids() == ["vpce-gd"])
            .then_output(|| DeleteVpcEndpointsOutput::builder().build());
        let groups = mock!(Client::describe_security_groups)
            .match_requests(|r| {
                let f = r.filters();
                f.len() == 1 && filter_is(f, "vpc-id", &["vpc-1"])
            })
            .then_output(|| {
                let g = |id: &str, name: &str| {
                    SecurityGroup::builder()
                        .group_id(id)
                        .group_name(name)
                        .vpc_id("vpc-1")
                        .build()
                };
                DescribeSecurityGroupsOutput::builder()
                    .security_groups(g("sg-gd", "GuardDutyManagedSecurityGroup-vpc-1"))
                    .security_groups(g("sg-other", "GuardDutyManagedSecurityGroup-vpc-2"))
                    .security_groups(g("sg-app", "app"))
                    .security_groups(g("sg-prefix", "GuardDutyManagedSecurityGroup-vpc-1x"))
                    .build()
            });
        let delete_group = mock!(Client::delete_security_group)
            .match_requests(|r| r.group_id() == Some("sg-gd"))
            .then_output(|| DeleteSecurityGroupOutput::builder().build());
        let c = mocked::in_order(&[&endpoints, &delete_endpoint, &groups, &delete_group]);
        let inv = Inventory::default();
        let vpcs = ["vpc-1".to_string()];
        let cx = CleanCtx {
            vpc_ids: &vpcs,
            ..ctx(&c, &inv)
        };
        let found = GuardDutyEndpoint.discover(&cx).await.unwrap();
        assert_eq!(
            found.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["vpce-gd"]
        );
        assert!(matches!(
            GuardDutyEndpoint.delete(&cx, &found[0]).await.unwrap(),
            Outcome::Requested(_)
        ));
        let found = GuardDutyGroup.discover(&cx).await.unwrap();
        assert_eq!(
            found.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["sg-gd"]
        );
        assert_eq!(
            GuardDutyGroup.delete(&cx, &found[0]).await.unwrap(),
            Outcome::Deleted
        );
        assert_calls(&delete_endpoint, 1, "DeleteVpcEndpoints vpce-gd");
        assert_calls(&delete_group, 1, "DeleteSecurityGroup sg-gd");
    }
}
