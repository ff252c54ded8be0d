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

use super::describe::TargetGroupInfo;
use super::tagging::TaggedResource;
use super::tags;
use super::{by_id, describe};
use crate::errors::CleanError;
use crate::model::AwsClients;
use crate::policy::Ownership;
use aws_sdk_ec2::types::SecurityGroup;
use std::collections::HashSet;

/// Every security group of `vpcs` (all pages, rules and tags included), as one Describe saw
/// them during locating. Stored in the inventory for phase 2's cleaners.
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
/// Kinds phase 2 does not clean are dropped; with no known VPC, everything is. Gathers the
/// facts ([`gather`], the only AWS calls), then decides ([`keep`], pure).
pub async fn confirm(
    c: &AwsClients,
    own: &Ownership,
    candidates: Vec<TaggedResource>,
) -> Result<Confirmed, CleanError> {
    if candidates.is_empty() {
        return Ok(Confirmed::default());
    }
    if own.vpcs().is_empty() {
        tracing::warn!(
            found = candidates.len(),
            "resources tagged for the cluster by the LB controller or the VPC CNI, but the cluster's VPC is unknown: left alone"
        );
        return Ok(Confirmed::default());
    }
    let facts = gather(c, own.vpcs(), &Wanted::of(&candidates)).await?;
    let (kept, left) = keep(own, candidates, &facts);
    for r in &left {
        tracing::info!(arn = %r.arn, "tagged for a cluster of this name but not in its VPC (or not a kind phase 2 cleans): left alone");
    }
    Ok(Confirmed {
        kept,
        groups: facts.groups.map(|groups| VpcSecurityGroups {
            vpcs: own.vpcs().to_vec(),
            groups,
        }),
    })
}

/// What the candidates ask to be looked up. The four kinds here are what the controller-tag
/// queries ask for (tags::CONTROLLER_TAGGED_TYPES): a kind confirmed here must be in that list.
#[derive(Debug, Default, PartialEq)]
struct Wanted {
    /// v2 load balancers by ARN (`app|net|gwy/<name>/<id>`).
    v2_lbs: Vec<String>,
    /// Classic load balancers by name.
    classic_lbs: Vec<String>,
    target_groups: Vec<String>,
    security_groups: bool,
    network_interfaces: bool,
}

impl Wanted {
    fn of(candidates: &[TaggedResource]) -> Self {
        let mut w = Wanted::default();
        for r in candidates {
            match (r.arn.service.as_str(), r.arn.resource_type()) {
                ("elasticloadbalancing", "loadbalancer") if r.arn.resource_id().contains('/') => {
                    w.v2_lbs.push(r.arn.to_string())
                }
                ("elasticloadbalancing", "loadbalancer") => {
                    w.classic_lbs.push(r.arn.resource_id().to_string())
                }
                ("elasticloadbalancing", "targetgroup") => w.target_groups.push(r.arn.to_string()),
                ("ec2", "security-group") => w.security_groups = true,
                ("ec2", "network-interface") => w.network_interfaces = true,
                _ => {}
            }
        }
        w
    }
}

/// Where the wanted resources live, as AWS answered.
#[derive(Debug, Default)]
pub(crate) struct Placement {
    /// Load balancers that exist: (ARN or classic name, VPC).
    lbs: Vec<(String, Option<String>)>,
    target_groups: Vec<TargetGroupInfo>,
    /// Every security group of the cluster's VPCs (when a group was a candidate).
    groups: Option<Vec<SecurityGroup>>,
    /// The detached interfaces of the cluster's VPCs (when an interface was a candidate).
    detached_enis: Vec<String>,
}

