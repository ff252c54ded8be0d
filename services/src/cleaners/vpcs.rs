//! Phase 3's gate and last step: the VPC is ours only when it carries the CAPA-owned tag. A
//! bring-your-own VPC (untagged, or tagged for another owner) is never discovered, so nothing in
//! it is touched by phase 3. Before phase 3 touches a VPC, [`blockers`] lists what in it is not
//! ours and would keep it from being deleted (`policy::network::blocks_vpc` decides, resource by
//! resource): phase 3 then waits, deleting none of it.

use super::instances;
use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::describe;
use crate::locate::tags;
use crate::model::{AwsClients, Phase, ResourceRef};
use crate::policy::Candidate;
use crate::policy::guardduty;
use crate::policy::network::{InVpc, blocks_vpc};
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

fn blocker(service: &str, kind: &str, id: &str, vpc: &str) -> (ResourceRef, String) {
    let r = ResourceRef {
        service: service.into(),
        kind: kind.into(),
        id: id.into(),
    };
    (r, vpc.to_string())
}

/// What in `vpcs` the cluster does not own (no CAPA tag, and left by phases 1 and 2) and that
/// keeps a VPC from being deleted, with the VPC it blocks: load balancers of both APIs, live
/// instances, NAT gateways, detached network interfaces (attached ones go with their instance or
/// load balancer), security groups other than the default one, VPC endpoints, and subnets. Phase 1 has removed
/// CAPA's instances, API-server load balancer and security groups, and phase 2 the cluster's
/// external resources (unless opted out or not selected), so whatever is found here is someone
/// else's: an opted-out cluster's load balancers, a workload's instance.
pub async fn blockers(
    c: &AwsClients,
    cluster: &str,
    vpcs: &[String],
) -> Result<Vec<(ResourceRef, String)>, CleanError> {
    let capa = tags::capa_key(cluster);
    let in_vpcs = || tags::ec2_filter("vpc-id", vpcs);
    let mut out = Vec::new();
    for (lb, vpc) in describe::load_balancers_in(c, vpcs).await? {
        if blocks_vpc(&InVpc::LoadBalancer) {
            out.push(blocker("elasticloadbalancing", "load-balancer", &lb, &vpc));
        }
    }
    for i in instances::live_instances(c, vec![in_vpcs()]).await? {
        if let Some(vpc) = &i.vpc
            && blocks_vpc(&InVpc::Instance)
        {
            out.push(blocker("ec2", "instance", &i.id, vpc));
        }
    }
    // NAT gateways: another owner's is a blocker; every one's interface is the gateway's, not
    // a leftover (LocalStack reports it `available`).
    let nats = call("ec2.DescribeNatGateways", || {
        c.ec2.describe_nat_gateways().filter(in_vpcs()).send()
    })
    .await
    .map_err(CleanError::discover("nat-gateway", "DescribeNatGateways"))?;
    let mut nat_enis = std::collections::HashSet::new();
    for n in nats.nat_gateways() {
        nat_enis.extend(
            n.nat_gateway_addresses()
                .iter()
                .filter_map(|a| a.network_interface_id()),
        );
        let found = InVpc::NatGateway {
            state: n.state().map(|s| s.as_str()),
            capa_owned: tags::is_owned(tags::ec2_pairs(n.tags()), &capa),
        };
        if blocks_vpc(&found)
            && let (Some(id), Some(vpc)) = (n.nat_gateway_id(), n.vpc_id())
        {
            out.push(blocker("ec2", "nat-gateway", id, vpc));
        }
    }
    let enis = describe::detached_network_interfaces(c, vec![in_vpcs()]).await?;
    // Judged once the endpoints are known: an interface endpoint's interfaces go with it (AWS
    // reports them in use, LocalStack `available`).
    let mut detached = Vec::new();
    for n in &enis {
        if let (Some(id), Some(vpc)) = (n.network_interface_id(), n.vpc_id()) {
            detached.push((id, vpc));
        }
    }
    let region = super::guardduty::region(c);
    for g in describe::security_groups(c, vec![in_vpcs()]).await? {
        let found = if guardduty::group(g.group_name(), g.vpc_id(), vpcs).is_delete() {
            InVpc::GuardDuty
        } else {
            InVpc::SecurityGroup {
                name: g.group_name(),
                capa_owned: tags::is_owned(tags::ec2_pairs(g.tags()), &capa),
            }
        };
        if !blocks_vpc(&found) {
            continue;
        }
        if let (Some(id), Some(vpc)) = (g.group_id(), g.vpc_id()) {
            out.push(blocker("ec2", "security-group", id, vpc));
        }
    }
    // VPC endpoints: CAPA's go in this phase (vpc_endpoints.rs); another's keeps the VPC.
    let endpoints = call("ec2.DescribeVpcEndpoints", || {
        c.ec2.describe_vpc_endpoints().filters(in_vpcs()).send()
    })
    .await
    .map_err(CleanError::discover("vpc-endpoint", "DescribeVpcEndpoints"))?;
    for e in endpoints.vpc_endpoints() {
        let pairs: Vec<_> = tags::ec2_pairs(e.tags()).collect();
        let gd = Candidate {
            tags: &pairs,
            vpc: e.vpc_id(),
        };
        let found = if guardduty::endpoint(&gd, e.service_name(), &region, vpcs).is_delete() {
            InVpc::GuardDuty
        } else {
            InVpc::VpcEndpoint {
                state: e.state().map(|s| s.as_str()),
                capa_owned: tags::is_owned(pairs.iter().copied(), &capa),
            }
        };
        if !blocks_vpc(&found) {
            continue;
        }
        if let (Some(id), Some(vpc)) = (e.vpc_endpoint_id(), e.vpc_id()) {
            out.push(blocker("ec2", "vpc-endpoint", id, vpc));
        }
    }
    let endpoint_enis: std::collections::HashSet<&str> = endpoints
        .vpc_endpoints()
        .iter()
        .flat_map(|e| e.network_interface_ids().iter().map(String::as_str))
        .collect();
    for (id, vpc) in detached {
        if blocks_vpc(&InVpc::DetachedInterface {
            nat_gateways: nat_enis.contains(id) || endpoint_enis.contains(id),
        }) {
            out.push(blocker("ec2", "network-interface", id, vpc));
        }
    }
    let subnets = call("ec2.DescribeSubnets", || {
        c.ec2.describe_subnets().filters(in_vpcs()).send()
    })
    .await
    .map_err(CleanError::discover("subnet", "DescribeSubnets"))?;
    for s in subnets.subnets() {
        let found = InVpc::Subnet {
            capa_owned: tags::is_owned(tags::ec2_pairs(s.tags()), &capa),
        };
        if !blocks_vpc(&found) {
            continue;
        }
        if let (Some(id), Some(vpc)) = (s.subnet_id(), s.vpc_id()) {
            out.push(blocker("ec2", "subnet", id, vpc));
        }
    }
    Ok(out)
}

