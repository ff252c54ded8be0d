//! An account's inventory in one region: every resource the tagging API and the EC2, ELB and
//! ELBv2 describes list there, one `"<kind> <id>"` line each. Two inventories of a fresh account,
//! before a cluster was built and after it was torn down, are equal when nothing was left behind
//! and nothing that was there before was touched. NAT gateways in `deleted` (with their tags in
//! the tagging API's answer) and instances in `terminated` are gone for this purpose (AWS lists
//! them for a while; so does LocalStack).

use std::collections::BTreeSet;
use sweeper_aws::phases::AwsClients;

macro_rules! listed {
    ($set:ident, $kind:literal, $call:expr, $items:ident, $id:ident) => {{
        let out = $call
            .send()
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", $kind));
        for item in out.$items() {
            if let Some(id) = item.$id() {
                $set.insert(format!("{} {id}", $kind));
            }
        }
    }};
}

pub async fn inventory(c: &AwsClients) -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    let ec2 = &c.ec2;
    listed!(s, "vpc", ec2.describe_vpcs(), vpcs, vpc_id);
    listed!(s, "subnet", ec2.describe_subnets(), subnets, subnet_id);
    listed!(
        s,
        "security-group",
        ec2.describe_security_groups(),
        security_groups,
        group_id
    );
    listed!(
        s,
        "route-table",
        ec2.describe_route_tables(),
        route_tables,
        route_table_id
    );
    listed!(
        s,
        "network-acl",
        ec2.describe_network_acls(),
        network_acls,
        network_acl_id
    );
    listed!(
        s,
        "internet-gateway",
        ec2.describe_internet_gateways(),
        internet_gateways,
        internet_gateway_id
    );
    listed!(
        s,
        "egress-only-igw",
        ec2.describe_egress_only_internet_gateways(),
        egress_only_internet_gateways,
        egress_only_internet_gateway_id
    );
    listed!(
        s,
        "elastic-ip",
        ec2.describe_addresses(),
        addresses,
        allocation_id
    );
    listed!(
        s,
        "network-interface",
        ec2.describe_network_interfaces(),
        network_interfaces,
        network_interface_id
    );
    listed!(s, "volume", ec2.describe_volumes(), volumes, volume_id);
    listed!(
        s,
        "snapshot",
        ec2.describe_snapshots().owner_ids("self"),
        snapshots,
        snapshot_id
    );
    listed!(
        s,
        "vpc-endpoint",
        ec2.describe_vpc_endpoints(),
        vpc_endpoints,
        vpc_endpoint_id
    );
    listed!(
        s,
        "launch-template",
        ec2.describe_launch_templates(),
        launch_templates,
        launch_template_id
    );
    let nat = ec2
        .describe_nat_gateways()
        .send()
        .await
        .expect("DescribeNatGateways");
    let mut deleted_nat = BTreeSet::new();
    for g in nat.nat_gateways() {
        let state = g.state().map(|s| s.as_str()).unwrap_or_default();
        let id = g.nat_gateway_id().unwrap_or_default();
        if matches!(state, "deleted" | "deleting") {
            deleted_nat.insert(format!("natgateway/{id}"));
        } else {
            s.insert(format!("nat-gateway {id}"));
        }
    }
    let inst = ec2
        .describe_instances()
        .send()
        .await
        .expect("DescribeInstances");
    for i in inst.reservations().iter().flat_map(|r| r.instances()) {
        let state = i
            .state()
            .and_then(|s| s.name())
            .map(|n| n.as_str())
            .unwrap_or_default();
        if state != "terminated" {
            s.insert(format!("instance {}", i.instance_id().unwrap_or_default()));
        }
    }
    listed!(
        s,
        "classic-elb",
        c.elb.describe_load_balancers(),
        load_balancer_descriptions,
        load_balancer_name
    );
    listed!(
        s,
        "elbv2",
        c.elbv2.describe_load_balancers(),
        load_balancers,
        load_balancer_arn
    );
    listed!(
        s,
        "target-group",
        c.elbv2.describe_target_groups(),
        target_groups,
        target_group_arn
    );
    let tagged = c
        .tagging
        .get_resources()
        .send()
        .await
        .expect("GetResources");
    for m in tagged.resource_tag_mapping_list() {
        let arn = m.resource_arn().unwrap_or_default();
        // A deleted NAT gateway keeps its tags while it is still described (LocalStack's tagging
        // API lists it then): gone here as in the describe above.
        if !deleted_nat.iter().any(|g| arn.ends_with(g.as_str())) {
            s.insert(format!("tagged {arn}"));
        }
    }
    s
}

/// What `after` has that `before` had not, and what it lost: both empty when equal.
pub fn diff(before: &BTreeSet<String>, after: &BTreeSet<String>) -> (Vec<String>, Vec<String>) {
    (
        after.difference(before).cloned().collect(),
        before.difference(after).cloned().collect(),
    )
}

/// The snapshot sweeper takes of `volume` before deleting it (its EBS cleaner's default,
/// `--external-ebs-snapshot`): a teardown leaves it on purpose, tagged with the volume and the
/// cluster. Fails unless there is exactly one; its id.
pub async fn sweepers_snapshot(c: &AwsClients, cluster: &str, volume: &str) -> String {
    use sweeper_aws::cleaners::volumes::{CLUSTER_TAG, SOURCE_VOLUME_TAG};
    use sweeper_aws::locate::tags::ec2_tag_filter as filter;
    let out = c
        .ec2
        .describe_snapshots()
        .owner_ids("self")
        .filters(filter(SOURCE_VOLUME_TAG, volume))
        .filters(filter(CLUSTER_TAG, cluster))
        .send()
        .await
        .expect("DescribeSnapshots");
    let ids: Vec<&str> = out
        .snapshots()
        .iter()
        .filter_map(|s| s.snapshot_id())
        .collect();
    assert_eq!(
        ids.len(),
        1,
        "sweeper snapshots {volume} once before deleting it: {ids:?}"
    );
    ids[0].to_string()
}

/// The lines of `inventory` that are snapshot `id`: its describe line, and its tagging API line
/// when the tagging API lists it.
pub fn snapshot_lines(inventory: &BTreeSet<String>, id: &str) -> BTreeSet<String> {
    let tagged = format!(":snapshot/{id}");
    let mut lines = BTreeSet::from([format!("snapshot {id}")]);
    lines.extend(
        inventory
            .iter()
            .filter(|l| l.starts_with("tagged ") && l.ends_with(&tagged))
            .cloned(),
    );
    lines
}