/// The Describes `wanted` needs, and no other: load balancers and target groups by ARN or name
/// (their region's listing is what a Describe would otherwise read for a few of them); groups
/// and interfaces by one Describe over the cluster's VPCs. They are independent, so they run at
/// once: the confirmation costs one round trip, not four.
async fn gather(c: &AwsClients, vpcs: &[String], wanted: &Wanted) -> Result<Placement, CleanError> {
    let in_vpcs = || tags::ec2_filter("vpc-id", vpcs);
    let lbs = async {
        if wanted.v2_lbs.is_empty() && wanted.classic_lbs.is_empty() {
            return Ok(Vec::new());
        }
        by_id::load_balancers(c, &wanted.v2_lbs, &wanted.classic_lbs).await
    };
    let tgs = async {
        if wanted.target_groups.is_empty() {
            return Ok(Vec::new());
        }
        by_id::target_groups(c, &wanted.target_groups).await
    };
    let sgs = async {
        if !wanted.security_groups {
            return Ok(None);
        }
        describe::security_groups(c, vec![in_vpcs()])
            .await
            .map(Some)
    };
    let enis = async {
        if !wanted.network_interfaces {
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
    let (lbs, target_groups, groups, detached_enis) =
        futures::future::try_join4(Box::pin(lbs), Box::pin(tgs), Box::pin(sgs), Box::pin(enis))
            .await?;
    Ok(Placement {
        lbs,
        target_groups,
        groups,
        detached_enis,
    })
}

/// The deletion-safety filter, pure: (kept, left). A candidate is kept only when the facts show
/// it in one of `own`'s VPCs (load balancers, target groups), among the groups described in
/// them, or among their detached interfaces. Anything else, other kinds included, is left.
fn keep(
    own: &Ownership,
    candidates: Vec<TaggedResource>,
    facts: &Placement,
) -> (Vec<TaggedResource>, Vec<TaggedResource>) {
    let lbs = facts
        .lbs
        .iter()
        .filter(|(_, vpc)| own.in_vpcs(vpc.as_deref()))
        .map(|(id, _)| id.as_str());
    let tgs = facts
        .target_groups
        .iter()
        .filter(|t| own.in_vpcs(t.vpc.as_deref()))
        .map(|t| t.arn.as_str());
    // Described by a filter on the cluster's VPCs: every one is in them.
    let groups = facts.groups.iter().flatten().filter_map(|g| g.group_id());
    let enis = facts.detached_enis.iter().map(String::as_str);
    let here: HashSet<&str> = lbs.chain(tgs).chain(groups).chain(enis).collect();
    candidates.into_iter().partition(|r| {
        here.contains(r.arn.to_string().as_str()) || here.contains(r.arn.resource_id())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "arn:aws:elasticloadbalancing:us-east-1:0";

    fn candidate(arn: &str) -> TaggedResource {
        TaggedResource {
            arn: arn.parse().unwrap(),
            tags: Default::default(),
        }
    }

    fn ids(rs: &[TaggedResource]) -> Vec<String> {
        rs.iter().map(|r| r.arn.resource_id().to_string()).collect()
    }

    #[test]
    fn what_is_asked_follows_the_candidates_kinds() {
        let w = Wanted::of(&[
            candidate(&format!("{P}:loadbalancer/app/a/1")),
            candidate(&format!("{P}:loadbalancer/classic-a")),
            candidate(&format!("{P}:targetgroup/tg/2")),
            candidate("arn:aws:ec2:us-east-1:0:instance/i-1"),
        ]);
        assert_eq!(w.v2_lbs, [format!("{P}:loadbalancer/app/a/1")]);
        assert_eq!(w.classic_lbs, ["classic-a"]);
        assert_eq!(w.target_groups, [format!("{P}:targetgroup/tg/2")]);
        assert!(
            !w.security_groups && !w.network_interfaces,
            "none asked for"
        );
    }

    #[test]
    fn only_what_the_facts_place_in_the_clusters_vpcs_is_kept() {
        let own = Ownership::of("c1").with_vpcs(vec!["vpc-1".into()]);
        let facts = Placement {
            lbs: vec![
                (format!("{P}:loadbalancer/app/ours/1"), Some("vpc-1".into())),
                (format!("{P}:loadbalancer/app/twin/2"), Some("vpc-2".into())),
                ("classic-novpc".into(), None),
            ],
            target_groups: vec![TargetGroupInfo {
                arn: format!("{P}:targetgroup/tg/3"),
                load_balancer_arns: vec![],
                vpc: Some("vpc-2".into()),
            }],
            groups: Some(vec![SecurityGroup::builder().group_id("sg-1").build()]),
            detached_enis: vec!["eni-1".into()],
        };
        let (kept, left) = keep(
            &own,
            vec![
                candidate(&format!("{P}:loadbalancer/app/ours/1")),
                candidate(&format!("{P}:loadbalancer/app/twin/2")),
                candidate(&format!("{P}:loadbalancer/classic-novpc")),
                candidate(&format!("{P}:targetgroup/tg/3")),
                candidate("arn:aws:ec2:us-east-1:0:security-group/sg-1"),
                candidate("arn:aws:ec2:us-east-1:0:security-group/sg-gone"),
                candidate("arn:aws:ec2:us-east-1:0:network-interface/eni-1"),
                candidate("arn:aws:ec2:us-east-1:0:network-interface/eni-attached"),
                candidate("arn:aws:ec2:us-east-1:0:instance/i-1"),
            ],
            &facts,
        );
        assert_eq!(ids(&kept), ["app/ours/1", "sg-1", "eni-1"]);
        assert_eq!(
            ids(&left),
            [
                "app/twin/2",
                "classic-novpc",
                "tg/3",
                "sg-gone",
                "eni-attached",
                "i-1"
            ],
            "another VPC, no VPC, not described, attached, or a kind phase 2 does not confirm"
        );
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::mocked::{self, filter_is, mock};
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