/// Last of phase 3 (order 70). Its targets are the pass's CAPA-managed VPCs (`capa_vpcs`, asked
/// for by the pass, see `phases::PASS_IAM_ACTIONS`), so it calls only the delete.
pub const DESCRIPTOR: Descriptor = Descriptor {
    iam_actions: &["ec2:DeleteVpc"],
    ..Descriptor::new("ec2", KIND, Phase::Network, 70)
};

#[async_trait]
impl Cleaner for Vpcs {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
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

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, assert_calls, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::delete_vpc::DeleteVpcOutput;
    use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
    use aws_sdk_ec2::operation::describe_nat_gateways::DescribeNatGatewaysOutput;
    use aws_sdk_ec2::operation::describe_network_interfaces::DescribeNetworkInterfacesOutput;
    use aws_sdk_ec2::operation::describe_security_groups::DescribeSecurityGroupsOutput;
    use aws_sdk_ec2::operation::describe_subnets::DescribeSubnetsOutput;
    use aws_sdk_ec2::operation::describe_vpc_endpoints::DescribeVpcEndpointsOutput;
    use aws_sdk_ec2::operation::describe_vpcs::DescribeVpcsOutput;
    use aws_sdk_ec2::types::{
        Instance, InstanceState, InstanceStateName, NatGateway, NatGatewayAddress, NatGatewayState,
        NetworkInterface, Reservation, SecurityGroup, State, Subnet, Vpc, VpcEndpoint,
    };
    use aws_sdk_elasticloadbalancing::operation::describe_load_balancers::DescribeLoadBalancersOutput as ClassicOut;
    use aws_sdk_elasticloadbalancing::types::LoadBalancerDescription;
    use aws_sdk_elasticloadbalancingv2::operation::describe_load_balancers::DescribeLoadBalancersOutput as V2Out;
    use aws_sdk_elasticloadbalancingv2::types::LoadBalancer;

