//! Security groups. Phase 1: CAPA's own groups, in whatever VPC (CAPA-managed or brought by the
//! user), but never a VPC's `default` group, which AWS refuses to delete whatever its tags.
//! Phase 2: the phase-2 ownership rule, less EKS's cluster group (`aws:eks:cluster-name`): EKS
//! deletes it with the cluster. Only when it outlives the cluster (eksctl#5135) does the
//! `eks-security-group` task take it, see [`eks_candidate`]. Never "every group in the VPC":
//! ownership decides. A rule in another group of the account that names a deleted group is
//! revoked, that rule alone; the group holding it stays ([`referencing_rule`], carried out by
//! `cleaners::security_groups::refs`).

use super::{Candidate, Eks, Ownership, Verdict, capa, tags};

/// Phase 1: CAPA's own group, unless it is its VPC's default group.
pub fn decide_capa(c: &Candidate<'_>, group_name: Option<&str>, capa_key: &str) -> Verdict {
    if group_name == Some("default") {
        return Verdict::keep("a VPC's default group cannot be deleted");
    }
    capa::decide(c, capa_key)
}

/// Phase 2, for a group phase 2's locate step already found the cluster's (the tagging API's
/// claim): only EKS's own group is left out.
pub fn decide_found(c: &Candidate<'_>) -> Verdict {
    if tags::has_key(c.tags.iter().copied(), tags::EKS_CLUSTER_TAG) {
        return Verdict::keep("EKS's cluster security group: EKS deletes it with the cluster");
    }
    Verdict::Delete
}

/// Phase 2, the whole rule for a described group: the ownership rule, then [`decide_found`].
pub fn decide(own: &Ownership, c: &Candidate<'_>) -> Verdict {
    match own.decide(c) {
        Verdict::Delete => decide_found(c),
        other => other,
    }
}

/// The `eks-security-group` task's candidate, from its tags and VPC alone:
/// `aws:eks:cluster-name=<eks_name>` in one of the cluster's VPCs. What else it needs (no
/// interface uses it, EKS says the cluster is gone) takes AWS calls; the cleaner asks them and
/// keeps the group on any other answer.
pub fn eks_candidate(c: &Candidate<'_>, eks_name: &str, cluster_vpcs: &[String]) -> Verdict {
    if !tags::has(c.tags.iter().copied(), tags::EKS_CLUSTER_TAG, eks_name) {
        return Verdict::foreign("not EKS's cluster group for this cluster");
    }
    if !c.vpc.is_some_and(|v| cluster_vpcs.iter().any(|w| w == v)) {
        return Verdict::foreign("EKS's group for this name, outside the cluster's VPCs");
    }
    Verdict::Delete
}

/// EKS's cluster group, a candidate by [`eks_candidate`], once EKS has been asked about the
/// cluster (`eks`) and then, only when it says gone, whether a network interface uses the group
/// (`user`, one that does; attached or not: EKS's control-plane interfaces go with the cluster).
/// Anything but "gone and unused" keeps it, fail closed: phase 3 lists it as a blocker of the VPC.
pub fn eks_group(eks: Eks<'_>, user: Option<&str>) -> Verdict {
    match (eks, user) {
        (Eks::Live { .. }, _) => {
            Verdict::keep("EKS still reports the cluster: its security group is EKS's to delete")
        }
        (Eks::Unknown(_), _) => Verdict::keep(
            "EKS cannot be asked whether the cluster is gone: kept (a blocker of the VPC)",
        ),
        (Eks::Gone, Some(eni)) => Verdict::keep(format!(
            "EKS's cluster security group is still used by network interface {eni}"
        )),
        (Eks::Gone, None) => Verdict::Delete,
    }
}

