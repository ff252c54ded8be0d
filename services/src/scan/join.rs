//! Grouping one (account, region)'s claimed resources by cluster name and joining them against
//! the names that are alive: what is an orphan candidate, what is held back and why. Pure.
//!
//! A name is never a candidate when a live object of the management cluster or a live EKS
//! cluster has it. Beyond the rule, a name is also held back when one of its resources
//! is claimed for a live (or not-ours) name too (two ownership tags on one resource): a teardown
//! of the dead name would delete what the other cluster still claims, so the scan keeps it and
//! says why.

use super::claims::Claim;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One resource the listing returned with at least one claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimedResource {
    pub arn: String,
    /// `service:type` (`prices::kind_of`).
    pub kind: String,
    pub claims: Vec<Claim>,
    /// Every tag the listing returned with it: the teardown's rules read them (`deleted_by`).
    pub tags: Vec<(String, String)>,
}

/// The names that are alive, and those the operator said are not ours.
#[derive(Clone, Copy, Debug)]
pub struct Liveness<'a> {
    /// Every name a live AWSCluster or AWSManagedControlPlane has (both CAPA's and the EKS one).
    pub objects: &'a BTreeSet<String>,
    /// The EKS clusters `eks:ListClusters` named.
    pub eks: &'a BTreeSet<String>,
    /// `--not-ours` and the annotation's names.
    pub not_ours: &'a BTreeSet<String>,
}

/// Why a name with resources is not a candidate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeldBack {
    /// A live AWSCluster / AWSManagedControlPlane has the name: its own teardown's business.
    LiveObject,
    /// `eks:ListClusters` names it.
    LiveEks,
    /// Marked not ours (another management cluster's): reported apart, never torn down.
    NotOurs,
    /// One of its resources is also claimed for this live or not-ours name.
    SharesWithLive(String),
}

/// An orphan candidate of one (account, region): the name and its resources, each with the
/// claims naming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grouped {
    pub cluster: String,
    pub resources: Vec<ClaimedResource>,
    /// Other candidate names claimed on the same resources (an EKS cluster's CAPA name and EKS
    /// name are one cluster: `teardown --cluster-name <capa> --eks-name <eks>`).
    pub also: BTreeSet<String>,
}

/// The join's answer for one (account, region).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Joined {
    pub candidates: Vec<Grouped>,
    /// Names with resources that are not candidates, and why; with their resource count.
    pub held: BTreeMap<String, (HeldBack, usize)>,
}

/// Why `name` is held back, if it is (checked in this order).
fn held(name: &str, live: &Liveness<'_>) -> Option<HeldBack> {
    if live.objects.contains(name) {
        Some(HeldBack::LiveObject)
    } else if live.eks.contains(name) {
        Some(HeldBack::LiveEks)
    } else if live.not_ours.contains(name) {
        Some(HeldBack::NotOurs)
    } else {
        None
    }
}

