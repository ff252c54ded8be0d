//! One idempotent teardown pass for a deleted CAPA `AWSCluster`: phase 1 (CAPA-owned instances and
//! API-server load balancer), phase 2 (what the cloud provider created, opt-out), phase 3 (the
//! CAPA-managed network). Everything is re-discovered from AWS on every pass, so the controller
//! just calls again until `done`.

pub mod registry;
mod request;
pub(crate) mod runner;
pub(crate) mod tagged;

// The model's types are part of a pass's interface (the controller builds clients and selects
// tasks), so they are reachable from here too.
pub use crate::model::{
    AwsClients, EksFacts, Failure, FailureKind, GcTask, Phase, PhaseReport, ResourceRef,
    UnknownGcTask,
};
pub use request::{PassReport, PassRequest};
pub use tagged::phase2_pass;

use crate::cleaners::{CleanCtx, CleanError, vpc_blockers, vpcs};
use crate::locate::inventory::Inventory;
use crate::locate::view::PassView;
use runner::{PhaseRun, run_phase};
use tracing::Instrument;

/// The IAM actions a pass calls beyond its cleaners' own (each cleaner's are in its
/// `Descriptor::iam_actions`): phase 2's locate step (the tagging scan, and the placement check of
/// the controllers' finds in the cluster's VPCs), the CAPA-managed VPCs looked up for phases 2
/// and 3, and phase 3's check for resources in them that are not the cluster's
/// (`vpc_blockers::blockers`). The session's `sts:GetCallerIdentity` needs no permission.
pub const PASS_IAM_ACTIONS: &[&str] = &[
    // phase 2's locate step
    "tag:GetResources",
    "elasticloadbalancing:DescribeLoadBalancers",
    "elasticloadbalancing:DescribeTargetGroups",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeNetworkInterfaces",
    // the CAPA-managed VPCs
    "ec2:DescribeVpcs",
    // phase 3's blockers
    "ec2:DescribeInstances",
    "ec2:DescribeNatGateways",
    "ec2:DescribeVpcEndpoints",
    "ec2:DescribeSubnets",
];

/// Runs one pass. Phase k+1 starts only when phase k left nothing and reported no error; later
/// phases are reported as not started. A dry run discovers all three phases and deletes nothing.
pub async fn teardown_pass(clients: &AwsClients, req: &PassRequest) -> PassReport {
    let span = tracing::info_span!("teardown_pass", cluster = %req.cluster_name, capa_cluster = %req.capa_name, dry_run = req.dry_run);
    match &clients.throttle {
        // Every call of the pass backs off with the session's account and region.
        Some(t) => {
            crate::throttle::scope(t.clone(), pass(clients, req))
                .instrument(span)
                .await
        }
        None => pass(clients, req).instrument(span).await,
    }
}

async fn pass(clients: &AwsClients, req: &PassRequest) -> PassReport {
    let mut phases = Vec::with_capacity(3);
    // This pass's shared listings, never the next pass's: each pass asks the world again.
    let view = PassView::default();
    let p1 = phase1(clients, req, &view).await;
    // Phase 2 waits for phase 1 except for what phase 2 itself may be holding up (CAPA's
    // security groups, used by the cloud provider's network interfaces); phase 3 waits for all.
    let go_on = req.dry_run || (p1.report.started && !p1.holds_next);
    phases.push(p1.report);
    // The CAPA-tagged VPCs, looked up once for phases 2 and 3 (phase 2 deletes no VPC). Neither
    // runs unless phase 1 lets phase 2 start.
    let capa_vpcs = if go_on {
        vpcs::capa_vpcs(clients, &req.capa_name).await
    } else {
        Ok(Vec::new())
    };

    if !go_on {
        phases.push(PhaseReport::not_started(Phase::Tagged));
    } else if !req.external_gc {
        // Opted out: phase 2 counts as run and empty, so the network phase is not held up.
        phases.push(PhaseReport::started(Phase::Tagged));
    } else {
        phases.push(tagged::phase2_in(clients, req, &capa_vpcs, &view).await);
    }

    let go_on = req.dry_run || phases.iter().all(PhaseReport::is_clear);
    if !go_on {
        phases.push(PhaseReport::not_started(Phase::Network));
    } else {
        let mut p3 = phase3(clients, req, &capa_vpcs, &view).await;
        if req.dry_run {
            drop_planned_blockers(&mut p3, &phases);
        }
        phases.push(p3);
    }

    let done = pass_done(&phases);
    tracing::info!(
        done,
        deleted = phases.iter().map(|p| p.deleted.len()).sum::<usize>(),
        remaining = phases.iter().map(|p| p.remaining.len()).sum::<usize>(),
        errors = phases.iter().map(|p| p.errors.len()).sum::<usize>(),
        "teardown pass finished"
    );
    PassReport { done, phases }
}