/// A rule of group `holder` naming group `named` (one `UserIdGroupPair`, whose account is
/// `pair_account` when the pair says), for the groups sweeper deletes in this pass: revoked
/// (`Delete`) only when `named` is one of them (`deleting`), the rule is in another group, and
/// the pair does not name another account than the session's (`account`, when known). The group
/// holding the rule is never deleted for it, and its other rules stay: the revoke names this
/// pair alone. A rule naming a group sweeper keeps is never touched.
pub fn referencing_rule(
    holder: &str,
    named: &str,
    deleting: bool,
    pair_account: Option<&str>,
    account: Option<&str>,
) -> Verdict {
    if !deleting {
        return Verdict::foreign("names a group sweeper does not delete");
    }
    if holder == named {
        return Verdict::keep("a group's rule naming itself goes with the group");
    }
    if let (Some(p), Some(a)) = (pair_account, account)
        && p != a
    {
        return Verdict::foreign("names a group of another account");
    }
    Verdict::Delete
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    const CLOUD: (&str, &str) = ("kubernetes.io/cluster/c1", "owned");
    const CAPA: (&str, &str) = ("sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "owned");
    const LBC: (&str, &str) = ("elbv2.k8s.aws/cluster", "c1");
    const EKS: (&str, &str) = ("aws:eks:cluster-name", "c1");

    #[test]
    fn phase_one_takes_capas_groups_but_never_a_default_group() {
        let capa = tags::capa_key("c1");
        let d = |t: &[(&str, &str)], name| decide_capa(&Candidate::tagged(t), name, &capa);
        table::check(&[
            (d(&[CAPA], Some("c1-node")), Delete, "CAPA's node group"),
            (
                d(&[CAPA], Some("default")),
                Keep,
                "a default group, whatever its tags",
            ),
            (
                d(&[CLOUD], Some("k8s-elb")),
                Foreign,
                "the cloud provider's: phase 2's",
            ),
            (
                d(
                    &[("sigs.k8s.io/cluster-api-provider-aws/cluster/c2", "owned")],
                    None,
                ),
                Foreign,
                "another cluster's",
            ),
        ]);
    }

    #[test]
    fn phase_two_leaves_capas_and_ekss_groups_and_twins_in_other_vpcs() {
        let own = Ownership::of("c1").with_vpcs(vec!["vpc-1".into()]);
        let d = |tags: &[(&str, &str)], vpc| decide(&own, &Candidate { tags, vpc });
        let found = |tags: &[(&str, &str)]| decide_found(&Candidate::tagged(tags));
        table::check(&[
            (
                d(&[CLOUD], Some("vpc-1")),
                Delete,
                "a load balancer's group (the cloud provider's)",
            ),
            (
                d(&[LBC], Some("vpc-1")),
                Delete,
                "the LB controller's shared backend group",
            ),
            (d(&[LBC], Some("vpc-2")), Foreign, "a twin in another VPC"),
            (d(&[CLOUD, CAPA], None), Keep, "CAPA's"),
            (d(&[CLOUD, EKS], None), Keep, "EKS's cluster group"),
            (
                d(&[LBC, EKS], Some("vpc-1")),
                Keep,
                "EKS's, with the controller's tag",
            ),
            (found(&[CLOUD]), Delete, "claimed from the tagging API"),
            (
                found(&[CLOUD, EKS]),
                Keep,
                "EKS's, claimed from the tagging API",
            ),
        ]);
    }

    #[test]
    fn ekss_group_is_a_candidate_only_for_the_cluster_in_its_vpcs() {
        let vpcs = ["vpc-1".to_string()];
        let d = |tags: &[(&str, &str)], vpc, vpcs: &[String]| {
            eks_candidate(&Candidate { tags, vpc }, "ns_ek1", vpcs)
        };
        let eks = [(tags::EKS_CLUSTER_TAG, "ns_ek1")];
        table::check(&[
            (
                d(&eks, Some("vpc-1"), &vpcs),
                Delete,
                "EKS's tag naming the cluster, in its VPC",
            ),
            (
                d(&eks, Some("vpc-2"), &vpcs),
                Foreign,
                "the same EKS name in another VPC",
            ),
            (
                d(&[(tags::EKS_CLUSTER_TAG, "ns_ek1-b")], Some("vpc-1"), &vpcs),
                Foreign,
                "another EKS cluster's",
            ),
            (
                d(
                    &[("kubernetes.io/cluster/ns_ek1", "owned")],
                    Some("vpc-1"),
                    &vpcs,
                ),
                Foreign,
                "not EKS's",
            ),
            (d(&eks, None, &vpcs), Foreign, "no VPC"),
            (
                d(&eks, Some("vpc-1"), &[]),
                Foreign,
                "the cluster's VPC unknown",
            ),
        ]);
    }

    #[test]
    fn only_rules_naming_a_group_being_deleted_are_revoked_and_only_in_other_groups() {
        let r = referencing_rule;
        table::check(&[
            (
                r("sg-bastion", "sg-x", true, None, Some("111")),
                Delete,
                "a user's group naming ours",
            ),
            (
                r("sg-bastion", "sg-x", true, Some("111"), Some("111")),
                Delete,
                "the pair names our account",
            ),
            (
                r("sg-bastion", "sg-y", false, None, Some("111")),
                Foreign,
                "names a group that is not deleted",
            ),
            (r("sg-x", "sg-x", true, None, None), Keep, "its own rule"),
            (
                r("sg-bastion", "sg-x", true, Some("222"), Some("111")),
                Foreign,
                "another account's group of that id",
            ),
            (
                r("sg-bastion", "sg-x", true, Some("222"), None),
                Delete,
                "the session's account unknown (tests): the id decides",
            ),
        ]);
    }

    #[test]
    fn ekss_group_goes_only_once_eks_says_gone_and_no_interface_uses_it() {
        let live = Eks::Live {
            name: "ns_ek1",
            status: "DELETING",
        };
        table::check(&[
            (eks_group(Eks::Gone, None), Delete, "gone, unused"),
            (
                eks_group(Eks::Gone, Some("eni-1")),
                Keep,
                "gone, an interface uses it",
            ),
            (eks_group(live, None), Keep, "EKS still reports the cluster"),
            (
                eks_group(Eks::Unknown("AccessDenied"), None),
                Keep,
                "EKS cannot be asked: fail closed",
            ),
        ]);
    }
}
