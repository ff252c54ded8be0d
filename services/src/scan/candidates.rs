//! The pure steps of a region's scan between the calls: which listed resources are claimed,
//! which of the candidates' resources are described, and how a joined name becomes a priced
//! candidate (or is dropped when all it had is gone).

use super::deleted_by::{DeletedBy, Seen, Teardown, TeardownClass, deleted_by};
use super::iam::{self, AccountIam};
use super::join::{ClaimedResource, Grouped, HeldBack};
use super::prices::CostTotal;
use super::sizing::{Described, Ids, Sized};
use super::targets::Names;
use super::{CandidateResource, HeldName, OrphanCandidate, Proof, Recovery, claims, prices};
use crate::locate::tagging::TaggedResource;
use std::collections::{BTreeMap, BTreeSet};

/// The listed resources whose tags claim a cluster name, then the account's IAM resources of
/// this region (once, should the tagging listing return a profile too).
pub(super) fn claimed(
    listed: &[TaggedResource],
    account_iam: Option<&AccountIam>,
    region: &str,
) -> Vec<ClaimedResource> {
    let mut claimed: Vec<ClaimedResource> = listed
        .iter()
        .filter_map(|r| {
            let found = claims::claims(r.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            (!found.is_empty()).then(|| ClaimedResource {
                arn: r.arn.to_string(),
                kind: prices::kind_of(&r.arn.service, &r.arn.resource),
                claims: found,
                tags: r.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            })
        })
        .collect();
    if let Some(i) = account_iam {
        let listed: BTreeSet<String> = claimed.iter().map(|r| r.arn.clone()).collect();
        claimed.extend(
            iam::claimed_in(i, region)
                .into_iter()
                .filter(|r| !listed.contains(&r.arn)),
        );
    }
    claimed
}

/// The candidates' resource ids a describe reads, by kind, sorted and once each. A live
/// cluster's resources are never described.
pub(super) fn ids_to_describe(candidates: &[Grouped]) -> Ids {
    let ids_of = |kind: &str| -> Vec<String> {
        let ids: BTreeSet<String> = candidates
            .iter()
            .flat_map(|g| &g.resources)
            .filter(|r| r.kind == kind)
            .filter_map(|r| r.arn.parse::<crate::arn::Arn>().ok())
            .map(|a| a.resource_id().to_string())
            .collect();
        ids.into_iter().collect()
    };
    Ids {
        volumes: ids_of("ec2:volume"),
        snapshots: ids_of("ec2:snapshot"),
        endpoints: ids_of("ec2:vpc-endpoint"),
        instances: ids_of("ec2:instance"),
        nat_gateways: ids_of("ec2:natgateway"),
    }
}

/// The resource id in an ARN (empty when it does not parse: then nothing was described).
fn resource_id(arn: &str) -> String {
    arn.parse::<crate::arn::Arn>()
        .map(|a| a.resource_id().to_string())
        .unwrap_or_default()
}

/// What the teardown's rules read beyond one candidate's own listing (`deleted_by`): the
/// region's live EKS clusters, each claimed resource with every claim it carries (a candidate
/// holds only its own name's), each candidate's teardown names, and the controller-tagged
/// resources placement confirmed in their cluster's VPCs (tag name, ARN).
pub(super) struct Judging<'a> {
    pub eks_live: &'a BTreeSet<String>,
    pub claimed: BTreeMap<&'a str, &'a ClaimedResource>,
    pub names: &'a BTreeMap<String, Names>,
    pub confirmed: &'a BTreeSet<(String, String)>,
}

