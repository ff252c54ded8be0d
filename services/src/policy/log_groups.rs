//! The CloudWatch Logs group EKS writes the control-plane logs to (phase 2, `eks-log-group`,
//! opt-in, EKS only): `/aws/eks/<eksName>/cluster`. EKS creates it with no retention and never
//! deletes it. Logs are evidence (an incident, an audit), so the task never runs unless the
//! cluster names it. A group is deleted only when every one of these holds:
//! - the cluster is an EKS cluster (`PassRequest::eks`; otherwise nothing is looked at);
//! - its name is exactly `/aws/eks/<eksName>/cluster`, in the region of the cluster's session
//!   (CloudWatch Logs is regional: the session's client only sees that region's groups);
//! - it has no retention policy and no deletion protection: either means someone set it up to
//!   keep it, so it is theirs ([`decide`]);
//! - EKS reports the cluster gone (`DescribeCluster`: ResourceNotFound, [`by_eks`]). While EKS
//!   still reports a cluster of that name, the group is blocked (the teardown waits for EKS
//!   anyway: the network cannot go before); while EKS cannot be asked (a transient failure), it
//!   is blocked too, with the reason; any other failure to ask fails the locate step, so nothing
//!   is deleted either.

use super::{Eks, Verdict};

/// The only log group name ever deleted for EKS cluster `eks_name`.
pub fn control_plane_group(eks_name: &str) -> String {
    format!("/aws/eks/{eks_name}/cluster")
}

/// What DescribeLogGroups says of one group, as the rule needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogGroupFacts {
    pub name: String,
    pub retention_days: Option<i32>,
    pub deletion_protection: bool,
}

/// Whether a described group is the cluster's (`eks_name`), then [`by_eks`].
pub fn decide(g: &LogGroupFacts, eks_name: &str) -> Verdict {
    if g.name != control_plane_group(eks_name) {
        return Verdict::foreign("not the cluster's control-plane log group");
    }
    if g.retention_days.is_some() || g.deletion_protection {
        return Verdict::foreign(
            "a retention policy or deletion protection: someone keeps it, theirs",
        );
    }
    Verdict::Delete
}

/// The cluster's group (`eks_name`), once EKS has been asked: deleted only when it says gone.
pub fn by_eks(eks_name: &str, eks: Eks<'_>) -> Verdict {
    match eks {
        Eks::Gone => Verdict::Delete,
        Eks::Live { name, status } => Verdict::blocked(format!(
            "EKS still reports cluster {name} ({status}): its logs wait until it is gone"
        )),
        Eks::Unknown(failure) => Verdict::blocked(format!(
            "kept: EKS cannot be asked whether cluster {eks_name} is gone: {failure}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    fn d(name: &str, retention_days: Option<i32>, deletion_protection: bool) -> Verdict {
        let g = LogGroupFacts {
            name: name.into(),
            retention_days,
            deletion_protection,
        };
        decide(&g, "ns_ek1")
    }

    #[test]
    fn the_clusters_control_plane_group_without_retention_is_deleted_and_look_alikes_are_not() {
        table::check(&[
            (
                d("/aws/eks/ns_ek1/cluster", None, false),
                Delete,
                "the cluster's control-plane group, as EKS made it",
            ),
            (
                d("/aws/eks/ns_ek1/cluster", Some(30), false),
                Foreign,
                "a retention policy: someone keeps it",
            ),
            (
                d("/aws/eks/ns_ek1/cluster", None, true),
                Foreign,
                "deletion protection",
            ),
            (
                d("/aws/eks/ns_ek1/cluster-x", None, false),
                Foreign,
                "a prefix match is another group",
            ),
            (
                d("/aws/eks/ns_ek1-b/cluster", None, false),
                Foreign,
                "another cluster's",
            ),
            (
                d("/aws/eks/ns_ek1/application", None, false),
                Foreign,
                "not the control plane's",
            ),
        ]);
    }

    #[test]
    fn the_clusters_group_waits_until_eks_reports_the_cluster_gone() {
        let live = Eks::Live {
            name: "ns_ek1",
            status: "DELETING",
        };
        table::check(&[
            (by_eks("ns_ek1", Eks::Gone), Delete, "EKS says gone"),
            (
                by_eks("ns_ek1", live),
                Blocked,
                "a deleting cluster still exists",
            ),
            (
                by_eks("ns_ek1", Eks::Unknown("throttled")),
                Blocked,
                "EKS cannot be asked now",
            ),
        ]);
        assert_eq!(
            by_eks("ns_ek1", live),
            Verdict::blocked(
                "EKS still reports cluster ns_ek1 (DELETING): its logs wait until it is gone"
            ),
            "as reported today"
        );
        assert_eq!(
            by_eks("ns_ek1", Eks::Unknown("throttled")),
            Verdict::blocked("kept: EKS cannot be asked whether cluster ns_ek1 is gone: throttled"),
        );
    }
}
