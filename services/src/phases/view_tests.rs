//! Phase 3 on mocked calls: the blocker check and the network's cleaners share the pass's
//! listings (`locate::view`). Every VPC-wide list is described once, and the decisions are the
//! ones the cleaners' own narrower Describes made: CAPA's deleted, another owner's kept and not
//! blocking, GuardDuty's by its name only.

use super::*;
use crate::mocked::{self, CAPA_KEY, assert_calls, filter_is, mock, tag};
use aws_sdk_ec2::Client;
use aws_sdk_ec2::operation::{
    delete_security_group::DeleteSecurityGroupOutput, delete_subnet::DeleteSubnetOutput,
    delete_vpc::DeleteVpcOutput, describe_addresses::DescribeAddressesOutput,
    describe_instances::DescribeInstancesOutput,
    describe_internet_gateways::DescribeInternetGatewaysOutput,
    describe_nat_gateways::DescribeNatGatewaysOutput,
    describe_network_interfaces::DescribeNetworkInterfacesOutput,
    describe_route_tables::DescribeRouteTablesOutput,
    describe_security_groups::DescribeSecurityGroupsOutput,
    describe_subnets::DescribeSubnetsOutput, describe_vpc_endpoints::DescribeVpcEndpointsOutput,
    release_address::ReleaseAddressOutput,
};
use aws_sdk_ec2::types::{
    Address, NatGateway, NatGatewayAddress, NatGatewayState, SecurityGroup, State, Subnet,
    VpcEndpoint,
};
use aws_sdk_elasticloadbalancing::operation::describe_load_balancers::DescribeLoadBalancersOutput as ClassicOut;
use aws_sdk_elasticloadbalancingv2::operation::describe_load_balancers::DescribeLoadBalancersOutput as V2Out;

const GD_GROUP: &str = "GuardDutyManagedSecurityGroup-vpc-1";

fn in_vpc_only(f: &[aws_sdk_ec2::types::Filter]) -> bool {
    f.len() == 1 && filter_is(f, "vpc-id", &["vpc-1"])
}

/// The VPC's lists, each answered once: a second Describe of any of them would find no rule.
fn listings() -> Vec<mocked::Rule> {
    let nat = |id: &str, owned: bool, allocation: Option<&str>| {
        let mut b = NatGateway::builder()
            .nat_gateway_id(id)
            .vpc_id("vpc-1")
            .state(NatGatewayState::Deleted);
        if owned {
            b = b.tags(tag(CAPA_KEY, "owned"));
        }
        if let Some(a) = allocation {
            b = b.nat_gateway_addresses(NatGatewayAddress::builder().allocation_id(a).build());
        }
        b.build()
    };
    let endpoint = |id: &str, service: &str, tags: aws_sdk_ec2::types::Tag| {
        VpcEndpoint::builder()
            .vpc_endpoint_id(id)
            .vpc_id("vpc-1")
            .service_name(service)
            .state(State::Deleted)
            .tags(tags)
            .build()
    };
    let group = |id: &str, name: &str| {
        SecurityGroup::builder()
            .group_id(id)
            .group_name(name)
            .vpc_id("vpc-1")
            .build()
    };
    vec![
        mock!(aws_sdk_elasticloadbalancingv2::Client::describe_load_balancers)
            .then_output(|| V2Out::builder().build()),
        mock!(aws_sdk_elasticloadbalancing::Client::describe_load_balancers)
            .then_output(|| ClassicOut::builder().build()),
        mock!(Client::describe_instances)
            .then_output(|| DescribeInstancesOutput::builder().build()),
        mock!(Client::describe_nat_gateways)
            .match_requests(|r| in_vpc_only(r.filter()))
            .then_output(move || {
                DescribeNatGatewaysOutput::builder()
                    // CAPA's, deleted: its address is released.
                    .nat_gateways(nat("nat-capa", true, Some("eipalloc-1")))
                    // Another owner's, deleted: blocks nothing, its address is never asked for.
                    .nat_gateways(nat("nat-theirs", false, Some("eipalloc-theirs")))
                    .build()
            }),
        mock!(Client::describe_network_interfaces)
            .then_output(|| DescribeNetworkInterfacesOutput::builder().build()),
        mock!(Client::describe_security_groups)
            .match_requests(|r| in_vpc_only(r.filters()))
            .then_output(move || {
                DescribeSecurityGroupsOutput::builder()
                    .security_groups(group("sg-default", "default"))
                    .security_groups(group("sg-gd", GD_GROUP))
                    .build()
            }),
        mock!(Client::describe_vpc_endpoints)
            .match_requests(|r| in_vpc_only(r.filters()))
            .then_output(move || {
                let gd = "com.amazonaws.us-east-1.guardduty-data";
                DescribeVpcEndpointsOutput::builder()
                    .vpc_endpoints(endpoint("vpce-capa", "s3", tag(CAPA_KEY, "owned")))
                    .vpc_endpoints(endpoint("vpce-gd", gd, tag("GuardDutyManaged", "true")))
                    .build()
            }),
        mock!(Client::describe_subnets)
            .match_requests(|r| in_vpc_only(r.filters()))
            .then_output(|| {
                DescribeSubnetsOutput::builder()
                    .subnets(
                        Subnet::builder()
                            .subnet_id("subnet-a")
                            .vpc_id("vpc-1")
                            .tags(tag(CAPA_KEY, "owned"))
                            .build(),
                    )
                    .build()
            }),
    ]
}

