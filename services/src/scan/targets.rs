//! The cluster each candidate is torn down as, the way `sweeper teardown --from-scan` names it,
//! and the facts the teardown's rules need that the tagging listing alone does not give: which
//! controller-tagged resources lie in the cluster's VPCs (asked with the teardown's own
//! `locate::placement::confirm`, only for candidates that have such resources and a CAPA VPC).
//! The pure part (names, VPCs, what to confirm) is table-tested; [`confirm`] makes the calls.

use super::claims::ClaimRule;
use super::join::{ClaimedResource, Grouped};
use crate::errors::CleanError;
use crate::locate::placement;
use crate::locate::tagging::TaggedResource;
use crate::model::AwsClients;
use crate::policy::Ownership;
use std::collections::{BTreeMap, BTreeSet};

/// One candidate's teardown names: `tag` (the cloud provider's; an EKS cluster's EKS name) and
/// `capa` (CAPA's tag, the Cluster API name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    pub tag: String,
    pub capa: String,
}

impl Names {
    pub fn has(&self, name: &str) -> bool {
        self.tag == name || self.capa == name
    }
}

/// The names each candidate is torn down as: its own, or, with one other candidate on the same
/// resources (an EKS cluster's two names), CAPA's name being the one CAPA's tag claims, as
/// `teardown --from-scan` decides (its `RolesUnclear` refusal: then both are the candidate's).
pub fn names(candidates: &[Grouped]) -> BTreeMap<String, Names> {
    let capa_tagged = |g: &Grouped| {
        g.resources
            .iter()
            .any(|r| r.claims.iter().any(|c| c.rule == ClaimRule::Capa))
    };
    let by_name: BTreeMap<&str, &Grouped> =
        candidates.iter().map(|g| (g.cluster.as_str(), g)).collect();
    candidates
        .iter()
        .map(|g| {
            let own = Names {
                tag: g.cluster.clone(),
                capa: g.cluster.clone(),
            };
            let pair = match g.also.iter().collect::<Vec<_>>().as_slice() {
                [other] => by_name.get(other.as_str()).map(|o| (*other, o)),
                _ => None,
            };
            let names = match pair {
                Some((other, o)) => match (capa_tagged(g), capa_tagged(o)) {
                    (true, false) => Names {
                        tag: other.clone(),
                        capa: g.cluster.clone(),
                    },
                    (false, true) => Names {
                        tag: g.cluster.clone(),
                        capa: other.clone(),
                    },
                    _ => own,
                },
                None => own,
            };
            (g.cluster.clone(), names)
        })
        .collect()
}

/// What [`confirm`] asks for one pair of names: the cluster's CAPA VPCs (CAPA-tagged VPCs the
/// listing returned, as the teardown's `vpcs::capa_vpcs` finds them) and the resources a
/// controller's tag (not the cluster tag) claims for the cluster.
#[derive(Debug, PartialEq, Eq)]
pub struct ToConfirm {
    pub vpcs: Vec<String>,
    pub arns: Vec<String>,
}

/// [`ToConfirm`] per pair of names, for the pairs with both a CAPA VPC and controller-tagged
/// resources (for the others placement has nothing to confirm: the teardown keeps them).
pub fn to_confirm(
    claimed: &[ClaimedResource],
    names: &BTreeMap<String, Names>,
) -> Vec<(Names, ToConfirm)> {
    let pairs: BTreeSet<(String, String)> = names
        .values()
        .map(|n| (n.tag.clone(), n.capa.clone()))
        .collect();
    pairs
        .into_iter()
        .filter_map(|(tag, capa)| {
            let mut vpcs = BTreeSet::new();
            let mut arns = BTreeSet::new();
            for r in claimed {
                for c in &r.claims {
                    match c.rule {
                        ClaimRule::Capa if c.cluster == capa && r.kind == "ec2:vpc" => {
                            if let Ok(arn) = r.arn.parse::<crate::arn::Arn>() {
                                vpcs.insert(arn.resource_id().to_string());
                            }
                        }
                        ClaimRule::LoadBalancerController | ClaimRule::VpcCni
                            if c.cluster == tag =>
                        {
                            arns.insert(r.arn.clone());
                        }
                        _ => {}
                    }
                }
            }
            (!vpcs.is_empty() && !arns.is_empty()).then(|| {
                (
                    Names { tag, capa },
                    ToConfirm {
                        vpcs: vpcs.into_iter().collect(),
                        arns: arns.into_iter().collect(),
                    },
                )
            })
        })
        .collect()
}

