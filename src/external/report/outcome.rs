//! What one teardown pass's report means for the cluster object, decided without I/O: the
//! condition to set, the Events to emit, and when to look again ([`of`]); the dry run's one-line
//! summary; the phase `sweeper status` shows. The controller (external::controller) makes the calls.

use crate::engine::finalizer_controller::Pass;
use crate::external::core::conditions::Severity;
use std::time::Duration;
use sweeper_aws::phases::PassReport;

/// The decision for a pass that deleted (not a dry run).
pub struct PassOutcome {
    /// The condition: done, or why not (severity and reason), with `message`.
    pub done: bool,
    pub severity: Severity,
    pub reason: &'static str,
    pub message: String,
    /// Warning Events `(reason, note)`, emitted only when the condition changed.
    pub warnings: Vec<(&'static str, String)>,
    /// Normal Events emitted as they happen: what a delete left to know (the snapshot a volume
    /// was kept in).
    pub notes: Vec<String>,
    /// Warning Events `(reason, note)` emitted with this pass whatever the condition: what the
    /// pass found and left for the user (external-dns records of the load balancers it deleted).
    pub warnings_now: Vec<(&'static str, String)>,
    /// For the log line: resources deleted this pass, and remaining or failed.
    pub deleted: usize,
    pub left: usize,
    /// What the engine does next.
    pub pass: Pass,
}

/// The decision for `report`, the pass of cluster `cluster_name` in session `place`.
pub fn of(report: &PassReport, cluster_name: &str, place: &str) -> PassOutcome {
    let tally = Tally::of(report);
    let notes = report
        .phases
        .iter()
        .flat_map(|p| p.notes.iter().cloned())
        .collect();
    let left = tally.errors.len() + tally.remaining.len();
    let warnings_now = records_left(report).into_iter().collect::<Vec<_>>();
    if report.done {
        return PassOutcome {
            done: true,
            severity: Severity::Info,
            reason: "Deleted",
            message: format!("all AWS resources of cluster {cluster_name} are deleted ({place})"),
            warnings: Vec::new(),
            notes,
            warnings_now,
            deleted: tally.deleted,
            left,
            pass: Pass::Done {
                note: format!("AWS teardown of {cluster_name} finished ({place})"),
            },
        };
    }
    let message = format!("{} ({place})", tally.summary());
    // Failures are retried with backoff, so they are Warnings, not Errors (which CAPI reserves
    // for what does not fix itself).
    let (severity, reason) = if tally.errors.is_empty() {
        (Severity::Info, "Deleting")
    } else {
        (Severity::Warning, "DeletionFailed")
    };
    let mut warnings = Vec::new();
    if !tally.errors.is_empty() {
        warnings.push(("ExternalResourcesDeletionFailed", message.clone()));
    }
    if !tally.blockers.is_empty() {
        warnings.push(("VpcDeletionBlocked", tally.blocked_vpcs()));
    }
    let (phase, detail) = phase_of(report);
    PassOutcome {
        done: false,
        severity,
        reason,
        message,
        warnings,
        notes,
        warnings_now,
        deleted: tally.deleted,
        left,
        pass: Pass::Left {
            phase,
            detail: format!("{detail}; {place}"),
            // Progress: look again soon; none: give AWS time.
            after: Duration::from_secs(if tally.deleted > 0 { 1 } else { 5 }),
        },
    }
}

/// A setting that is wrong but holds nothing (an invalid `sweeper.dev/external-dns-owner-id`:
/// records reported, not deleted): said first in the condition, as a Warning Event
/// `InvalidConfiguration` (emitted when the condition changes, like the other warnings), and as
/// the condition's reason while the teardown has nothing worse to say. Done stays done.
pub fn with_config_problem(mut out: PassOutcome, problem: &str) -> PassOutcome {
    out.message = format!("{problem}; {}", out.message);
    out.warnings
        .push(("InvalidConfiguration", problem.to_string()));
    if !out.done && out.reason == "Deleting" {
        out.severity = Severity::Warning;
        out.reason = "InvalidConfiguration";
    }
    out
}

/// The `ExternalDnsRecordsLeft` Warning: once per pass that deletes something (the load
/// balancers such records point at go in such a pass), not on every pass of a long teardown.
fn records_left(report: &PassReport) -> Option<(&'static str, String)> {
    // Only the records: the other reported kinds (CAPA's S3 bootstrap data, a look-alike
    // instance-state pair, bootstrap data of another name) are in `gc plan` and the audit record,
    // and are not external-dns's.
    let dns = sweeper_aws::cleaners::dns_records::DESCRIPTOR.kind;
    let kept: Vec<&str> = report
        .phases
        .iter()
        .flat_map(|p| p.kept.iter())
        .filter(|(r, _)| r.kind == dns)
        .map(|(_, why)| why.as_str())
        .collect();
    let deleted = report.phases.iter().any(|p| !p.audit.is_empty());
    if kept.is_empty() || !deleted {
        return None;
    }
    let mut note = kept.join("; ");
    // An Event's note holds at most 1 KiB; the audit record has every entry.
    if note.len() > 1000 {
        let mut end = 960;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str(&format!("… ({} in all; see the audit record)", kept.len()));
    }
    Some(("ExternalDnsRecordsLeft", note))
}

/// A dry run's summary in one line (the condition's message, the `DryRunPlan` Event's note): how
/// many resources each phase would delete, then the first of them (a condition message must stay
/// readable), and what blocks the network.
pub fn dry_run_summary(report: &PassReport) -> String {
    const SHOWN: usize = 20;
    let planned: Vec<String> = report
        .phases
        .iter()
        .flat_map(|p| &p.planned)
        .map(|r| format!("{} {} {}", r.service, r.kind, r.id))
        .collect();
    let per_phase: Vec<String> = report
        .phases
        .iter()
        .map(|p| format!("phase {}: {}", p.phase, p.planned.len()))
        .collect();
    let mut out = format!(
        "dry run: would delete {} AWS resource(s) ({})",
        planned.len(),
        per_phase.join(", ")
    );
    if !planned.is_empty() {
        out.push_str(": ");
        out.push_str(&planned[..planned.len().min(SHOWN)].join(", "));
        if planned.len() > SHOWN {
            out.push_str(&format!(", and {} more", planned.len() - SHOWN));
        }
    }
    let blockers: Vec<String> = report
        .phases
        .iter()
        .flat_map(|p| &p.blockers)
        .map(|(r, vpc)| format!("{} {} {} holds {vpc}", r.service, r.kind, r.id))
        .collect();
    if !blockers.is_empty() {
        out.push_str(&format!(
            "; kept (not the cluster's): {}",
            blockers.join(", ")
        ));
    }
    out
}

/// What one pass did, read from its report.
struct Tally {
    deleted: usize,
    remaining: Vec<String>,
    errors: Vec<String>,
    /// Resources the cluster does not own that keep its VPC from being deleted: `(what, vpc)`.
    blockers: Vec<(String, String)>,
}

impl Tally {
    fn of(report: &PassReport) -> Tally {
        let mut t = Tally {
            deleted: 0,
            remaining: Vec::new(),
            errors: Vec::new(),
            blockers: Vec::new(),
        };
        for p in &report.phases {
            t.deleted += p.deleted.len();
            for (r, why) in &p.remaining {
                t.remaining
                    .push(format!("phase {}: {} {} ({why})", p.phase, r.kind, r.id));
            }
            t.errors
                .extend(p.errors.iter().map(|e| format!("phase {}: {e}", p.phase)));
            for (r, vpc) in &p.blockers {
                t.remaining.push(format!(
                    "phase {}: {} {} (not the cluster's; blocks deleting {vpc})",
                    p.phase, r.kind, r.id
                ));
                t.blockers
                    .push((format!("{} {}", r.kind, r.id), vpc.clone()));
            }
        }
        t
    }

    /// The Warning Event's text: per VPC, what blocks it.
    fn blocked_vpcs(&self) -> String {
        let mut by_vpc: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for (what, vpc) in &self.blockers {
            by_vpc.entry(vpc).or_default().push(what);
        }
        by_vpc
            .into_iter()
            .map(|(vpc, what)| {
                format!(
                    "VPC {vpc} cannot be deleted until these resources, which the cluster does not \
                     own and sweeper will not delete, are gone: {}",
                    what.join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The condition message: errors first, then what is left, at most ten.
    fn summary(&self) -> String {
        let mut left: Vec<String> = self
            .errors
            .iter()
            .chain(self.remaining.iter())
            .take(10)
            .cloned()
            .collect();
        let all = self.errors.len() + self.remaining.len();
        if all > left.len() {
            left.push(format!("… and {} more", all - left.len()));
        }
        if left.is_empty() {
            "teardown in progress".to_string()
        } else {
            left.join("; ")
        }
    }
}

/// The phase a pass stopped in (the last one started), for `sweeper status`.
pub fn phase_of(report: &PassReport) -> (String, String) {
    if report.done {
        return ("done".into(), "every phase finished".into());
    }
    match report.phases.iter().rev().find(|p| p.started) {
        Some(p) => (
            format!("phase {}: {}", p.phase, p.phase.name()),
            format!(
                "{} deleted this pass, {} remaining, {} errors",
                p.deleted.len(),
                p.remaining.len(),
                p.errors.len()
            ),
        ),
        None => ("starting".into(), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweeper_aws::phases::{Phase, PhaseReport, ResourceRef};

    fn r(kind: &str, id: &str) -> ResourceRef {
        ResourceRef {
            service: "ec2".into(),
            kind: kind.into(),
            id: id.into(),
        }
    }

    fn report(done: bool, phase2: PhaseReport) -> PassReport {
        let mut p1 = PhaseReport::started(Phase::CapaOwned);
        p1.deleted.push(r("instance", "i-1"));
        PassReport {
            done,
            phases: vec![p1, phase2],
        }
    }

    #[test]
    fn only_external_dns_records_left_make_the_records_warning() {
        let mut p2 = PhaseReport::started(Phase::Tagged);
        // A pass that deletes something: the only kind that warns.
        p2.audit.push(sweeper_aws::model::Audited {
            resource: r("load-balancer", "lb-1"),
            action: sweeper_aws::model::AuditAction::Deleted,
            detail: String::new(),
            tags: None,
        });
        p2.kept.push((
            ResourceRef {
                service: "s3".into(),
                kind: "bootstrap-object".into(),
                id: "arn:aws:s3:::capa-boot/node/m1".into(),
            },
            "reported, never deleted".into(),
        ));
        let out = of(&report(false, p2.clone()), "c1", "here");
        assert!(
            out.warnings_now.is_empty(),
            "CAPA's S3 data is not an external-dns record: {:?}",
            out.warnings_now
        );
        p2.kept.push((
            ResourceRef {
                service: "route53".into(),
                kind: "dns-record".into(),
                id: "Z1/a.example.com./A".into(),
            },
            "owner id not named".into(),
        ));
        let out = of(&report(false, p2), "c1", "here");
        assert_eq!(out.warnings_now.len(), 1);
        assert_eq!(out.warnings_now[0].0, "ExternalDnsRecordsLeft");
        assert_eq!(out.warnings_now[0].1, "owner id not named");
    }

    #[test]
    fn a_finished_teardown_is_done_with_no_warning() {
        let out = of(
            &report(true, PhaseReport::started(Phase::Tagged)),
            "c1",
            "us-east-1/000",
        );
        assert!(out.done);
        assert_eq!(out.reason, "Deleted");
        assert!(out.warnings.is_empty());
        assert!(matches!(out.pass, Pass::Done { ref note } if note.contains("c1")));
    }

    #[test]
    fn work_left_is_info_and_a_failure_a_warning_with_its_event() {
        let mut p2 = PhaseReport::started(Phase::Tagged);
        p2.remaining
            .push((r("security-group", "sg-1"), "DependencyViolation".into()));
        let out = of(&report(false, p2.clone()), "c1", "here");
        assert_eq!(
            (out.done, out.severity, out.reason),
            (false, Severity::Info, "Deleting")
        );
        assert!(out.warnings.is_empty(), "waiting is not worth a Warning");
        assert!(
            out.message.contains("security-group sg-1"),
            "{}",
            out.message
        );
        match out.pass {
            Pass::Left { phase, after, .. } => {
                assert_eq!(phase, "phase 2: external resources");
                assert_eq!(
                    after,
                    Duration::from_secs(1),
                    "phase 1 deleted: look again soon"
                );
            }
            Pass::Done { .. } | Pass::Release { .. } => panic!("not done"),
        }

        p2.errors.push("load-balancer lb-1: AccessDenied".into());
        let out = of(&report(false, p2), "c1", "here");
        assert_eq!(
            (out.severity, out.reason),
            (Severity::Warning, "DeletionFailed")
        );
        assert_eq!(out.warnings.len(), 1);
        assert_eq!(out.warnings[0].0, "ExternalResourcesDeletionFailed");
        assert!(
            out.message.starts_with("phase 2: load-balancer lb-1"),
            "errors come first: {}",
            out.message
        );
    }

    #[test]
    fn a_vpc_held_by_someone_elses_resource_names_it_and_deletes_nothing_of_it() {
        let mut p3 = PhaseReport::started(Phase::Network);
        p3.blockers
            .push((r("instance", "i-theirs"), "vpc-1".into()));
        let rep = PassReport {
            done: false,
            phases: vec![
                PhaseReport::started(Phase::CapaOwned),
                PhaseReport::started(Phase::Tagged),
                p3,
            ],
        };
        let out = of(&rep, "c1", "here");
        assert_eq!(out.warnings.len(), 1);
        let (reason, note) = &out.warnings[0];
        assert_eq!(*reason, "VpcDeletionBlocked");
        assert!(
            note.contains("VPC vpc-1") && note.contains("instance i-theirs"),
            "{note}"
        );
        assert!(matches!(out.pass, Pass::Left { after, .. } if after == Duration::from_secs(5)));
    }

    #[test]
    fn notes_are_passed_on_as_they_happen() {
        let mut p2 = PhaseReport::started(Phase::Tagged);
        p2.notes
            .push("EBS volume vol-1 deleted after snapshot snap-1".into());
        let out = of(&report(true, p2), "c1", "here");
        assert_eq!(
            out.notes,
            ["EBS volume vol-1 deleted after snapshot snap-1"]
        );
    }

    #[test]
    fn a_bad_owner_id_is_said_in_the_condition_and_a_warning_and_holds_nothing() {
        let problem = "annotation sweeper.dev/external-dns-owner-id has value \"default\": …";
        let out = with_config_problem(
            of(
                &report(true, PhaseReport::started(Phase::Tagged)),
                "c1",
                "here",
            ),
            problem,
        );
        assert!(out.done, "the teardown still finishes");
        assert!(matches!(out.pass, Pass::Done { .. }));
        assert!(out.message.starts_with(problem), "{}", out.message);
        assert_eq!(
            out.warnings,
            [("InvalidConfiguration", problem.to_string())]
        );

        let mut p2 = PhaseReport::started(Phase::Tagged);
        p2.remaining
            .push((r("security-group", "sg-1"), "DependencyViolation".into()));
        let out = with_config_problem(of(&report(false, p2.clone()), "c1", "here"), problem);
        assert_eq!(
            (out.severity, out.reason),
            (Severity::Warning, "InvalidConfiguration")
        );
        assert!(matches!(out.pass, Pass::Left { .. }));
        // A failing delete keeps its own reason; the problem is still said.
        p2.errors.push("load-balancer lb-1: AccessDenied".into());
        let out = with_config_problem(of(&report(false, p2), "c1", "here"), problem);
        assert_eq!(out.reason, "DeletionFailed");
        assert_eq!(out.warnings.len(), 2);
    }
}