/// Phase 1: what CAPA's own tag marks, not network (no inventory, no VPCs: its cleaners ask by
/// the CAPA tag themselves).
async fn phase1(clients: &AwsClients, req: &PassRequest, view: &PassView) -> PhaseRun {
    let empty = Inventory::default();
    let ctx = CleanCtx {
        clients,
        cluster: &req.cluster_name,
        capa_cluster: &req.capa_name,
        inventory: &empty,
        vpc_ids: &[],
        byo_vpcs: &[],
        cluster_vpcs: &[],
        snapshot_volumes: req.ebs_snapshot,
        eks: req.eks.as_ref(),
        tasks: &[],
        external_dns_owner: None,
        s3_bucket: None,
        view,
        alternative_discovery: req.alternative_discovery,
    };
    let cleaners = registry::of(Phase::CapaOwned);
    run_phase(Phase::CapaOwned, &cleaners, &ctx, req.dry_run).await
}

/// In a dry run nothing was deleted, so what the earlier phases would delete is no blocker of
/// phase 3: those are dropped from its `blockers` (matched by id or as an ARN's last part).
fn drop_planned_blockers(p3: &mut PhaseReport, earlier: &[PhaseReport]) {
    let planned: Vec<&str> = earlier
        .iter()
        .flat_map(|p| p.planned.iter().map(|r| r.id.as_str()))
        .collect();
    p3.blockers.retain(|(r, _)| {
        !planned
            .iter()
            .any(|p| *p == r.id || p.ends_with(&format!("/{}", r.id)))
    });
}

/// Done only when a pass found nothing at all: the pass that deletes the last resources is not
/// done yet, the next one verifies. This catches resources a locate step missed (an eventually
/// consistent tagging API; LocalStack's tagging pagination dropping items under load).
fn pass_done(phases: &[PhaseReport]) -> bool {
    phases.iter().all(|p| {
        p.is_clear()
            && p.planned.is_empty()
            && p.planned_changes.is_empty()
            && p.deleted.is_empty()
            && p.untagged.is_empty()
    })
}