/// What the network's cleaners ask beyond the shared lists, and their deletes, in order.
fn cleaners_calls() -> Vec<mocked::Rule> {
    vec![
        mock!(Client::describe_addresses)
            .match_requests(|r| filter_is(r.filters(), &format!("tag:{CAPA_KEY}"), &["owned"]))
            .then_output(|| DescribeAddressesOutput::builder().build()),
        mock!(Client::describe_addresses)
            .match_requests(|r| filter_is(r.filters(), "allocation-id", &["eipalloc-1"]))
            .then_output(|| {
                DescribeAddressesOutput::builder()
                    .addresses(Address::builder().allocation_id("eipalloc-1").build())
                    .build()
            }),
        mock!(Client::release_address)
            .match_requests(|r| r.allocation_id() == Some("eipalloc-1"))
            .then_output(|| ReleaseAddressOutput::builder().build()),
        mock!(Client::describe_internet_gateways)
            .then_output(|| DescribeInternetGatewaysOutput::builder().build()),
        mock!(Client::describe_route_tables)
            .then_output(|| DescribeRouteTablesOutput::builder().build()),
        mock!(Client::delete_subnet)
            .match_requests(|r| r.subnet_id() == Some("subnet-a"))
            .then_output(|| DeleteSubnetOutput::builder().build()),
        mock!(Client::delete_security_group)
            .match_requests(|r| r.group_id() == Some("sg-gd"))
            .then_output(|| DeleteSecurityGroupOutput::builder().build()),
        mock!(Client::delete_vpc)
            .match_requests(|r| r.vpc_id() == Some("vpc-1"))
            .then_output(|| DeleteVpcOutput::builder().build()),
    ]
}

#[tokio::test]
async fn phase_3_describes_each_list_of_the_vpc_once_and_decides_as_before() {
    let rules: Vec<mocked::Rule> = listings().into_iter().chain(cleaners_calls()).collect();
    let refs: Vec<&mocked::Rule> = rules.iter().collect();
    let c = mocked::in_order(&refs);
    let view = PassView::default();
    let req = PassRequest::new(mocked::CLUSTER);
    let p3 = phase3(&c, &req, &Ok(vec!["vpc-1".to_string()]), &view).await;

    assert!(p3.errors.is_empty(), "{:?}", p3.errors);
    assert!(p3.blockers.is_empty(), "{:?}", p3.blockers);
    let deleted: Vec<&str> = p3.deleted.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(deleted, ["eipalloc-1", "subnet-a", "sg-gd", "vpc-1"]);
    for (i, r) in rules.iter().enumerate() {
        assert_calls(r, 1, &format!("rule {i}"));
    }
    // Two load balancer listings and the four lists of the VPC; nothing described twice.
    assert_eq!(view.described(), 6);
}

#[tokio::test]
async fn a_delete_of_a_kind_makes_the_next_step_describe_it_again() {
    let subnets = |id: &'static str| {
        mock!(Client::describe_subnets)
            .match_requests(|r| in_vpc_only(r.filters()))
            .then_output(move || {
                DescribeSubnetsOutput::builder()
                    .subnets(Subnet::builder().subnet_id(id).vpc_id("vpc-1").build())
                    .build()
            })
    };
    let (before, after) = (subnets("subnet-before"), subnets("subnet-after"));
    let c = mocked::in_order(&[&before, &after]);
    let view = PassView::default();
    let vpcs = ["vpc-1".to_string()];
    let ids = |l: &[Subnet]| {
        l.iter()
            .filter_map(|s| s.subnet_id())
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(&view.subnets(&c, &vpcs).await.unwrap()),
        ["subnet-before"]
    );
    // Served again: no call.
    assert_eq!(
        ids(&view.subnets(&c, &vpcs).await.unwrap()),
        ["subnet-before"]
    );
    // Another kind's delete changes nothing here.
    view.forget("ec2", "natgateway").await;
    assert_eq!(
        ids(&view.subnets(&c, &vpcs).await.unwrap()),
        ["subnet-before"]
    );
    // The subnets' cleaner sent a delete: described again.
    let d = crate::cleaners::subnets::DESCRIPTOR;
    view.forget(d.service, d.kind).await;
    assert_eq!(
        ids(&view.subnets(&c, &vpcs).await.unwrap()),
        ["subnet-after"]
    );
    assert_calls(&after, 1, "DescribeSubnets after the delete");
    assert_eq!(view.described(), 2);
}

#[test]
fn every_listing_is_forgotten_for_a_kind_a_registered_cleaner_deletes() {
    let deleted: Vec<(&str, &str)> = registry::descriptors()
        .iter()
        .filter(|d| !d.untags)
        .map(|d| (d.service, d.kind))
        .collect();
    for kind in crate::locate::view::KINDS {
        assert!(deleted.contains(&kind), "{kind:?}: no cleaner deletes it");
    }
}
