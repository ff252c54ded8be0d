//! The one list of cleaners per phase, and so the one list of phase-2 task names. Adding a
//! resource kind: write its cleaner module, add one line here (see services/README.md).

use super::runner::Step;
use crate::cleaners::dns_records::DnsRecords;
use crate::cleaners::instance_profiles::InstanceProfiles;
use crate::cleaners::instances::{self, Instances};
use crate::cleaners::load_balancers::{LoadBalancers, Source};
use crate::cleaners::log_groups::LogGroups;
use crate::cleaners::oidc_providers::OidcProviders;
use crate::cleaners::security_groups::eks::EksClusterSecurityGroup;
use crate::cleaners::security_groups::{Scope, SecurityGroups};
use crate::cleaners::{
    addresses::Addresses, internet_gateways::InternetGateways, launch_templates::LaunchTemplates,
    nat_gateways::NatGateways, network_interfaces::NetworkInterfaces, route_tables::RouteTables,
    snapshots::Snapshots, subnets::Subnets, target_groups::TargetGroups, volumes::Volumes,
    vpc_endpoints::VpcEndpoints, vpcs::Vpcs,
};
use crate::model::{GcTask, UnknownGcTask};
use std::str::FromStr;

/// Phase 1: everything CAPA owns that is not network: its instances, its API-server load
/// balancer, then its security groups (whatever the VPC).
pub fn phase1() -> Vec<Box<dyn Step>> {
    vec![
        Box::new(Instances(instances::Scope::CapaOwned)),
        Box::new(LoadBalancers(Source::CapaOwned)),
        Box::new(SecurityGroups(Scope::CapaOwned)),
    ]
}

/// Tasks that run only when named (in `sweeper.dev/gc-tasks`), never by default (no annotation
/// means every other task, CAPA's rule). Deleting a volume loses data, snapshots are backups,
/// and an EKS control plane's logs are evidence.
pub const OPT_IN: [GcTask; 3] = [
    crate::cleaners::volumes::TASK,
    crate::cleaners::snapshots::TASK,
    crate::cleaners::log_groups::TASK,
];

/// The tasks CAPA's own gc knows (its `GCTask`: `load-balancer`, `target-group`,
/// `security-group`), so the only ones CAPA's tasks annotation may name: CAPA's AWSCluster
/// webhook refuses every update of an object whose annotation names another, and CAPA's gc calls
/// a nil function for one (issue #41). sweeper's other tasks live in its own annotation.
pub const CAPA: [GcTask; 3] = [
    crate::cleaners::load_balancers::TASK,
    crate::cleaners::target_groups::TASK,
    crate::cleaners::security_groups::TASK,
];

/// Phase 2: what the cloud provider, the LB controller, node provisioners and the VPC CNI
/// created, limited to `tasks` when given (without, every task but the opt-in ones).
pub fn phase2(tasks: Option<&[GcTask]>) -> Vec<Box<dyn Step>> {
    all_phase2()
        .into_iter()
        .filter(|c| match (tasks, c.task()) {
            (Some(sel), Some(t)) => sel.contains(&t),
            (None, Some(t)) => !OPT_IN.contains(&t),
            _ => true,
        })
        .collect()
}

fn all_phase2() -> Vec<Box<dyn Step>> {
    vec![
        Box::new(DnsRecords),
        Box::new(LoadBalancers(Source::External)),
        Box::new(TargetGroups),
        Box::new(Instances(instances::Scope::External)),
        Box::new(LaunchTemplates),
        Box::new(InstanceProfiles),
        Box::new(OidcProviders),
        Box::new(LogGroups),
        Box::new(Volumes),
        Box::new(Snapshots),
        Box::new(NetworkInterfaces),
        Box::new(SecurityGroups(Scope::External)),
        Box::new(EksClusterSecurityGroup),
    ]
}

/// Phase 3: the CAPA-managed network, in dependency order; each kind only where it carries
/// CAPA's ownership tag (security groups went in phase 1).
pub fn phase3() -> Vec<Box<dyn Step>> {
    vec![
        Box::new(VpcEndpoints),
        Box::new(NatGateways),
        Box::new(Addresses),
        Box::new(InternetGateways),
        Box::new(RouteTables),
        Box::new(Subnets),
        Box::new(Vpcs),
    ]
}