    #[tokio::test]
    async fn a_vpc_is_the_clusters_only_by_capas_owned_tag() {
        let describe = mock!(Client::describe_vpcs)
            .match_requests(|r| {
                filter_is(r.filters(), &format!("tag:{CAPA_KEY}"), &["owned"])
                    && r.filters().len() == 1
            })
            .then_output(|| {
                DescribeVpcsOutput::builder()
                    .vpcs(Vpc::builder().vpc_id("vpc-1").build())
                    .build()
            });
        let c = mocked::in_order(&[&describe]);
        assert_eq!(capa_vpcs(&c, "c1").await.unwrap(), ["vpc-1"]);
    }

    #[tokio::test]
    async fn what_is_not_capas_in_the_vpc_blocks_it_and_capas_own_does_not() {
        let in_vpc = |f: &[aws_sdk_ec2::types::Filter]| filter_is(f, "vpc-id", &["vpc-1"]);
        let owned = || tag(CAPA_KEY, "owned");
        let v2 = mock!(aws_sdk_elasticloadbalancingv2::Client::describe_load_balancers)
            .then_output(|| {
                V2Out::builder()
                    .load_balancers(
                        LoadBalancer::builder()
                            .load_balancer_arn("arn:lb/app/theirs/1")
                            .vpc_id("vpc-1")
                            .build(),
                    )
                    .load_balancers(
                        LoadBalancer::builder()
                            .load_balancer_arn("arn:lb/app/elsewhere/2")
                            .vpc_id("vpc-9")
                            .build(),
                    )
                    .build()
            });
        let classic = mock!(aws_sdk_elasticloadbalancing::Client::describe_load_balancers)
            .then_output(|| {
                ClassicOut::builder()
                    .load_balancer_descriptions(
                        LoadBalancerDescription::builder()
                            .load_balancer_name("elsewhere")
                            .vpc_id("vpc-9")
                            .build(),
                    )
                    .build()
            });
        let instances = mock!(Client::describe_instances)
            .match_requests(move |r| in_vpc(r.filters()))
            .then_output(|| {
                DescribeInstancesOutput::builder()
                    .reservations(
                        Reservation::builder()
                            .instances(
                                Instance::builder()
                                    .instance_id("i-workload")
                                    .vpc_id("vpc-1")
                                    .state(
                                        InstanceState::builder()
                                            .name(InstanceStateName::Running)
                                            .build(),
                                    )
                                    .build(),
                            )
                            .build(),
                    )
                    .build()
            });
        let nats = mock!(Client::describe_nat_gateways)
            .match_requests(move |r| in_vpc(r.filter()) && r.filter().len() == 1)
            .then_output(move || {
                let nat = |id: &str, eni: &str, capa: bool, state: &str| {
                    let b = NatGateway::builder()
                        .nat_gateway_id(id)
                        .vpc_id("vpc-1")
                        .state(NatGatewayState::from(state))
                        .nat_gateway_addresses(
                            NatGatewayAddress::builder()
                                .network_interface_id(eni)
                                .build(),
                        );
                    (if capa { b.tags(owned()) } else { b }).build()
                };
                DescribeNatGatewaysOutput::builder()
                    .nat_gateways(nat("nat-capa", "eni-nat-capa", true, "available"))
                    .nat_gateways(nat("nat-theirs", "eni-nat-theirs", false, "available"))
                    .nat_gateways(nat("nat-old", "eni-nat-old", false, "deleted"))
                    .build()
            });
        let enis = mock!(Client::describe_network_interfaces)
            .match_requests(move |r| {
                in_vpc(r.filters()) && filter_is(r.filters(), "status", &["available"])
            })
            .then_output(|| {
                let eni = |id: &str| {
                    NetworkInterface::builder()
                        .network_interface_id(id)
                        .vpc_id("vpc-1")
                        .build()
                };
                DescribeNetworkInterfacesOutput::builder()
                    .network_interfaces(eni("eni-nat-capa"))
                    // An interface endpoint's: goes with it.
                    .network_interfaces(eni("eni-vpce"))
                    .network_interfaces(eni("eni-left"))
                    .build()
            });
        let groups = mock!(Client::describe_security_groups)
            .match_requests(move |r| in_vpc(r.filters()))
            .then_output(move || {
                let sg = |id: &str, name: &str, capa: bool| {
                    let b = SecurityGroup::builder()
                        .group_id(id)
                        .group_name(name)
                        .vpc_id("vpc-1");
                    (if capa { b.tags(owned()) } else { b }).build()
                };
                DescribeSecurityGroupsOutput::builder()
                    .security_groups(sg("sg-default", "default", false))
                    .security_groups(sg("sg-capa", "c1-node", true))
                    .security_groups(sg("sg-theirs", "app", false))
                    .build()
            });
        let endpoints = mock!(Client::describe_vpc_endpoints)
            .match_requests(move |r| in_vpc(r.filters()) && r.filters().len() == 1)
            .then_output(move || {
                let e = |id: &str, capa: bool, state: &str| {
                    let b = VpcEndpoint::builder()
                        .vpc_endpoint_id(id)
                        .vpc_id("vpc-1")
                        .state(State::from(state));
                    (if capa { b.tags(owned()) } else { b }).build()
                };
                DescribeVpcEndpointsOutput::builder()
                    .vpc_endpoints(
                        VpcEndpoint::builder()
                            .vpc_endpoint_id("vpce-capa-interface")
                            .vpc_id("vpc-1")
                            .state(State::from("available"))
                            .network_interface_ids("eni-vpce")
                            .tags(owned())
                            .build(),
                    )
                    .vpc_endpoints(e("vpce-capa", true, "available"))
                    .vpc_endpoints(e("vpce-theirs", false, "available"))
                    .vpc_endpoints(e("vpce-gone", false, "deleted"))
                    .build()
            });
        let subnets = mock!(Client::describe_subnets)
            .match_requests(move |r| in_vpc(r.filters()) && r.filters().len() == 1)
            .then_output(move || {
                let s = |id: &str, capa: bool| {
                    let b = Subnet::builder().subnet_id(id).vpc_id("vpc-1");
                    (if capa { b.tags(owned()) } else { b }).build()
                };
                DescribeSubnetsOutput::builder()
                    .subnets(s("subnet-capa", true))
                    .subnets(s("subnet-theirs", false))
                    .build()
            });
        let c = mocked::in_order(&[
            &v2, &classic, &instances, &nats, &enis, &groups, &endpoints, &subnets,
        ]);
        let found = blockers(&c, "c1", &["vpc-1".to_string()]).await.unwrap();
        let ids: Vec<(&str, &str)> = found
            .iter()
            .map(|(r, vpc)| (r.id.as_str(), vpc.as_str()))
            .collect();
        assert_eq!(
            ids,
            [
                ("arn:lb/app/theirs/1", "vpc-1"),
                ("i-workload", "vpc-1"),
                ("nat-theirs", "vpc-1"),
                ("sg-theirs", "vpc-1"),
                ("vpce-theirs", "vpc-1"),
                ("eni-left", "vpc-1"),
                ("subnet-theirs", "vpc-1"),
            ]
        );
    }

    #[tokio::test]
    async fn the_vpcs_are_the_contexts_and_each_is_deleted_by_id() {
        let delete = mock!(Client::delete_vpc)
            .match_requests(|r| r.vpc_id() == Some("vpc-1"))
            .then_output(|| DeleteVpcOutput::builder().build());
        let c = mocked::in_order(&[&delete]);
        let inv = Inventory::default();
        let vpcs = ["vpc-1".to_string()];
        let cx = CleanCtx {
            vpc_ids: &vpcs,
            ..ctx(&c, &inv)
        };
        let found = Vpcs.discover(&cx).await.unwrap();
        assert_eq!(found, [Target::plain("vpc-1")]);
        assert_eq!(Vpcs.delete(&cx, &found[0]).await.unwrap(), Outcome::Deleted);
        assert_calls(&delete, 1, "DeleteVpc");
    }
}
