//! What keeps a CAPA-managed VPC from being deleted: what in it the cluster does not own (no CAPA
//! tag, and left by phases 1 and 2). Phase 3 asks before it touches a VPC, and waits while
//! anything is listed, deleting none of it. One step per kind, each asking AWS once and letting
//! `policy::network::blocks_vpc` decide resource by resource; the calls go in this order. The
//! VPC-wide lists (NAT gateways, endpoints, security groups, subnets, load balancers) are the
//! pass's (`locate::view`): the network's cleaners read the same answers after this check.

use super::instances;
use super::{CleanError, guardduty as guardduty_cleaner};
use crate::locate::describe;
use crate::locate::tags;
use crate::locate::view::PassView;
use crate::model::{AwsClients, ResourceRef};
use crate::policy::Candidate;
use crate::policy::guardduty;
use crate::policy::network::{InVpc, blocks_vpc};
use std::collections::HashSet;

/// A resource that blocks a VPC, with the VPC.
pub type Blocker = (ResourceRef, String);

fn blocker(service: &str, kind: &str, id: &str, vpc: &str) -> Blocker {
    let r = ResourceRef {
        service: service.into(),
        kind: kind.into(),
        id: id.into(),
    };
    (r, vpc.to_string())
}

/// What in `vpcs` the cluster does not own (no CAPA tag, and left by phases 1 and 2) and that
/// keeps a VPC from being deleted, with the VPC it blocks: load balancers of both APIs, live
/// instances, NAT gateways, security groups other than the default one, VPC endpoints,
/// detached network interfaces (attached ones go with their instance or load balancer), and
/// subnets. Phase 1 has removed CAPA's instances, API-server load balancer and security
/// groups, and phase 2 the cluster's tagged resources (unless opted out or not selected), so
/// whatever is found here is someone else's: an opted-out cluster's load balancers, a
/// workload's instance.
pub async fn blockers(
    c: &AwsClients,
    view: &PassView,
    cluster: &str,
    vpcs: &[String],
) -> Result<Vec<Blocker>, CleanError> {
    let capa = tags::capa_key(cluster);
    let mut out = blocking_load_balancers(c, view, vpcs).await?;
    out.extend(blocking_instances(c, vpcs).await?);
    let (nats, nat_enis) = blocking_nat_gateways(c, view, vpcs, &capa).await?;
    out.extend(nats);
    // Judged once the endpoints are known: an interface endpoint's interfaces go with it (AWS
    // reports them in use, LocalStack `available`).
    let detached = detached_interfaces(c, vpcs).await?;
    out.extend(blocking_security_groups(c, view, vpcs, &capa).await?);
    let (endpoints, endpoint_enis) = blocking_vpc_endpoints(c, view, vpcs, &capa).await?;
    out.extend(endpoints);
    out.extend(blocking_interfaces(detached, &nat_enis, &endpoint_enis));
    out.extend(blocking_subnets(c, view, vpcs, &capa).await?);
    Ok(out)
}

fn in_vpcs(vpcs: &[String]) -> aws_sdk_ec2::types::Filter {
    tags::ec2_filter("vpc-id", vpcs)
}

/// Load balancers of both APIs in the VPCs: any left blocks.
async fn blocking_load_balancers(
    c: &AwsClients,
    view: &PassView,
    vpcs: &[String],
) -> Result<Vec<Blocker>, CleanError> {
    let found = view.load_balancers_in(c, vpcs).await?;
    Ok(found
        .into_iter()
        .filter(|_| blocks_vpc(&InVpc::LoadBalancer))
        .map(|(lb, vpc)| blocker("elasticloadbalancing", "load-balancer", &lb, &vpc))
        .collect())
}

