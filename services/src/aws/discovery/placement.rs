//! Where a resource found by a controller tag lives. The AWS Load Balancer Controller's
//! `elbv2.k8s.aws/cluster=<name>` and the VPC CNI's `cluster.k8s.amazonaws.com/name=<name>` name
//! a cluster, not an account: two clusters of one name in one account (a rebuilt cluster, a twin
//! in another VPC) tag alike. So such a resource is the cluster's only in one of its VPCs. Load
//! balancers and target groups are described by ARN or name (see `by_id`: the region's listing
//! when one is gone since the scan); groups and interfaces by one Describe over the cluster's
//! VPCs (a Describe by id would fail as a whole on one resource deleted since the tagging scan).
//!
//! The security groups' Describe lists every group of those VPCs, rules included: exactly what
//! the security-group cleaner plans its revokes from, so the confirmation hands it on
//! ([`VpcSecurityGroups`]) instead of the cleaner describing the same VPCs again.

use super::inventory::Ownership;
use super::tagging::TaggedResource;
use super::tags;
use super::{by_id, describe};
use crate::aws::errors::CleanError;
use crate::aws::model::AwsClients;
use aws_sdk_ec2::types::SecurityGroup;
use std::collections::HashSet;

/// Every security group of `vpcs` (all pages, rules and tags included), as one Describe saw
/// them during discovery. Stored in the inventory for phase 2's cleaners.
#[derive(Clone, Debug, Default)]
pub struct VpcSecurityGroups {
    pub vpcs: Vec<String>,
    pub groups: Vec<SecurityGroup>,
}

/// What [`confirm`] found: the candidates it kept, and the groups of the cluster's VPCs when it
/// had to describe them (a security group among the candidates).
#[derive(Debug, Default)]
pub struct Confirmed {
    pub kept: Vec<TaggedResource>,
    pub groups: Option<VpcSecurityGroups>,
}

