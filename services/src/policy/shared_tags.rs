//! Phase 3, task `shared-tag` (issue #44): the `kubernetes.io/cluster/<name>=shared` tag CAPA
//! (unmanaged subnets, `pkg/cloud/services/network/subnets.go`), the cloud provider and Karpenter's
//! users put on a bring-your-own network. Nobody removes it when the cluster goes (CAPA calls no
//! EC2 `DeleteTags` in its network service), and a subnet that collects one per cluster hits
//! AWS's 50-tag limit (CAPA#3074, CAPA#3947, kops#10769).
//!
//! The rule: a VPC, subnet or route table **untagged, never deleted**, when it is in the cluster's
//! bring-your-own VPC (its object's `spec.network.vpc.id`, not CAPA-tagged) and carries the
//! cluster's key with the value `shared`. Only that key goes; another cluster's key on the same
//! resource stays. `owned` is never untagged here (phase 2's, or a claim this rule does not
//! judge), nor anything CAPA-owned (CAPA's network: phase 3 deletes it whole). The call itself
//! (`ec2:DeleteTags` naming the key *and* the value `shared`) removes the tag only while its
//! value is still `shared`.

use super::{Candidate, Verdict, tags};

/// The verdict for one VPC, subnet or route table: `cloud_key` is `kubernetes.io/cluster/<name>`,
/// `capa_key` CAPA's ownership key for the cluster, `byo_vpcs` the cluster's bring-your-own VPCs.
pub fn decide(c: &Candidate<'_>, cloud_key: &str, capa_key: &str, byo_vpcs: &[String]) -> Verdict {
    if !c.vpc.is_some_and(|v| byo_vpcs.iter().any(|b| b == v)) {
        return Verdict::foreign("not in the cluster's bring-your-own VPC");
    }
    if tags::is_owned(c.tags.iter().copied(), capa_key) {
        return Verdict::keep("CAPA-owned: part of CAPA's network, never untagged");
    }
    match c
        .tags
        .iter()
        .find(|(k, _)| *k == cloud_key)
        .map(|(_, v)| *v)
    {
        Some(tags::SHARED) => Verdict::Untag,
        Some(tags::OWNED) => {
            Verdict::keep("the cluster's key is `owned`, not `shared`: not untagged")
        }
        Some(_) => Verdict::foreign("the cluster's key carries neither `shared` nor `owned`"),
        None => Verdict::foreign("no tag of the cluster"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    #[test]
    fn only_the_clusters_shared_key_in_its_own_byo_vpc_is_untagged() {
        let cloud = tags::cloud_key("c1");
        let capa = tags::capa_key("c1");
        let byo = ["vpc-byo".to_string()];
        let d = |t: &[(&str, &str)], vpc| decide(&Candidate { tags: t, vpc }, &cloud, &capa, &byo);
        let shared = (cloud.as_str(), "shared");
        let other = ("kubernetes.io/cluster/c2", "shared");
        let prefix = ("kubernetes.io/cluster/c1-b", "shared");
        table::check(&[
            (
                d(&[shared], Some("vpc-byo")),
                Untag,
                "the cluster's shared tag",
            ),
            (
                d(&[shared, other], Some("vpc-byo")),
                Untag,
                "with another cluster's shared key: only ours goes (the call names it)",
            ),
            (
                d(&[other], Some("vpc-byo")),
                Foreign,
                "another cluster's only",
            ),
            (
                d(&[prefix], Some("vpc-byo")),
                Foreign,
                "a name that extends ours",
            ),
            (
                d(&[(cloud.as_str(), "owned")], Some("vpc-byo")),
                Keep,
                "owned is not shared",
            ),
            (
                d(&[(cloud.as_str(), "Shared")], Some("vpc-byo")),
                Foreign,
                "values match exactly",
            ),
            (
                d(&[shared, (capa.as_str(), "owned")], Some("vpc-byo")),
                Keep,
                "CAPA's own network",
            ),
            (d(&[shared], Some("vpc-other")), Foreign, "another VPC"),
            (d(&[shared], None), Foreign, "no VPC known"),
            (d(&[], Some("vpc-byo")), Foreign, "untagged"),
        ]);
        let none: [String; 0] = [];
        assert_eq!(
            decide(
                &Candidate {
                    tags: &[shared],
                    vpc: Some("vpc-byo")
                },
                &cloud,
                &capa,
                &none
            ),
            Verdict::foreign("not in the cluster's bring-your-own VPC"),
            "a CAPA-managed network has no bring-your-own VPC"
        );
    }
}