/// Groups `resources` by the names their claims make and joins them with `live`.
pub fn join(resources: &[ClaimedResource], live: &Liveness<'_>) -> Joined {
    let mut by_name: BTreeMap<&str, Vec<&ClaimedResource>> = BTreeMap::new();
    for r in resources {
        let names: BTreeSet<&str> = r.claims.iter().map(|c| c.cluster.as_str()).collect();
        for n in names {
            by_name.entry(n).or_default().push(r);
        }
    }
    let mut out = Joined::default();
    for (name, rs) in &by_name {
        if let Some(h) = held(name, live) {
            out.held.insert(name.to_string(), (h, rs.len()));
            continue;
        }
        let shared_live = rs
            .iter()
            .flat_map(|r| &r.claims)
            .map(|c| c.cluster.as_str())
            // A not-ours name counts too: deleting its resource would harm the other owner.
            .find(|other| other != name && held(other, live).is_some());
        if let Some(other) = shared_live {
            out.held.insert(
                name.to_string(),
                (HeldBack::SharesWithLive(other.to_string()), rs.len()),
            );
            continue;
        }
        let also = rs
            .iter()
            .flat_map(|r| &r.claims)
            .map(|c| c.cluster.clone())
            .filter(|other| other != name)
            .collect();
        out.candidates.push(Grouped {
            cluster: name.to_string(),
            resources: rs
                .iter()
                .map(|r| ClaimedResource {
                    arn: r.arn.clone(),
                    kind: r.kind.clone(),
                    claims: r
                        .claims
                        .iter()
                        .filter(|c| c.cluster == *name)
                        .cloned()
                        .collect(),
                    tags: r.tags.clone(),
                })
                .collect(),
            also,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::claims::claims;

    fn res(id: &str, tags: &[(&str, &str)]) -> ClaimedResource {
        ClaimedResource {
            arn: format!("arn:aws:ec2:us-east-1:111111111111:security-group/{id}"),
            kind: "ec2:security-group".into(),
            claims: claims(tags.iter().copied()),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn only_names_nothing_alive_has_are_candidates() {
        let resources = [
            res("sg-1", &[("kubernetes.io/cluster/dead", "owned")]),
            res("sg-2", &[("kubernetes.io/cluster/dead-2", "owned")]),
            res("sg-3", &[("kubernetes.io/cluster/live", "owned")]),
            res("sg-4", &[("kubernetes.io/cluster/eks-live", "owned")]),
            res("sg-5", &[("kubernetes.io/cluster/theirs", "owned")]),
            res("sg-6", &[("kubernetes.io/cluster/shared-only", "shared")]),
            res(
                "sg-7",
                &[
                    ("kubernetes.io/cluster/live", "owned"),
                    ("kubernetes.io/cluster/ghost", "owned"),
                ],
            ),
            res(
                "sg-8",
                &[
                    ("sigs.k8s.io/cluster-api-provider-aws/cluster/e1", "owned"),
                    ("kubernetes.io/cluster/ns_e1", "owned"),
                ],
            ),
            res("sg-9", &[("elbv2.k8s.aws/cluster", "live-b")]),
            res(
                "sg-10",
                &[
                    ("kubernetes.io/cluster/theirs", "owned"),
                    ("kubernetes.io/cluster/ghost-2", "owned"),
                ],
            ),
        ];
        let objects = set(&["live", "live-b"]);
        let eks = set(&["eks-live"]);
        let not_ours = set(&["theirs"]);
        let j = join(
            &resources,
            &Liveness {
                objects: &objects,
                eks: &eks,
                not_ours: &not_ours,
            },
        );
        let names: Vec<&str> = j.candidates.iter().map(|c| c.cluster.as_str()).collect();
        assert_eq!(
            names,
            ["dead", "dead-2", "e1", "ns_e1"],
            "live-prefixed names are their own"
        );
        assert_eq!(j.held["live"], (HeldBack::LiveObject, 2));
        assert_eq!(
            j.held["live-b"],
            (HeldBack::LiveObject, 1),
            "a controller's tag names it too"
        );
        assert_eq!(j.held["eks-live"], (HeldBack::LiveEks, 1));
        assert_eq!(j.held["theirs"], (HeldBack::NotOurs, 2));
        assert_eq!(
            j.held["ghost-2"],
            (HeldBack::SharesWithLive("theirs".into()), 1),
            "shares a resource with a not-ours name"
        );
        assert_eq!(
            j.held["ghost"],
            (HeldBack::SharesWithLive("live".into()), 1)
        );
        assert!(!j.held.contains_key("shared-only"), "shared claims nothing");
        let e1 = &j.candidates[2];
        assert_eq!(
            e1.also,
            set(&["ns_e1"]),
            "an EKS cluster's two names go together"
        );
        assert_eq!(e1.resources[0].claims.len(), 1, "only the claims naming it");
        assert_eq!(j.candidates[0].resources.len(), 1);
    }

    #[test]
    fn no_resources_no_candidates() {
        let empty = BTreeSet::new();
        let j = join(
            &[],
            &Liveness {
                objects: &empty,
                eks: &empty,
                not_ours: &empty,
            },
        );
        assert!(j.candidates.is_empty() && j.held.is_empty());
    }
}
