//! Which of the demo's AWS resources still exist: one describe call per EC2 kind, one per load
//! balancer or target group (a describe by name or ARN fails as a whole when one is missing).

use crate::aws_world::{AwsRes, Kind};
use std::collections::BTreeSet;
use sweeper_aws::phases::AwsClients;
use sweeper_aws::sdk::ec2::error::ProvideErrorMetadata;
use sweeper_aws::sdk::ec2::types::Filter;

fn id_filter(name: &str, ids: &[String]) -> Filter {
    Filter::builder()
        .name(name)
        .set_values(Some(ids.to_vec()))
        .build()
}

fn not_found<E: ProvideErrorMetadata>(e: &E) -> bool {
    e.code().is_some_and(|c| c.contains("NotFound"))
}

/// Which of `rs` still exist (an instance counts until terminated, a NAT gateway until deleted).
/// A failed call counts its resources as existing.
pub async fn existing(c: &AwsClients, rs: &[AwsRes]) -> Vec<bool> {
    let mut out = Vec::with_capacity(rs.len());
    let live = ec2_live(c, rs).await;
    for r in rs {
        let exists = match r.kind {
            Kind::ClassicElb => match c
                .elb
                .describe_load_balancers()
                .load_balancer_names(&r.id)
                .send()
                .await
            {
                Ok(o) => !o.load_balancer_descriptions().is_empty(),
                Err(e) => !not_found(&e.into_service_error()),
            },
            Kind::Nlb | Kind::Alb => match c
                .elbv2
                .describe_load_balancers()
                .load_balancer_arns(&r.id)
                .send()
                .await
            {
                Ok(o) => !o.load_balancers().is_empty(),
                Err(e) => !not_found(&e.into_service_error()),
            },
            Kind::TargetGroup => match c
                .elbv2
                .describe_target_groups()
                .target_group_arns(&r.id)
                .send()
                .await
            {
                Ok(o) => !o.target_groups().is_empty(),
                Err(e) => !not_found(&e.into_service_error()),
            },
            _ => live.as_ref().is_none_or(|l| l.contains(&r.id)),
        };
        out.push(exists);
    }
    out
}

/// The EC2 resources among `rs` that exist; None if a call failed.
async fn ec2_live(c: &AwsClients, rs: &[AwsRes]) -> Option<BTreeSet<String>> {
    let ids = |k: Kind| -> Vec<String> {
        rs.iter()
            .filter(|r| r.kind == k)
            .map(|r| r.id.clone())
            .collect()
    };
    let mut live = BTreeSet::new();
    let e = &c.ec2;
    // Describe the ids of one kind by filter (a missing id is just absent, not an error).
    macro_rules! present {
        ($kind:expr, $filter:literal, $call:ident, $list:ident, $id:ident) => {
            let v = ids($kind);
            if !v.is_empty() {
                let o = e
                    .$call()
                    .filters(id_filter($filter, &v))
                    .send()
                    .await
                    .ok()?;
                live.extend(o.$list().iter().filter_map(|x| x.$id()).map(String::from));
            }
        };
    }
    present!(Kind::Vpc, "vpc-id", describe_vpcs, vpcs, vpc_id);
    present!(
        Kind::Subnet,
        "subnet-id",
        describe_subnets,
        subnets,
        subnet_id
    );
    present!(
        Kind::InternetGateway,
        "internet-gateway-id",
        describe_internet_gateways,
        internet_gateways,
        internet_gateway_id
    );
    present!(
        Kind::RouteTable,
        "route-table-id",
        describe_route_tables,
        route_tables,
        route_table_id
    );
    present!(
        Kind::ElasticIp,
        "allocation-id",
        describe_addresses,
        addresses,
        allocation_id
    );
    present!(
        Kind::SecurityGroup,
        "group-id",
        describe_security_groups,
        security_groups,
        group_id
    );
    present!(
        Kind::NetworkInterface,
        "network-interface-id",
        describe_network_interfaces,
        network_interfaces,
        network_interface_id
    );
    let v = ids(Kind::NatGateway);
    if !v.is_empty() {
        let o = e
            .describe_nat_gateways()
            .filter(id_filter("nat-gateway-id", &v))
            .send()
            .await
            .ok()?;
        live.extend(
            o.nat_gateways()
                .iter()
                .filter(|x| x.state().is_none_or(|s| s.as_str() != "deleted"))
                .filter_map(|x| x.nat_gateway_id())
                .map(String::from),
        );
    }
    let v = ids(Kind::Instance);
    if !v.is_empty() {
        let o = e
            .describe_instances()
            .filters(id_filter("instance-id", &v))
            .send()
            .await
            .ok()?;
        live.extend(
            o.reservations()
                .iter()
                .flat_map(|r| r.instances())
                .filter(|i| {
                    i.state()
                        .and_then(|s| s.name())
                        .is_none_or(|s| s.as_str() != "terminated")
                })
                .filter_map(|i| i.instance_id())
                .map(String::from),
        );
    }
    Some(live)
}
