//! EC2 instances. Phase 1: CAPA's (its tag is the describe's filter). Phase 2 (`instance`): the
//! phase-2 ownership rule, less the members of an Auto Scaling group (self-managed or an EKS
//! managed node group): terminating one only makes the group start another, and the group goes
//! with its own owner (CAPA's machine pools, EKS), so phase 2 takes only free-standing nodes, as
//! Karpenter makes. In either phase an instance already `shutting-down` waits for its
//! termination: nothing is asked of AWS for it, and the phase stays open until it is gone.

use super::{Candidate, Ownership, Verdict};

/// The tags an Auto Scaling group or an EKS managed node group puts on its members.
const GROUP_TAGS: [&str; 2] = ["aws:autoscaling:groupName", "eks:nodegroup-name"];

/// Phase 2, for an instance locating already found the cluster's (the tagging API's claim).
pub fn decide_found(c: &Candidate<'_>) -> Verdict {
    if c.tags.iter().any(|(k, _)| GROUP_TAGS.contains(k)) {
        return Verdict::keep("an Auto Scaling group's instance: left to its group");
    }
    Verdict::Delete
}

/// Phase 2, the whole rule for a described instance: the ownership rule, then [`decide_found`].
pub fn decide(own: &Ownership, c: &Candidate<'_>) -> Verdict {
    match own.decide(c) {
        Verdict::Delete => decide_found(c),
        other => other,
    }
}

/// Either phase, once the instance is a target: its state as the describe read it.
pub fn by_state(state: &str) -> Verdict {
    if state == "shutting-down" {
        Verdict::blocked("waiting for termination (shutting-down)")
    } else {
        Verdict::Delete
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    const CLOUD: (&str, &str) = ("kubernetes.io/cluster/c1", "owned");
    const CAPA: (&str, &str) = ("sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "owned");

    #[test]
    fn phase_two_takes_free_standing_nodes_and_leaves_group_members_to_their_group() {
        let own = Ownership::of("c1");
        let d = |t: &[(&str, &str)]| decide(&own, &Candidate::tagged(t));
        let asg = ("aws:autoscaling:groupName", "ng-1");
        let eks = ("eks:nodegroup-name", "ng-1");
        let karpenter = ("karpenter.sh/nodepool", "default");
        table::check(&[
            (d(&[CLOUD, karpenter]), Delete, "Karpenter's node"),
            (d(&[CLOUD, asg]), Keep, "an Auto Scaling group's member"),
            (d(&[CLOUD, eks]), Keep, "an EKS managed node group's member"),
            (d(&[CLOUD, CAPA]), Keep, "CAPA's: phase 1's"),
            (
                d(&[("kubernetes.io/cluster/c1", "shared")]),
                Foreign,
                "shared",
            ),
            (
                d(&[("kubernetes.io/cluster/c1-b", "owned")]),
                Foreign,
                "another cluster's",
            ),
            (
                decide_found(&Candidate::tagged(&[CLOUD, asg])),
                Keep,
                "claimed, in a group",
            ),
            (
                decide_found(&Candidate::tagged(&[CLOUD])),
                Delete,
                "claimed, free-standing",
            ),
        ]);
    }

    #[test]
    fn a_termination_under_way_waits() {
        table::check(&[
            (by_state("running"), Delete, "running"),
            (by_state("stopped"), Delete, "stopped"),
            (by_state("pending"), Delete, "pending"),
            (by_state("shutting-down"), Blocked, "terminating already"),
        ]);
    }
}