/// Live instances in the VPCs: any left blocks.
async fn blocking_instances(c: &AwsClients, vpcs: &[String]) -> Result<Vec<Blocker>, CleanError> {
    let live = instances::live_instances(c, vec![in_vpcs(vpcs)]).await?;
    Ok(live
        .iter()
        .filter_map(|i| Some((i, i.vpc.as_ref()?)))
        .filter(|_| blocks_vpc(&InVpc::Instance))
        .map(|(i, vpc)| blocker("ec2", "instance", &i.id, vpc))
        .collect())
}

/// NAT gateways: another owner's is a blocker; every one's interface is the gateway's, not a
/// leftover (LocalStack reports it `available`), so their ids come back too.
async fn blocking_nat_gateways(
    c: &AwsClients,
    view: &PassView,
    vpcs: &[String],
    capa: &str,
) -> Result<(Vec<Blocker>, HashSet<String>), CleanError> {
    let nats = view.nat_gateways(c, vpcs).await?;
    let mut out = Vec::new();
    let mut nat_enis = HashSet::new();
    for n in nats.iter() {
        nat_enis.extend(
            n.nat_gateway_addresses()
                .iter()
                .filter_map(|a| a.network_interface_id())
                .map(str::to_string),
        );
        let found = InVpc::NatGateway {
            state: n.state().map(|s| s.as_str()),
            capa_owned: tags::is_owned(tags::ec2_pairs(n.tags()), capa),
        };
        if blocks_vpc(&found)
            && let (Some(id), Some(vpc)) = (n.nat_gateway_id(), n.vpc_id())
        {
            out.push(blocker("ec2", "nat-gateway", id, vpc));
        }
    }
    Ok((out, nat_enis))
}

/// The VPCs' detached network interfaces, (id, VPC), not judged yet.
async fn detached_interfaces(
    c: &AwsClients,
    vpcs: &[String],
) -> Result<Vec<(String, String)>, CleanError> {
    let enis = describe::detached_network_interfaces(c, vec![in_vpcs(vpcs)]).await?;
    Ok(enis
        .iter()
        .filter_map(|n| Some((n.network_interface_id()?.into(), n.vpc_id()?.into())))
        .collect())
}

/// Security groups: GuardDuty's managed one and CAPA's do not block; another's does (the
/// default group never does).
async fn blocking_security_groups(
    c: &AwsClients,
    view: &PassView,
    vpcs: &[String],
    capa: &str,
) -> Result<Vec<Blocker>, CleanError> {
    let mut out = Vec::new();
    for g in view.security_groups(c, vpcs).await?.iter() {
        let found = if guardduty::group(g.group_name(), g.vpc_id(), vpcs).is_delete() {
            InVpc::GuardDuty
        } else {
            InVpc::SecurityGroup {
                name: g.group_name(),
                capa_owned: tags::is_owned(tags::ec2_pairs(g.tags()), capa),
            }
        };
        if blocks_vpc(&found)
            && let (Some(id), Some(vpc)) = (g.group_id(), g.vpc_id())
        {
            out.push(blocker("ec2", "security-group", id, vpc));
        }
    }
    Ok(out)
}

/// VPC endpoints: CAPA's go in this phase (vpc_endpoints.rs) and GuardDuty's with its group;
/// another's keeps the VPC. Every endpoint's interface ids come back too.
async fn blocking_vpc_endpoints(
    c: &AwsClients,
    view: &PassView,
    vpcs: &[String],
    capa: &str,
) -> Result<(Vec<Blocker>, HashSet<String>), CleanError> {
    let endpoints = view.vpc_endpoints(c, vpcs).await?;
    let region = guardduty_cleaner::region(c);
    let mut out = Vec::new();
    for e in endpoints.iter() {
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
                capa_owned: tags::is_owned(pairs.iter().copied(), capa),
            }
        };
        if blocks_vpc(&found)
            && let (Some(id), Some(vpc)) = (e.vpc_endpoint_id(), e.vpc_id())
        {
            out.push(blocker("ec2", "vpc-endpoint", id, vpc));
        }
    }
    let enis = endpoints
        .iter()
        .flat_map(|e| e.network_interface_ids().iter().cloned())
        .collect();
    Ok((out, enis))
}

