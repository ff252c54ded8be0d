//! Detached network interfaces that keep the cluster's security groups or subnets alive (phase
//! 2, with `security-group`: selecting the groups selects these). An interface is deleted only
//! when it is detached (`status=available`) and either
//! - it is in one of the security groups phase 2 deletes (left by deleted load balancers or
//!   nodes), or
//! - the VPC CNI tagged it `cluster.k8s.amazonaws.com/name=<name>` and the phase-2 rule
//!   ([`Ownership::decide`](super::Ownership::decide)) confirmed it in one of the cluster's VPCs.
//!
//! An interface in use (attached) is never touched: it goes with its owner (an instance, a load
//! balancer). Both conditions are sent as the Describe's filters ([`asked_for`], with
//! [`DETACHED`]), so what EC2 answers is the selection: one attached since locating is simply not
//! answered.

/// The status of a detached interface, the only kind this rule deletes.
pub const DETACHED: &str = "available";

/// The two selections asked for, each with the status filter [`DETACHED`]: interfaces in the
/// groups phase 2 deletes (`group-id`), and the VPC CNI's the phase-2 rule accepted
/// (`network-interface-id`). An empty selection asks for nothing.
pub fn asked_for<'a>(
    deleted_groups: &'a [String],
    cni: &'a [String],
) -> [(&'static str, &'a [String]); 2] {
    [("group-id", deleted_groups), ("network-interface-id", cni)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_detached_interfaces_of_deleted_groups_or_the_cnis_are_asked_for() {
        let groups = ["sg-ours".to_string()];
        let cni = ["eni-cni".to_string()];
        assert_eq!(
            DETACHED, "available",
            "EC2's status of an unattached interface"
        );
        // (groups phase 2 deletes, the CNI's confirmed, what is asked for)
        type Filters<'a> = [(&'a str, &'a [&'a str]); 2];
        let rows: [(&[String], &[String], Filters); 4] = [
            (
                &groups,
                &cni,
                [
                    ("group-id", &["sg-ours"]),
                    ("network-interface-id", &["eni-cni"]),
                ],
            ),
            (
                &groups,
                &[],
                [("group-id", &["sg-ours"]), ("network-interface-id", &[])],
            ),
            (
                &[],
                &cni,
                [("group-id", &[]), ("network-interface-id", &["eni-cni"])],
            ),
            (&[], &[], [("group-id", &[]), ("network-interface-id", &[])]),
        ];
        for (g, c, want) in rows {
            let got = asked_for(g, c);
            for ((name, values), (want_name, want_values)) in got.iter().zip(want) {
                assert_eq!(*name, want_name);
                assert_eq!(
                    values.iter().map(String::as_str).collect::<Vec<_>>(),
                    want_values,
                    "{g:?} {c:?}"
                );
            }
        }
    }
}