impl Judging<'_> {
    /// What the teardown of `cluster`'s candidate does with `r`.
    fn deleted_by(
        &self,
        cluster: &str,
        region: &str,
        r: &ClaimedResource,
        state: Option<&str>,
    ) -> super::deleted_by::DeletedBy {
        let fallback = Names {
            tag: cluster.to_string(),
            capa: cluster.to_string(),
        };
        let names = self.names.get(cluster).unwrap_or(&fallback);
        // Both of the teardown's names decide the step (an EKS cluster's resource tagged by
        // CAPA with one name and by the cloud provider with the other is phase 1's or 3's).
        let all = self.claimed.get(r.arn.as_str()).copied().unwrap_or(r);
        let claims: Vec<claims::Claim> = all
            .claims
            .iter()
            .filter(|c| names.has(&c.cluster))
            .cloned()
            .collect();
        let tags: Vec<(&str, &str)> = r
            .tags
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let target = Teardown {
            cluster: &names.tag,
            capa_name: &names.capa,
            region,
            eks_live: self.eks_live,
        };
        let seen = Seen {
            kind: &r.kind,
            arn: &r.arn,
            claims: &claims,
            tags: &tags,
            state,
            in_cluster_vpcs: self.confirmed.contains(&(names.tag.clone(), r.arn.clone())),
        };
        deleted_by(&target, &seen)
    }
}

/// A joined name as a candidate: its resources the describes found gone dropped (terminated
/// instances and deleted NAT gateways are still listed for a while: not leaks), the rest
/// priced, counted by kind and by what recovers them (the teardown's own rules, `judging`).
/// `None` when nothing is left.
pub(super) fn priced(
    mut g: Grouped,
    account: &str,
    region: &str,
    sized: &Sized,
    judging: &Judging<'_>,
) -> Option<OrphanCandidate> {
    let is_gone = |arn: &str| sized.by_id.get(&resource_id(arn)).is_some_and(|d| d.gone);
    g.resources.retain(|r| !is_gone(&r.arn));
    if g.resources.is_empty() {
        return None;
    }
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut cost = CostTotal::default();
    let mut recovery = Recovery::default();
    let mut oldest: Option<i64> = None;
    let described = |r: &ClaimedResource| {
        sized
            .by_id
            .get(&resource_id(&r.arn))
            .cloned()
            .unwrap_or_default()
    };
    let mut bys: Vec<_> = g
        .resources
        .iter()
        .map(|r| {
            let d = described(r);
            let by = judging.deleted_by(&g.cluster, region, r, d.state.as_deref());
            (r, d, by)
        })
        .collect();
    hold_network(&mut bys);
    let resources = bys
        .into_iter()
        .map(|(r, d, by)| {
            let monthly = prices::monthly(&r.kind, region, &d.sizing);
            cost.add(&monthly);
            recovery.add(&by, &monthly);
            *by_kind.entry(r.kind.clone()).or_default() += 1;
            if let Some(t) = d.created {
                oldest = Some(oldest.map_or(t, |o| o.min(t)));
            }
            CandidateResource {
                arn: r.arn.clone(),
                kind: r.kind.clone(),
                proofs: r.claims.iter().map(Proof::from).collect(),
                created: d.created.map(rfc3339),
                sizing: d.sizing,
                monthly,
                deleted_by: by,
            }
        })
        .collect();
    Some(OrphanCandidate {
        cluster: g.cluster,
        account: account.into(),
        region: region.into(),
        resources_by_kind: by_kind,
        oldest: oldest.map(rfc3339),
        cost,
        recovery,
        also_named: g.also,
        resources,
    })
}

/// Phase 3 deletes CAPA's network only once nothing in the VPC blocks it (`policy::network::
/// blocks_vpc`): an instance the teardown keeps (an Auto Scaling group's) in one of the
/// candidate's CAPA VPCs holds the whole network, so no phase-3 resource is promised while one
/// does. (Instances are the one blocker whose VPC the scan reads; the others it cannot place.)
fn hold_network(bys: &mut [(&ClaimedResource, Described, DeletedBy)]) {
    let capa_vpcs: BTreeSet<String> = bys
        .iter()
        .filter(|(r, _, by)| r.kind == "ec2:vpc" && by.step == "phase 3")
        .map(|(r, _, _)| resource_id(&r.arn))
        .collect();
    let holder = bys.iter().find(|(r, d, by)| {
        r.kind == "ec2:instance"
            && !by.recovers()
            && d.vpc.as_ref().is_some_and(|v| capa_vpcs.contains(v))
    });
    let Some(holder) = holder.map(|(r, d, _)| (r.arn.clone(), d.vpc.clone().unwrap_or_default()))
    else {
        return;
    };
    for (_, _, by) in bys
        .iter_mut()
        .filter(|(_, _, by)| by.step == "phase 3" && by.recovers())
    {
        by.class = TeardownClass::NotDeleted;
        by.why = Some(format!(
            "phase 3 waits: {} in {} is kept by the teardown, and the network stays while it \
             runs; check it and delete it by hand if it is the cluster's",
            holder.0, holder.1
        ));
    }
}