/// The controller-tagged resources the teardown's placement confirms in their cluster's VPCs,
/// as (tag name, ARN).
pub async fn confirm(
    c: &AwsClients,
    asks: Vec<(Names, ToConfirm)>,
    listed: &[TaggedResource],
) -> Result<BTreeSet<(String, String)>, CleanError> {
    let mut out = BTreeSet::new();
    for (names, ask) in asks {
        let own = Ownership::of(&names.tag)
            .with_capa_name(&names.capa)
            .with_vpcs(ask.vpcs);
        let wanted: BTreeSet<&str> = ask.arns.iter().map(String::as_str).collect();
        let candidates: Vec<TaggedResource> = listed
            .iter()
            .filter(|r| wanted.contains(r.arn.to_string().as_str()))
            .cloned()
            .collect();
        let confirmed = placement::confirm(c, &own, candidates).await?;
        out.extend(
            confirmed
                .kept
                .into_iter()
                .map(|r| (names.tag.clone(), r.arn.to_string())),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::claims::claims;

    fn res(arn: &str, kind: &str, tags: &[(&str, &str)]) -> ClaimedResource {
        ClaimedResource {
            arn: arn.into(),
            kind: kind.into(),
            claims: claims(tags.iter().copied()),
            tags: Vec::new(),
        }
    }

    fn group(cluster: &str, also: &[&str], resources: Vec<ClaimedResource>) -> Grouped {
        let resources = resources
            .into_iter()
            .map(|mut r| {
                r.claims.retain(|c| c.cluster == cluster);
                r
            })
            .collect();
        Grouped {
            cluster: cluster.into(),
            resources,
            also: also.iter().map(|s| s.to_string()).collect(),
        }
    }

    const CAPA_C1: (&str, &str) = ("sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "owned");
    const CLOUD_EKS: (&str, &str) = ("kubernetes.io/cluster/ns_c1", "owned");
    const VPC: &str = "arn:aws:ec2:us-east-1:111111111111:vpc/vpc-1";
    const LB: &str = "arn:aws:elasticloadbalancing:us-east-1:111111111111:loadbalancer/app/k8s/1";

    #[test]
    fn an_eks_pair_is_named_as_teardown_names_it_and_others_by_their_own_name() {
        let both = res(VPC, "ec2:vpc", &[CAPA_C1, CLOUD_EKS]);
        let lone = res(
            LB,
            "elasticloadbalancing:loadbalancer",
            &[("kubernetes.io/cluster/z", "owned")],
        );
        let gs = vec![
            group("c1", &["ns_c1"], vec![both.clone()]),
            group("ns_c1", &["c1"], vec![both]),
            group("z", &[], vec![lone]),
        ];
        let n = names(&gs);
        let eks = Names {
            tag: "ns_c1".into(),
            capa: "c1".into(),
        };
        assert_eq!(n["c1"], eks);
        assert_eq!(n["ns_c1"], eks);
        assert_eq!(
            n["z"],
            Names {
                tag: "z".into(),
                capa: "z".into()
            }
        );
    }

    #[test]
    fn only_controller_tagged_resources_of_a_cluster_with_a_capa_vpc_are_confirmed() {
        let lbc = ("elbv2.k8s.aws/cluster", "c1");
        let claimed = vec![
            res(VPC, "ec2:vpc", &[CAPA_C1]),
            res(LB, "elasticloadbalancing:loadbalancer", &[lbc]),
            res(
                "arn:aws:ec2:us-east-1:111111111111:security-group/sg-1",
                "ec2:security-group",
                &[("kubernetes.io/cluster/c1", "owned")],
            ),
            // Another cluster's controller tag, without a CAPA VPC: nothing to confirm.
            res(
                "arn:aws:elasticloadbalancing:us-east-1:111111111111:loadbalancer/app/k8s/2",
                "elasticloadbalancing:loadbalancer",
                &[("elbv2.k8s.aws/cluster", "c2")],
            ),
        ];
        let gs = vec![
            group("c1", &[], claimed[..3].to_vec()),
            group("c2", &[], claimed[3..].to_vec()),
        ];
        let asks = to_confirm(&claimed, &names(&gs));
        assert_eq!(asks.len(), 1, "{asks:?}");
        assert_eq!(asks[0].0.tag, "c1");
        assert_eq!(
            asks[0].1,
            ToConfirm {
                vpcs: vec!["vpc-1".into()],
                arns: vec![LB.into()],
            }
        );
    }
}
