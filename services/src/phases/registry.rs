//! The one list of cleaners, in registry order. Which phase each runs in, its order there and
//! the task that selects it are its descriptor's (`cleaners::Descriptor`): the phases, the
//! phase-2 task names and the IAM actions are all derived from this list. Adding a resource kind:
//! write its cleaner module, add one line here (see services/README.md).

use super::runner::AnyCleaner;
use crate::cleaners::bootstrap_data::{
    BootstrapBucket, BootstrapObjects, BootstrapParameters, BootstrapSecrets,
};
use crate::cleaners::dns_records::DnsRecords;
use crate::cleaners::guardduty::{GuardDutyEndpoint, GuardDutyGroup};
use crate::cleaners::instance_profiles::InstanceProfiles;
use crate::cleaners::instance_state::InstanceStateQueue;
use crate::cleaners::instances::Instances;
use crate::cleaners::load_balancers::LoadBalancers;
use crate::cleaners::log_groups::LogGroups;
use crate::cleaners::oidc_providers::OidcProviders;
use crate::cleaners::security_groups::SecurityGroups;
use crate::cleaners::security_groups::eks::EksClusterSecurityGroup;
use crate::cleaners::{
    Descriptor, addresses::Addresses, internet_gateways::InternetGateways,
    launch_templates::LaunchTemplates, nat_gateways::NatGateways,
    network_interfaces::NetworkInterfaces, route_tables::RouteTables, shared_tags::SharedTags,
    snapshots::Snapshots, subnets::Subnets, target_groups::TargetGroups, volumes::Volumes,
    vpc_endpoints::VpcEndpoints, vpcs::Vpcs,
};
use crate::model::{GcTask, Phase, UnknownGcTask};
use std::str::FromStr;

/// Every cleaner, each phase's in the order of its own: within a phase, cleaners of equal order
/// run concurrently and task names are listed in this order.
fn all() -> Vec<Box<dyn AnyCleaner>> {
    vec![
        // Phase 1: everything CAPA owns that is not network: its instances, its API-server load
        // balancer, then its security groups (whatever the VPC).
        Box::new(Instances::CAPA_OWNED),
        Box::new(LoadBalancers::CAPA_OWNED),
        // The target groups CAPA made for its API-server load balancer, once it is gone.
        Box::new(TargetGroups::CAPA_OWNED),
        Box::new(SecurityGroups::CAPA_OWNED),
        // Phase 2: what the cloud provider, the LB controller, node provisioners and the VPC CNI
        // created.
        Box::new(DnsRecords),
        Box::new(LoadBalancers::TAGGED),
        Box::new(TargetGroups::TAGGED),
        Box::new(Instances::TAGGED),
        Box::new(LaunchTemplates),
        Box::new(InstanceProfiles),
        Box::new(OidcProviders),
        Box::new(LogGroups),
        // CAPA's own leftovers that no network holds: the EventBridgeInstanceState queue and
        // rule (by name, untagged).
        Box::new(InstanceStateQueue),
        // CAPA's bootstrap data the machines left (by CAPA's name prefix and tag key).
        Box::new(BootstrapSecrets),
        Box::new(BootstrapParameters),
        // Its S3 bucket, only the one the object names: reported, never deleted.
        Box::new(BootstrapObjects),
        Box::new(BootstrapBucket),
        Box::new(Volumes),
        Box::new(Snapshots),
        Box::new(NetworkInterfaces),
        Box::new(SecurityGroups::TAGGED),
        Box::new(EksClusterSecurityGroup),
        // Phase 3: the CAPA-managed network, in dependency order; each kind only where it carries
        // CAPA's ownership tag (security groups went in phase 1).
        Box::new(VpcEndpoints),
        Box::new(NatGateways),
        Box::new(Addresses),
        Box::new(InternetGateways),
        Box::new(RouteTables),
        // GuardDuty's managed endpoint, before the subnets its interfaces live in, and its group
        // once the endpoint is gone; only in a CAPA-managed VPC.
        Box::new(GuardDutyEndpoint),
        Box::new(Subnets),
        Box::new(GuardDutyGroup),
        Box::new(Vpcs),
        // Last, and only in a bring-your-own VPC: the cluster's `shared` tag removed, nothing
        // deleted.
        Box::new(SharedTags),
    ]
}