/// Phase 3: the CAPA-managed VPCs, unless something in them that is not ours would keep them
/// from being deleted. Then nothing of the network is touched: the report lists those
/// resources as `blockers`, none of them is deleted, and the next pass looks again. A dry run
/// plans the phase and lists the blockers too.
async fn phase3(
    clients: &AwsClients,
    req: &PassRequest,
    capa_vpcs: &Result<Vec<String>, CleanError>,
    view: &PassView,
) -> PhaseReport {
    let dry_run = req.dry_run;
    let empty = Inventory::default();
    let mut p3 = PhaseReport::started(Phase::Network);
    let vpc_ids: &[String] = match capa_vpcs {
        Ok(v) => v,
        Err(e) => {
            p3.errors.push(Failure::of(e));
            return p3;
        }
    };
    let blockers = if vpc_ids.is_empty() {
        Vec::new()
    } else {
        match vpc_blockers::blockers(clients, view, &req.capa_name, vpc_ids).await {
            Ok(b) => b,
            Err(e) => {
                p3.errors.push(Failure::of(&e));
                return p3;
            }
        }
    };
    if !blockers.is_empty() {
        tracing::warn!(blockers = ?blockers.iter().map(|(r, _)| r.to_string()).collect::<Vec<_>>(), "the CAPA-managed VPC holds resources the cluster does not own: phase 3 waits");
    }
    // The cluster's bring-your-own VPCs: its object's that are not CAPA-tagged (CAPA's own
    // test, `VPCSpec.IsUnmanaged`: an id is set and the VPC is not tagged owned for the
    // cluster). Only the `shared-tag` task looks at them, and only when phase 2 may run (an
    // opted-out cluster's network tags are left as they are).
    let byo_vpcs: Vec<String> = req
        .vpc_ids
        .iter()
        .filter(|v| !vpc_ids.contains(v))
        .cloned()
        .collect();
    let cleaners: Vec<_> = registry::selected(Phase::Network, req.tasks.as_deref())
        .into_iter()
        .filter(|c| req.external_gc || c.descriptor().task.is_none())
        .collect();
    if dry_run || blockers.is_empty() {
        let ctx = CleanCtx {
            clients,
            cluster: &req.cluster_name,
            capa_cluster: &req.capa_name,
            inventory: &empty,
            vpc_ids,
            byo_vpcs: &byo_vpcs,
            cluster_vpcs: &[],
            snapshot_volumes: false,
            eks: req.eks.as_ref(),
            tasks: &[],
            external_dns_owner: None,
            s3_bucket: None,
            view,
            alternative_discovery: req.alternative_discovery,
        };
        p3 = run_phase(Phase::Network, &cleaners, &ctx, dry_run)
            .await
            .report;
    }
    p3.blockers = blockers;
    p3
}

#[cfg(test)]
mod view_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AuditAction;

    fn r(kind: &str, id: &str) -> ResourceRef {
        ResourceRef {
            service: "ec2".into(),
            kind: kind.into(),
            id: id.into(),
        }
    }

    #[test]
    fn a_dry_run_drops_the_blockers_earlier_phases_would_delete() {
        let mut p1 = PhaseReport::started(Phase::CapaOwned);
        p1.planned.push(r("instance", "i-capa"));
        let mut p2 = PhaseReport::started(Phase::Tagged);
        p2.planned.push(r(
            "load-balancer",
            "arn:aws:elasticloadbalancing:us-east-1:0:loadbalancer/lb-1",
        ));
        let mut p3 = PhaseReport::started(Phase::Network);
        for (kind, id) in [
            ("instance", "i-capa"),
            ("load-balancer", "lb-1"),
            ("instance", "i-workload"),
            // Only a whole last part matches: "b-1" is not "lb-1".
            ("load-balancer", "b-1"),
        ] {
            p3.blockers.push((r(kind, id), "vpc-1".into()));
        }
        drop_planned_blockers(&mut p3, &[p1, p2]);
        let left: Vec<&str> = p3.blockers.iter().map(|(r, _)| r.id.as_str()).collect();
        assert_eq!(left, ["i-workload", "b-1"]);
    }

    #[test]
    fn a_pass_is_done_only_when_no_phase_found_anything() {
        let clear = || PhaseReport::started(Phase::Network);
        type Change = fn(&mut PhaseReport);
        let table: [(&str, Change, bool); 8] = [
            ("nothing found", |_| {}, true),
            ("not started", |p| p.started = false, false),
            ("deleted", |p| p.deleted.push(r("vpc", "vpc-1")), false),
            ("planned", |p| p.planned.push(r("vpc", "vpc-1")), false),
            (
                "planned change",
                |p| {
                    p.planned_changes
                        .push((r("vpc", "vpc-1"), AuditAction::Deleted))
                },
                false,
            ),
            (
                "untagged",
                |p| p.untagged.push((r("vpc", "vpc-1"), "k".into())),
                false,
            ),
            (
                "blocked",
                |p| p.blockers.push((r("subnet", "s-1"), "vpc-1".into())),
                false,
            ),
            (
                "remaining",
                |p| {
                    p.remaining
                        .push((r("vpc", "vpc-1"), Failure::waiting("subnets")))
                },
                false,
            ),
        ];
        for (what, change, done) in table {
            let mut p = clear();
            change(&mut p);
            assert_eq!(pass_done(&[clear(), p]), done, "{what}");
        }
    }
}