/// The names held back, with why and how many resources they have.
pub(super) fn held_names(held: BTreeMap<String, (HeldBack, usize)>) -> Vec<HeldName> {
    held.into_iter()
        .map(|(cluster, (why, resources))| HeldName {
            cluster,
            why,
            resources,
        })
        .collect()
}

/// RFC 3339 of `secs` since the epoch.
fn rfc3339(secs: i64) -> String {
    aws_smithy_types::DateTime::from_secs(secs)
        .fmt(aws_smithy_types::date_time::Format::DateTime)
        .unwrap_or_else(|_| secs.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(arn: &str, kind: &str) -> ClaimedResource {
        ClaimedResource {
            arn: arn.into(),
            kind: kind.into(),
            claims: Vec::new(),
            tags: Vec::new(),
        }
    }

    fn group(resources: Vec<ClaimedResource>) -> Grouped {
        Grouped {
            cluster: "old".into(),
            resources,
            also: BTreeSet::new(),
        }
    }

    type Facts = (
        BTreeSet<String>,
        BTreeMap<String, Names>,
        BTreeSet<(String, String)>,
    );

    /// No live EKS cluster, no pair of names, nothing placement confirmed.
    fn nothing_else() -> Facts {
        Default::default()
    }

    const I1: &str = "arn:aws:ec2:us-east-1:111111111111:instance/i-1";
    const I2: &str = "arn:aws:ec2:us-east-1:111111111111:instance/i-2";
    const V1: &str = "arn:aws:ec2:us-east-1:111111111111:volume/vol-1";

    #[test]
    fn only_the_described_kinds_are_described_once_each() {
        let ids = ids_to_describe(&[
            group(vec![
                resource(I2, "ec2:instance"),
                resource(V1, "ec2:volume"),
            ]),
            group(vec![
                resource(I1, "ec2:instance"),
                resource(I2, "ec2:instance"),
                resource("arn:aws:ec2:us-east-1:111111111111:vpc/vpc-1", "ec2:vpc"),
                resource("not an arn", "ec2:snapshot"),
            ]),
        ]);
        assert_eq!(ids.instances, ["i-1", "i-2"]);
        assert_eq!(ids.volumes, ["vol-1"]);
        assert!(ids.snapshots.is_empty() && ids.endpoints.is_empty());
        assert!(ids.nat_gateways.is_empty());
    }

    #[test]
    fn gone_resources_are_dropped_and_a_name_with_nothing_left_is_no_candidate() {
        let gone = Described {
            gone: true,
            ..Default::default()
        };
        let there = Described {
            created: Some(0),
            ..Default::default()
        };
        let sized = Sized {
            by_id: BTreeMap::from([("i-1".to_string(), gone), ("i-2".to_string(), there)]),
            calls: BTreeMap::new(),
        };
        let table = [
            (vec![resource(I1, "ec2:instance")], None),
            (
                vec![resource(I1, "ec2:instance"), resource(I2, "ec2:instance")],
                Some(vec![I2]),
            ),
            // Never described (no describe for its kind): kept, unpriced beyond its kind.
            (vec![resource(V1, "ec2:volume")], Some(vec![V1])),
        ];
        for (resources, kept) in table {
            let (eks, names, confirmed) = nothing_else();
            let judging = Judging {
                eks_live: &eks,
                claimed: BTreeMap::new(),
                names: &names,
                confirmed: &confirmed,
            };
            let got = priced(
                group(resources),
                "111111111111",
                "us-east-1",
                &sized,
                &judging,
            );
            let arns = got.map(|c| c.resources.into_iter().map(|r| r.arn).collect::<Vec<_>>());
            let kept = kept.map(|k| k.into_iter().map(String::from).collect::<Vec<_>>());
            assert_eq!(arns, kept);
        }
    }

    #[test]
    fn a_candidate_counts_its_kinds_and_its_oldest_creation() {
        let sized = Sized {
            by_id: BTreeMap::from([
                (
                    "i-1".to_string(),
                    Described {
                        created: Some(200),
                        ..Default::default()
                    },
                ),
                (
                    "i-2".to_string(),
                    Described {
                        created: Some(100),
                        ..Default::default()
                    },
                ),
            ]),
            calls: BTreeMap::new(),
        };
        let (eks, names, confirmed) = nothing_else();
        let judging = Judging {
            eks_live: &eks,
            claimed: BTreeMap::new(),
            names: &names,
            confirmed: &confirmed,
        };
        let c = priced(
            group(vec![
                resource(I1, "ec2:instance"),
                resource(I2, "ec2:instance"),
                resource(V1, "ec2:volume"),
            ]),
            "111111111111",
            "us-east-1",
            &sized,
            &judging,
        )
        .unwrap();
        assert_eq!(c.resources_by_kind["ec2:instance"], 2);
        assert_eq!(c.resources_by_kind["ec2:volume"], 1);
        assert_eq!(c.oldest.as_deref(), Some(rfc3339(100).as_str()));
        assert_eq!(
            (c.account.as_str(), c.region.as_str()),
            ("111111111111", "us-east-1")
        );
    }

    fn tagged(arn: &str, kind: &str, tags: &[(&str, &str)]) -> ClaimedResource {
        ClaimedResource {
            arn: arn.into(),
            kind: kind.into(),
            claims: claims::claims(tags.iter().copied()),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn an_instance_the_teardown_keeps_in_capas_vpc_holds_the_whole_network() {
        let capa = ("sigs.k8s.io/cluster-api-provider-aws/cluster/old", "owned");
        let asg = [
            ("kubernetes.io/cluster/old", "owned"),
            ("aws:autoscaling:groupName", "old-nodes"),
        ];
        let vpc = "arn:aws:ec2:us-east-1:111111111111:vpc/vpc-1";
        let subnet = "arn:aws:ec2:us-east-1:111111111111:subnet/subnet-1";
        let (eks, names, confirmed) = nothing_else();
        let judging = Judging {
            eks_live: &eks,
            claimed: BTreeMap::new(),
            names: &names,
            confirmed: &confirmed,
        };
        for (in_vpc, held) in [("vpc-1", true), ("vpc-2", false)] {
            let sized = Sized {
                by_id: BTreeMap::from([(
                    "i-1".to_string(),
                    Described {
                        state: Some("running".into()),
                        vpc: Some(in_vpc.into()),
                        ..Default::default()
                    },
                )]),
                calls: BTreeMap::new(),
            };
            let c = priced(
                group(vec![
                    tagged(vpc, "ec2:vpc", &[capa]),
                    tagged(subnet, "ec2:subnet", &[capa]),
                    tagged(I1, "ec2:instance", &asg),
                ]),
                "111111111111",
                "us-east-1",
                &sized,
                &judging,
            )
            .unwrap();
            let by = |arn: &str| {
                c.resources
                    .iter()
                    .find(|r| r.arn == arn)
                    .map(|r| r.deleted_by.clone())
                    .unwrap()
            };
            assert!(
                !by(I1).recovers(),
                "an Auto Scaling group's instance is kept"
            );
            for net in [vpc, subnet] {
                assert_eq!(by(net).recovers(), !held, "{net}, instance in {in_vpc}");
                if held {
                    let why = by(net).why.unwrap_or_default();
                    assert!(
                        why.contains("phase 3 waits") && why.contains("i-1"),
                        "{why}"
                    );
                }
            }
        }
    }
}
