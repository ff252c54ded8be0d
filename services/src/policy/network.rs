//! Phase 3: the network CAPA made for the cluster (VPC endpoints, NAT gateways, Elastic IPs,
//! internet gateways, route tables, subnets, then the VPC itself).
//!
//! - **Whose.** Only inside the cluster's CAPA-managed VPCs, those tagged
//!   `sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned`: a bring-your-own VPC is never
//!   one of them, so nothing in it is touched by phase 3. In those VPCs, a resource is the
//!   cluster's only with CAPA's tag ([`capa::decide`](super::capa::decide)), sent as the
//!   server's filter (`cleaners::vpc_owned`): a resource of the VPC without it is never asked
//!   for. Elastic IPs carry no VPC: CAPA's tag, plus those the VPC's CAPA-tagged NAT gateways
//!   hold.
//! - **When.** AWS deletes NAT gateways and VPC endpoints asynchronously: one already deleted (or,
//!   for an endpoint, rejected, failed, expired) is no longer a target; one `deleting` is blocked
//!   until it is gone ([`nat_gateway`], [`vpc_endpoint`]). An Elastic IP still associated waits
//!   for its NAT gateway, unless that gateway is deleted, when the stale association is removed
//!   first ([`elastic_ip`]). The VPC's main route table is left to go with the VPC
//!   ([`route_table`]).
//! - **Not at all, this pass.** Before phase 3 touches a VPC, whatever in it is not the
//!   cluster's and would keep it from being deleted ([`blocks_vpc`]) holds the whole phase: it is
//!   reported as a blocker, and none of the network is deleted until it is gone.

use super::Verdict;

/// A CAPA-tagged route table of the VPC: the main one goes with the VPC (it cannot be deleted
/// alone).
pub fn route_table(main: bool) -> Verdict {
    if main {
        Verdict::keep("the VPC's main route table: it goes with the VPC")
    } else {
        Verdict::Delete
    }
}

/// A CAPA-tagged NAT gateway of the VPC, by its state.
pub fn nat_gateway(state: Option<&str>) -> Verdict {
    match state {
        Some("deleted") => Verdict::keep("already deleted"),
        Some("deleting") => Verdict::blocked("waiting for the NAT gateway to be deleted"),
        _ => Verdict::Delete,
    }
}

/// Endpoint states that no longer hold anything (AWS writes them in any case).
pub fn endpoint_gone(state: Option<&str>) -> bool {
    matches!(
        state.map(str::to_ascii_lowercase).as_deref(),
        Some("deleted" | "rejected" | "failed" | "expired")
    )
}

/// A CAPA-tagged VPC endpoint of the VPC, by its state.
pub fn vpc_endpoint(state: Option<&str>) -> Verdict {
    if endpoint_gone(state) {
        return Verdict::keep("gone: it no longer holds anything");
    }
    if state.is_some_and(|s| s.eq_ignore_ascii_case("deleting")) {
        return Verdict::blocked("waiting for the VPC endpoint to be deleted");
    }
    Verdict::Delete
}

/// One of the cluster's Elastic IPs: its association, if any, and whether the NAT gateways of
/// the VPC that hold it are all deleted (`None`: no NAT gateway of the VPC holds it). The verdict,
/// and the association to remove before the release (left on the address by a NAT gateway that
/// is already deleted: LocalStack keeps it).
pub fn elastic_ip(association: Option<&str>, nat_gone: Option<bool>) -> (Verdict, Option<&str>) {
    match (association, nat_gone) {
        (None, _) => (Verdict::Delete, None),
        (Some(a), Some(true)) => (Verdict::Delete, Some(a)),
        (Some(a), _) => (
            Verdict::blocked(format!(
                "still associated ({a}); waiting for its NAT gateway"
            )),
            None,
        ),
    }
}