/// Every cleaner's descriptor, in registry order: what `gc plan`, the docs and the IAM policy's
/// test read instead of a table of their own.
pub fn descriptors() -> Vec<&'static Descriptor> {
    all().iter().map(|c| c.descriptor()).collect()
}

/// The cleaners of `phase` (phase 2's all of them, whatever the task selection: see [`phase2`]).
pub(crate) fn of(phase: Phase) -> Vec<Box<dyn AnyCleaner>> {
    all()
        .into_iter()
        .filter(|c| c.descriptor().phase == phase)
        .collect()
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

/// Phase 2's cleaners, limited to `tasks` when given (without, every task but the opt-in ones).
pub(crate) fn phase2(tasks: Option<&[GcTask]>) -> Vec<Box<dyn AnyCleaner>> {
    selected(Phase::Tagged, tasks)
}

/// The cleaners of `phase`, those with a task limited to `tasks` when given (without, every
/// task but the opt-in ones). A cleaner without a task always runs.
pub(crate) fn selected(phase: Phase, tasks: Option<&[GcTask]>) -> Vec<Box<dyn AnyCleaner>> {
    of(phase)
        .into_iter()
        .filter(|c| match (tasks, c.descriptor().task) {
            (Some(sel), Some(t)) => sel.contains(&t),
            (None, Some(t)) => !OPT_IN.contains(&t),
            _ => true,
        })
        .collect()
}

/// The task names the cleaners declare (phase 2's, then phase 3's `shared-tag`), in registry
/// order, each once.
pub fn tasks() -> Vec<GcTask> {
    let mut out: Vec<GcTask> = Vec::new();
    for t in descriptors().into_iter().filter_map(|d| d.task) {
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

    /// The descriptors say what the hand-written getters said before them: every phase's
    /// cleaners, their order, task and gating, exactly.
    #[test]
    fn every_phase_runs_its_cleaners_in_the_order_it_always_did() {
        type Row = (&'static str, u32, Option<&'static str>, bool, bool);
        let rows = |phase: Phase| -> Vec<Row> {
            of(phase)
                .iter()
                .map(|c| c.descriptor())
                .map(|d| {
                    let task = d.task.map(|t| t.name());
                    (d.kind, d.order, task, d.gates_later, d.holds_next_phase)
                })
                .collect()
        };
        // (kind, order, task, gates later, holds the next phase)
        assert_eq!(
            rows(Phase::CapaOwned),
            [
                ("instance", 10, None, true, true),
                ("load-balancer", 10, None, false, true),
                ("target-group", 15, None, false, true),
                ("security-group", 20, None, false, false),
            ]
        );
        assert_eq!(
            rows(Phase::Tagged),
            [
                ("dns-record", 5, Some("dns-record"), true, true),
                ("load-balancer", 10, Some("load-balancer"), false, true),
                ("target-group", 20, Some("target-group"), false, true),
                ("instance", 25, Some("instance"), true, true),
                ("launch-template", 25, Some("launch-template"), false, true),
                (
                    "instance-profile",
                    30,
                    Some("instance-profile"),
                    false,
                    true
                ),
                ("oidc-provider", 30, Some("oidc-provider"), false, true),
                ("log-group", 30, Some("eks-log-group"), false, true),
                (
                    "instance-state-queue",
                    30,
                    Some("instance-state-queue"),
                    false,
                    true
                ),
                ("bootstrap-secret", 30, Some("bootstrap-data"), false, true),
                (
                    "bootstrap-parameter",
                    30,
                    Some("bootstrap-data"),
                    false,
                    true
                ),
                (
                    "bootstrap-object",
                    30,
                    Some("bootstrap-data-s3"),
                    false,
                    true
                ),
                (
                    "bootstrap-bucket",
                    30,
                    Some("bootstrap-data-s3"),
                    false,
                    true
                ),
                ("volume", 25, Some("ebs-volume"), false, true),
                ("snapshot", 25, Some("ebs-snapshot"), false, true),
                ("network-interface", 30, Some("security-group"), false, true),
                ("security-group", 40, Some("security-group"), false, true),
                (
                    "security-group",
                    45,
                    Some("eks-security-group"),
                    false,
                    true
                ),
            ]
        );
        assert_eq!(
            rows(Phase::Network),
            [
                ("vpc-endpoint", 10, None, true, true),
                ("natgateway", 10, None, true, true),
                ("elastic-ip", 20, None, false, true),
                ("internet-gateway", 30, None, false, true),
                ("route-table", 40, None, false, true),
                ("vpc-endpoint", 45, None, true, true),
                ("subnet", 50, None, false, true),
                ("security-group", 60, None, false, true),
                ("vpc", 70, None, false, true),
                ("shared-tag", 80, Some("shared-tag"), false, true),
            ]
        );
        let services: Vec<(&str, &str)> = descriptors()
            .iter()
            .map(|d| (d.kind, d.service))
            .filter(|(_, s)| *s != "ec2")
            .collect();
        assert_eq!(
            services,
            [
                ("load-balancer", "elasticloadbalancing"),
                ("target-group", "elasticloadbalancing"),
                ("dns-record", "route53"),
                ("load-balancer", "elasticloadbalancing"),
                ("target-group", "elasticloadbalancing"),
                ("instance-profile", "iam"),
                ("oidc-provider", "iam"),
                ("log-group", "logs"),
                ("instance-state-queue", "sqs"),
                ("bootstrap-secret", "secretsmanager"),
                ("bootstrap-parameter", "ssm"),
                ("bootstrap-object", "s3"),
                ("bootstrap-bucket", "s3"),
            ],
            "every other kind is ec2's"
        );
    }

    #[test]
    fn task_selection_limits_phase_two() {
        let kinds = |t: Option<&[GcTask]>| {
            phase2(t)
                .iter()
                .map(|c| c.descriptor().kind)
                .collect::<Vec<_>>()
        };
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
                "instance-state-queue",
                "bootstrap-secret",
                "bootstrap-parameter",
                "bootstrap-object",
                "bootstrap-bucket",
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
                "instance-state-queue",
                "bootstrap-data",
                "bootstrap-data-s3",
                "ebs-volume",
                "ebs-snapshot",
                "security-group",
                "eks-security-group",
                "shared-tag"
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
                .chain(selected(Phase::Network, None).iter())
                .filter_map(|c| c.descriptor().task)
                .fold(Vec::new(), |mut v, t| {
                    if !v.contains(&t.name()) {
                        v.push(t.name());
                    }
                    v
                }),
            "the default set is what phases 2 and 3 run without a selection"
        );
    }

    #[test]
    fn unknown_or_empty_gc_task_names_the_value() {
        let e = "load-balancers".parse::<GcTask>().unwrap_err();
        assert!(e.to_string().contains("\"load-balancers\""), "{e}");
        assert_eq!(
            e.to_string(),
            "unknown GC task \"load-balancers\": expected one of dns-record, load-balancer, target-group, instance, launch-template, instance-profile, oidc-provider, eks-log-group, instance-state-queue, bootstrap-data, bootstrap-data-s3, ebs-volume, ebs-snapshot, security-group, eks-security-group, shared-tag"
        );
        let e = "".parse::<GcTask>().unwrap_err();
        assert!(e.to_string().contains("\"\""), "{e}");
    }
}