/// The detached interfaces that block: those no NAT gateway or endpoint owns.
fn blocking_interfaces(
    detached: Vec<(String, String)>,
    nat_enis: &HashSet<String>,
    endpoint_enis: &HashSet<String>,
) -> Vec<Blocker> {
    detached
        .into_iter()
        .filter(|(id, _)| {
            blocks_vpc(&InVpc::DetachedInterface {
                nat_gateways: nat_enis.contains(id) || endpoint_enis.contains(id),
            })
        })
        .map(|(id, vpc)| blocker("ec2", "network-interface", &id, &vpc))
        .collect()
}

/// Subnets: CAPA's go in this phase; another's keeps the VPC.
async fn blocking_subnets(
    c: &AwsClients,
    view: &PassView,
    vpcs: &[String],
    capa: &str,
) -> Result<Vec<Blocker>, CleanError> {
    let mut out = Vec::new();
    for s in view.subnets(c, vpcs).await?.iter() {
        let found = InVpc::Subnet {
            capa_owned: tags::is_owned(tags::ec2_pairs(s.tags()), capa),
        };
        if blocks_vpc(&found)
            && let (Some(id), Some(vpc)) = (s.subnet_id(), s.vpc_id())
        {
            out.push(blocker("ec2", "subnet", id, vpc));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mocked::{self, CAPA_KEY, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
    use aws_sdk_ec2::operation::describe_nat_gateways::DescribeNatGatewaysOutput;
    use aws_sdk_ec2::operation::describe_network_interfaces::DescribeNetworkInterfacesOutput;
    use aws_sdk_ec2::operation::describe_security_groups::DescribeSecurityGroupsOutput;
    use aws_sdk_ec2::operation::describe_subnets::DescribeSubnetsOutput;
    use aws_sdk_ec2::operation::describe_vpc_endpoints::DescribeVpcEndpointsOutput;
    use aws_sdk_ec2::types::{
        Instance, InstanceState, InstanceStateName, NatGateway, NatGatewayAddress, NatGatewayState,
        NetworkInterface, Reservation, SecurityGroup, State, Subnet, VpcEndpoint,
    };
    use aws_sdk_elasticloadbalancing::operation::describe_load_balancers::DescribeLoadBalancersOutput as ClassicOut;
    use aws_sdk_elasticloadbalancing::types::LoadBalancerDescription;
    use aws_sdk_elasticloadbalancingv2::operation::describe_load_balancers::DescribeLoadBalancersOutput as V2Out;
    use aws_sdk_elasticloadbalancingv2::types::LoadBalancer;

    #[test]
    fn a_detached_interface_blocks_unless_a_nat_gateway_or_an_endpoint_owns_it() {
        let set = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<HashSet<_>>();
        let table: [(&str, &[&str], &[&str], bool); 4] = [
            ("eni-left", &[], &[], true),
            ("eni-nat", &["eni-nat"], &[], false),
            ("eni-vpce", &[], &["eni-vpce"], false),
            ("eni-left", &["eni-nat"], &["eni-vpce"], true),
        ];
        for (id, nat, endpoint, blocks) in table {
            let detached = vec![(id.to_string(), "vpc-1".to_string())];
            let got = blocking_interfaces(detached, &set(nat), &set(endpoint));
            assert_eq!(got.len(), usize::from(blocks), "{id} {nat:?} {endpoint:?}");
            if blocks {
                assert_eq!((got[0].0.id.as_str(), got[0].1.as_str()), (id, "vpc-1"));
                assert_eq!(got[0].0.kind, "network-interface");
            }
        }
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
        let view = PassView::default();
        let found = blockers(&c, &view, "c1", &["vpc-1".to_string()])
            .await
            .unwrap();
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
}