/// A resource found in one of the cluster's CAPA-managed VPCs before phase 3, as the blocker
/// check needs it. `capa_owned`: it carries CAPA's tag for the cluster.
#[derive(Clone, Copy, Debug)]
pub enum InVpc<'a> {
    /// A load balancer (either API) left by phases 1 and 2: an opted-out cluster's, another's.
    LoadBalancer,
    /// A live instance (pending, running, stopping, stopped).
    Instance,
    NatGateway {
        state: Option<&'a str>,
        capa_owned: bool,
    },
    /// A detached network interface; `nat_gateways`: it is a NAT gateway's or a VPC endpoint's
    /// (LocalStack reports those `available`), so it goes with the gateway or endpoint.
    DetachedInterface {
        nat_gateways: bool,
    },
    SecurityGroup {
        name: Option<&'a str>,
        capa_owned: bool,
    },
    VpcEndpoint {
        state: Option<&'a str>,
        capa_owned: bool,
    },
    Subnet {
        capa_owned: bool,
    },
    /// GuardDuty's managed endpoint or group, by `guardduty::endpoint` / `guardduty::group`:
    /// phase 3 deletes them, they hold nothing up.
    GuardDuty,
}

/// Whether `r` keeps its VPC from being deleted and is not phase 3's to delete: phase 1 has
/// removed CAPA's instances, API-server load balancer and security groups, phase 2 the
/// cluster's external resources (unless opted out or not selected), so what is left here is
/// someone else's and holds phase 3. Attached interfaces go with their instance or load
/// balancer, and a VPC's `default` security group with the VPC: neither blocks.
pub fn blocks_vpc(r: &InVpc<'_>) -> bool {
    match *r {
        InVpc::LoadBalancer | InVpc::Instance => true,
        InVpc::NatGateway { state, capa_owned } => state != Some("deleted") && !capa_owned,
        InVpc::DetachedInterface { nat_gateways } => !nat_gateways,
        InVpc::SecurityGroup { name, capa_owned } => name != Some("default") && !capa_owned,
        InVpc::VpcEndpoint { state, capa_owned } => !endpoint_gone(state) && !capa_owned,
        InVpc::Subnet { capa_owned } => !capa_owned,
        InVpc::GuardDuty => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    #[test]
    fn nat_gateways_and_endpoints_are_deleted_once_and_waited_for_while_deleting() {
        table::check(&[
            (nat_gateway(Some("available")), Delete, "a live NAT gateway"),
            (nat_gateway(Some("pending")), Delete, "a pending one"),
            (nat_gateway(None), Delete, "no state said"),
            (
                nat_gateway(Some("deleting")),
                Blocked,
                "deleting: waited for",
            ),
            (
                nat_gateway(Some("deleted")),
                Keep,
                "deleted: no longer a target",
            ),
            (vpc_endpoint(Some("available")), Delete, "a live endpoint"),
            (
                vpc_endpoint(Some("pendingAcceptance")),
                Delete,
                "pending acceptance",
            ),
            (vpc_endpoint(Some("pending")), Delete, "pending"),
            (
                vpc_endpoint(None),
                Delete,
                "an endpoint of unknown state is kept in view",
            ),
            (
                vpc_endpoint(Some("deleting")),
                Blocked,
                "deleting: waited for",
            ),
            (vpc_endpoint(Some("Deleting")), Blocked, "any case"),
        ]);
        for gone in ["deleted", "Deleted", "rejected", "failed", "expired"] {
            table::check(&[(vpc_endpoint(Some(gone)), Keep, gone)]);
            assert!(endpoint_gone(Some(gone)), "{gone}");
        }
        for live in ["available", "pendingAcceptance", "pending", "deleting"] {
            assert!(!endpoint_gone(Some(live)), "{live}");
        }
        assert!(
            !endpoint_gone(None),
            "an endpoint of unknown state is kept in view"
        );
        assert_eq!(
            nat_gateway(Some("deleting")),
            Verdict::blocked("waiting for the NAT gateway to be deleted"),
            "as reported today"
        );
        assert_eq!(
            vpc_endpoint(Some("deleting")),
            Verdict::blocked("waiting for the VPC endpoint to be deleted"),
        );
    }

    #[test]
    fn the_main_route_table_goes_with_the_vpc() {
        table::check(&[
            (route_table(false), Delete, "a subnet's route table"),
            (route_table(true), Keep, "the main one"),
        ]);
    }

    #[test]
    fn an_elastic_ip_waits_for_a_live_nat_gateway_and_sheds_a_deleted_ones_association() {
        let v = |a, n| elastic_ip(a, n).0;
        table::check(&[
            (v(None, None), Delete, "not associated"),
            (
                v(None, Some(false)),
                Delete,
                "not associated, its gateway live",
            ),
            (
                v(Some("eipassoc-1"), Some(true)),
                Delete,
                "its gateway deleted",
            ),
            (
                v(Some("eipassoc-1"), Some(false)),
                Blocked,
                "its gateway live",
            ),
            (
                v(Some("eipassoc-1"), None),
                Blocked,
                "associated with no NAT gateway of the VPC",
            ),
        ]);
        assert_eq!(
            elastic_ip(Some("eipassoc-1"), Some(true)).1,
            Some("eipassoc-1")
        );
        assert_eq!(elastic_ip(Some("eipassoc-1"), Some(false)).1, None);
        assert_eq!(elastic_ip(None, Some(true)).1, None);
        assert_eq!(
            v(Some("eipassoc-1"), None),
            Verdict::blocked("still associated (eipassoc-1); waiting for its NAT gateway"),
            "as reported today"
        );
    }

    #[test]
    fn what_is_not_the_clusters_and_holds_the_vpc_blocks_phase_3() {
        let rows: &[(InVpc<'_>, bool, &str)] = &[
            (
                InVpc::LoadBalancer,
                true,
                "a load balancer phases 1 and 2 left",
            ),
            (InVpc::Instance, true, "a live instance"),
            (
                InVpc::NatGateway {
                    state: Some("available"),
                    capa_owned: false,
                },
                true,
                "another's live NAT gateway",
            ),
            (
                InVpc::NatGateway {
                    state: Some("deleted"),
                    capa_owned: false,
                },
                false,
                "another's deleted NAT gateway",
            ),
            (
                InVpc::NatGateway {
                    state: Some("available"),
                    capa_owned: true,
                },
                false,
                "CAPA's: phase 3 deletes it",
            ),
            (
                InVpc::DetachedInterface {
                    nat_gateways: false,
                },
                true,
                "a detached interface",
            ),
            (
                InVpc::DetachedInterface { nat_gateways: true },
                false,
                "a NAT gateway's interface goes with it",
            ),
            (
                InVpc::SecurityGroup {
                    name: Some("web"),
                    capa_owned: false,
                },
                true,
                "another's security group",
            ),
            (
                InVpc::SecurityGroup {
                    name: Some("default"),
                    capa_owned: false,
                },
                false,
                "the VPC's default group goes with it",
            ),
            (
                InVpc::SecurityGroup {
                    name: Some("c1-node"),
                    capa_owned: true,
                },
                false,
                "CAPA's group",
            ),
            (
                InVpc::VpcEndpoint {
                    state: Some("available"),
                    capa_owned: false,
                },
                true,
                "another's endpoint",
            ),
            (
                InVpc::VpcEndpoint {
                    state: Some("rejected"),
                    capa_owned: false,
                },
                false,
                "another's endpoint, gone",
            ),
            (
                InVpc::VpcEndpoint {
                    state: Some("available"),
                    capa_owned: true,
                },
                false,
                "CAPA's endpoint: phase 3 deletes it",
            ),
            (
                InVpc::Subnet { capa_owned: false },
                true,
                "another's subnet",
            ),
            (InVpc::Subnet { capa_owned: true }, false, "CAPA's subnet"),
        ];
        for (r, want, row) in rows {
            assert_eq!(blocks_vpc(r), *want, "{row}: {r:?}");
        }
    }
}