/// The candidates that live in one of `own`'s VPCs (network interfaces: and are `available`).
/// Kinds phase 2 does not clean are dropped; with no known VPC, everything is.
pub async fn confirm(
    c: &AwsClients,
    own: &Ownership,
    candidates: Vec<TaggedResource>,
) -> Result<Confirmed, CleanError> {
    if candidates.is_empty() {
        return Ok(Confirmed::default());
    }
    let vpcs = own.vpcs();
    if vpcs.is_empty() {
        tracing::warn!(
            found = candidates.len(),
            "resources tagged for the cluster by the LB controller or the VPC CNI, but the cluster's VPC is unknown: left alone"
        );
        return Ok(Confirmed::default());
    }
    // The four kinds here are what the controller-tag queries ask for
    // (tags::CONTROLLER_TAGGED_TYPES): a kind confirmed here must be in that list.
    let has = |service: &str, ty: &str| {
        candidates
            .iter()
            .any(|r| r.arn.service == service && r.arn.resource_type() == ty)
    };
    // ARNs (v2 load balancers, target groups) or ids (classic names, groups, interfaces). The
    // kinds' Describes are independent: they run at once, so the confirmation costs one round
    // trip, not four.
    let in_vpcs = || tags::ec2_filter("vpc-id", vpcs);
    // Load balancers and target groups by ARN or name (the candidates' only): their region's
    // listing (every load balancer, every target group) is what a Describe would otherwise
    // read for a few of them. v2 ARNs name `app|net|gwy/<name>/<id>`, classic ones the name.
    let of_kind = |service: &'static str, ty: &'static str| {
        candidates
            .iter()
            .filter(move |r| r.arn.service == service && r.arn.resource_type() == ty)
            .map(|r| &r.arn)
    };
    let (v2_lbs, classic_lbs): (Vec<String>, Vec<String>) = {
        let (v2, classic): (Vec<_>, Vec<_>) = of_kind("elasticloadbalancing", "loadbalancer")
            .partition(|a| a.resource_id().contains('/'));
        (
            v2.iter().map(|a| a.to_string()).collect(),
            classic
                .iter()
                .map(|a| a.resource_id().to_string())
                .collect(),
        )
    };
    let tg_arns: Vec<String> = of_kind("elasticloadbalancing", "targetgroup")
        .map(|a| a.to_string())
        .collect();
    let lbs = async {
        if v2_lbs.is_empty() && classic_lbs.is_empty() {
            return Ok(Vec::new());
        }
        Ok(by_id::load_balancers(c, &v2_lbs, &classic_lbs)
            .await?
            .into_iter()
            .filter(|(_, vpc)| own.in_vpcs(vpc.as_deref()))
            .map(|(id, _)| id)
            .collect())
    };
    let tgs = async {
        if tg_arns.is_empty() {
            return Ok(Vec::new());
        }
        Ok(by_id::target_groups(c, &tg_arns)
            .await?
            .into_iter()
            .filter(|t| own.in_vpcs(t.vpc.as_deref()))
            .map(|t| t.arn)
            .collect())
    };
    let sgs = async {
        if !has("ec2", "security-group") {
            return Ok(None);
        }
        describe::security_groups(c, vec![in_vpcs()])
            .await
            .map(Some)
    };
    let enis = async {
        if !has("ec2", "network-interface") {
            return Ok(Vec::new());
        }
        Ok(describe::detached_network_interfaces(c, vec![in_vpcs()])
            .await?
            .iter()
            .filter_map(|n| n.network_interface_id().map(str::to_string))
            .collect())
    };
    // Each on the heap: four SDK futures side by side in one frame overflow a worker thread's
    // stack in a debug build.
    let (lbs, tgs, groups, enis): (Vec<String>, Vec<String>, _, Vec<String>) =
        futures::future::try_join4(Box::pin(lbs), Box::pin(tgs), Box::pin(sgs), Box::pin(enis))
            .await?;
    let group_ids = groups
        .iter()
        .flatten()
        .filter_map(|g: &SecurityGroup| g.group_id().map(str::to_string));
    let here: HashSet<String> = lbs
        .into_iter()
        .chain(tgs)
        .chain(enis)
        .chain(group_ids)
        .collect();
    let (kept, left): (Vec<_>, Vec<_>) = candidates
        .into_iter()
        .partition(|r| here.contains(&r.arn.to_string()) || here.contains(r.arn.resource_id()));
    for r in &left {
        tracing::info!(arn = %r.arn, "tagged for a cluster of this name but not in its VPC (or not a kind phase 2 cleans): left alone");
    }
    Ok(Confirmed {
        kept,
        groups: groups.map(|groups| VpcSecurityGroups {
            vpcs: vpcs.to_vec(),
            groups,
        }),
    })
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::aws::mocked::{self, filter_is, mock};
    use aws_sdk_ec2::operation::describe_network_interfaces::DescribeNetworkInterfacesOutput;
    use aws_sdk_ec2::operation::describe_security_groups::DescribeSecurityGroupsOutput;
    use aws_sdk_ec2::types::NetworkInterface;
    use aws_sdk_elasticloadbalancingv2 as elbv2;
    use elbv2::operation::describe_load_balancers::DescribeLoadBalancersOutput;
    use elbv2::types::LoadBalancer;

    const P: &str = "arn:aws:elasticloadbalancing:us-east-1:0";

    fn candidate(arn: &str) -> TaggedResource {
        TaggedResource {
            arn: arn.parse().unwrap(),
            tags: [(tags::LBC_CLUSTER_TAG.to_string(), "c1".to_string())].into(),
        }
    }

    #[tokio::test]
    async fn without_a_known_vpc_nothing_is_asked_and_nothing_kept() {
        let c = mocked::no_calls();
        let got = confirm(
            &c,
            &Ownership::of("c1"),
            vec![candidate(&format!("{P}:loadbalancer/app/a/1"))],
        )
        .await
        .unwrap();
        assert!(got.kept.is_empty());
    }

    #[tokio::test]
    async fn only_candidates_in_the_clusters_vpcs_are_kept_and_other_kinds_dropped() {
        let lbs = mock!(elbv2::Client::describe_load_balancers)
            .match_requests(|r| r.load_balancer_arns().len() == 2)
            .then_output(|| {
                DescribeLoadBalancersOutput::builder()
                    .load_balancers(
                        LoadBalancer::builder()
                            .load_balancer_arn(format!("{P}:loadbalancer/app/ours/1"))
                            .vpc_id("vpc-1")
                            .build(),
                    )
                    // The same name's twin in another VPC: not this cluster's.
                    .load_balancers(
                        LoadBalancer::builder()
                            .load_balancer_arn(format!("{P}:loadbalancer/app/twin/2"))
                            .vpc_id("vpc-2")
                            .build(),
                    )
                    .build()
            });
        let groups = mock!(aws_sdk_ec2::Client::describe_security_groups)
            .match_requests(|r| filter_is(r.filters(), "vpc-id", &["vpc-1"]))
            .then_output(|| {
                DescribeSecurityGroupsOutput::builder()
                    .security_groups(
                        SecurityGroup::builder()
                            .group_id("sg-1")
                            .vpc_id("vpc-1")
                            .build(),
                    )
                    .build()
            });
        let enis = mock!(aws_sdk_ec2::Client::describe_network_interfaces)
            .match_requests(|r| {
                filter_is(r.filters(), "vpc-id", &["vpc-1"])
                    && filter_is(r.filters(), "status", &["available"])
            })
            .then_output(|| {
                DescribeNetworkInterfacesOutput::builder()
                    .network_interfaces(
                        NetworkInterface::builder()
                            .network_interface_id("eni-1")
                            .build(),
                    )
                    .build()
            });
        // The three Describes run at once: any order.
        let c = mocked::clients(mocked::RuleMode::MatchAny, &[&lbs, &groups, &enis]);
        let own = Ownership::of("c1").with_vpcs(vec!["vpc-1".into()]);
        let got = confirm(
            &c,
            &own,
            vec![
                candidate(&format!("{P}:loadbalancer/app/ours/1")),
                candidate(&format!("{P}:loadbalancer/app/twin/2")),
                candidate("arn:aws:ec2:us-east-1:0:security-group/sg-1"),
                candidate("arn:aws:ec2:us-east-1:0:security-group/sg-elsewhere"),
                candidate("arn:aws:ec2:us-east-1:0:network-interface/eni-1"),
                candidate("arn:aws:ec2:us-east-1:0:instance/i-1"),
            ],
        )
        .await
        .unwrap();
        let kept: Vec<String> = got
            .kept
            .iter()
            .map(|r| r.arn.resource_id().to_string())
            .collect();
        assert_eq!(kept, ["app/ours/1", "sg-1", "eni-1"]);
        let described = got.groups.unwrap();
        assert_eq!(described.vpcs, ["vpc-1"]);
        assert_eq!(
            described.groups.len(),
            1,
            "handed on to the security-group cleaner"
        );
        assert_eq!(lbs.num_calls() + groups.num_calls() + enis.num_calls(), 3);
    }
}