/// The task names phase 2's cleaners declare, in registry order, each once.
pub fn tasks() -> Vec<GcTask> {
    let mut out: Vec<GcTask> = Vec::new();
    for t in all_phase2().iter().filter_map(|c| c.task()) {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// The tasks phase 2 runs when no annotation selects any: every task but the opt-ins, in
/// registry order.
pub fn default_tasks() -> Vec<GcTask> {
    tasks()
        .into_iter()
        .filter(|t| !OPT_IN.contains(t))
        .collect()
}

// Here rather than beside `GcTask`: the valid names are whatever the registered cleaners declare,
// and the model must not depend on the registry.
impl FromStr for GcTask {
    type Err = UnknownGcTask;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let known = tasks();
        known
            .iter()
            .find(|t| t.name() == s)
            .copied()
            .ok_or_else(|| UnknownGcTask {
                given: s.to_string(),
                expected: known
                    .iter()
                    .map(GcTask::name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cleaners::{load_balancers, security_groups, target_groups};

    #[test]
    fn task_selection_limits_phase_two() {
        let kinds = |t: Option<&[GcTask]>| phase2(t).iter().map(|c| c.kind()).collect::<Vec<_>>();
        assert_eq!(
            kinds(None),
            [
                "dns-record",
                "load-balancer",
                "target-group",
                "instance",
                "launch-template",
                "instance-profile",
                "oidc-provider",
                "network-interface",
                "security-group",
                "security-group"
            ]
        );
        assert_eq!(kinds(Some(&[target_groups::TASK])), ["target-group"]);
        assert_eq!(
            kinds(Some(&[security_groups::TASK, load_balancers::TASK])),
            ["load-balancer", "network-interface", "security-group"]
        );
        assert!(kinds(Some(&[])).is_empty());
        assert!(!kinds(None).contains(&"volume"), "EBS volumes are opt-in");
        assert_eq!(kinds(Some(&[crate::cleaners::volumes::TASK])), ["volume"]);
    }

    #[test]
    fn gc_tasks_round_trip() {
        let names: Vec<&str> = tasks().iter().map(GcTask::name).collect();
        assert_eq!(
            names,
            [
                "dns-record",
                "load-balancer",
                "target-group",
                "instance",
                "launch-template",
                "instance-profile",
                "oidc-provider",
                "eks-log-group",
                "ebs-volume",
                "ebs-snapshot",
                "security-group",
                "eks-security-group"
            ]
        );
        for t in tasks() {
            assert_eq!(t.to_string().parse::<GcTask>(), Ok(t));
        }
    }

    #[test]
    fn capas_tasks_and_the_default_set_are_registered_tasks() {
        let names = |ts: &[GcTask]| ts.iter().map(GcTask::name).collect::<Vec<_>>();
        assert_eq!(
            names(&CAPA),
            ["load-balancer", "target-group", "security-group"],
            "exactly CAPA's GCTask values"
        );
        for t in CAPA {
            assert!(tasks().contains(&t) && !OPT_IN.contains(&t), "{t}");
        }
        let default = default_tasks();
        assert_eq!(default.len(), tasks().len() - OPT_IN.len());
        assert!(OPT_IN.iter().all(|t| !default.contains(t)));
        assert_eq!(
            names(&default),
            phase2(None)
                .iter()
                .filter_map(|c| c.task())
                .fold(Vec::new(), |mut v, t| {
                    if !v.contains(&t.name()) {
                        v.push(t.name());
                    }
                    v
                }),
            "the default set is what phase 2 runs without a selection"
        );
    }

    #[test]
    fn unknown_or_empty_gc_task_names_the_value() {
        let e = "load-balancers".parse::<GcTask>().unwrap_err();
        assert!(e.to_string().contains("\"load-balancers\""), "{e}");
        assert_eq!(
            e.to_string(),
            "unknown GC task \"load-balancers\": expected one of dns-record, load-balancer, target-group, instance, launch-template, instance-profile, oidc-provider, eks-log-group, ebs-volume, ebs-snapshot, security-group, eks-security-group"
        );
        let e = "".parse::<GcTask>().unwrap_err();
        assert!(e.to_string().contains("\"\""), "{e}");
    }
}
