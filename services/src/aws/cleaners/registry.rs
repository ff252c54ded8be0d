//! The one list of cleaners per phase. Adding a resource kind: write its module, add it here.

use super::load_balancers::{LoadBalancers, Source};
use super::security_groups::{Scope, SecurityGroups};
use super::{
    Cleaner, addresses::Addresses, instances::Instances, internet_gateways::InternetGateways,
    nat_gateways::NatGateways, network_interfaces::NetworkInterfaces, route_tables::RouteTables,
    subnets::Subnets, target_groups::TargetGroups, vpcs::Vpcs,
};
use crate::aws::teardown::GcTask;

/// Phase 1: CAPA-owned compute and the API-server load balancer.
pub fn phase1() -> Vec<Box<dyn Cleaner>> {
    vec![
        Box::new(Instances),
        Box::new(LoadBalancers(Source::CapaOwned)),
    ]
}

/// Phase 2: what the cloud provider created, limited to `tasks` when given.
pub fn phase2(tasks: Option<&[GcTask]>) -> Vec<Box<dyn Cleaner>> {
    let all: Vec<Box<dyn Cleaner>> = vec![
        Box::new(LoadBalancers(Source::External)),
        Box::new(TargetGroups),
        Box::new(NetworkInterfaces),
        Box::new(SecurityGroups(Scope::External)),
    ];
    all.into_iter()
        .filter(|c| match (tasks, c.task()) {
            (Some(sel), Some(t)) => sel.contains(&t),
            _ => true,
        })
        .collect()
}

/// Phase 3: the CAPA-managed network, in dependency order.
pub fn phase3() -> Vec<Box<dyn Cleaner>> {
    vec![
        Box::new(NatGateways),
        Box::new(Addresses),
        Box::new(InternetGateways),
        Box::new(RouteTables),
        Box::new(Subnets),
        Box::new(SecurityGroups(Scope::Vpc)),
        Box::new(Vpcs),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_selection_limits_phase_two() {
        let kinds = |t: Option<&[GcTask]>| phase2(t).iter().map(|c| c.kind()).collect::<Vec<_>>();
        assert_eq!(
            kinds(None),
            [
                "load-balancer",
                "target-group",
                "network-interface",
                "security-group"
            ]
        );
        assert_eq!(kinds(Some(&[GcTask::TargetGroup])), ["target-group"]);
        assert_eq!(
            kinds(Some(&[GcTask::SecurityGroup, GcTask::LoadBalancer])),
            ["load-balancer", "network-interface", "security-group"]
        );
        assert!(kinds(Some(&[])).is_empty());
    }
}
