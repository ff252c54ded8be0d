//! Running one phase: its cleaners in ascending `order` (their descriptors'); cleaners sharing an
//! order value are independent and run concurrently; within a cleaner, deletes run with bounded
//! concurrency. One cleaner's failure never stops the others.

use crate::cleaners::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target};
use crate::locate::inventory::Inventory;
use crate::locate::tagging::TaggedResource;
use crate::model::{AuditAction, Audited, AwsClients, Failure, Phase, PhaseReport, ResourceRef};
use crate::policy::Ownership;
use async_trait::async_trait;
use futures::StreamExt;
use std::collections::BTreeMap;
use tracing::Instrument;

/// How many deletes of one cleaner are in flight at once: enough to hide API latency, few enough
/// to stay clear of the account's API rate limits.
pub const DELETE_CONCURRENCY: usize = 16;

/// A [`Cleaner`] with its detail type erased, so one list can hold different kinds. Not a second
/// trait to implement: every cleaner gets it from the blanket impl below, and it stays inside the
/// crate (`Cleaner` has an associated type, so `dyn Cleaner` cannot list mixed kinds).
#[async_trait]
pub(crate) trait AnyCleaner: Send + Sync {
    fn descriptor(&self) -> &'static Descriptor;
    fn claim(&self, r: &TaggedResource, inv: &mut Inventory) -> bool;
    async fn describe_owned(
        &self,
        c: &AwsClients,
        own: &Ownership,
        inv: &mut Inventory,
    ) -> Result<(), CleanError>;
    /// Discover, then delete everything found (or only plan it in a dry run).
    async fn run(&self, ctx: &CleanCtx<'_>, dry_run: bool) -> PhaseReport;
}

#[async_trait]
impl<C: Cleaner> AnyCleaner for C {
    fn descriptor(&self) -> &'static Descriptor {
        Cleaner::descriptor(self)
    }
    fn claim(&self, r: &TaggedResource, inv: &mut Inventory) -> bool {
        Cleaner::claim(self, r, inv)
    }
    async fn describe_owned(
        &self,
        c: &AwsClients,
        own: &Ownership,
        inv: &mut Inventory,
    ) -> Result<(), CleanError> {
        Cleaner::describe_owned(self, c, own, inv).await
    }
    async fn run(&self, ctx: &CleanCtx<'_>, dry_run: bool) -> PhaseReport {
        run_cleaner(self, ctx, dry_run).await
    }
}

/// Runs one cleaner in its descriptor's phase: discovers, reports what is report-only, then
/// deletes everything else found (or only plans it in a dry run).
pub(crate) async fn run_cleaner<C: Cleaner>(
    cleaner: &C,
    ctx: &CleanCtx<'_>,
    dry_run: bool,
) -> PhaseReport {
    let d = cleaner.descriptor();
    let mut report = PhaseReport::started(d.phase);
    let span = tracing::info_span!(
        "cleaner",
        phase = d.phase.number(),
        service = d.service,
        kind = d.kind
    );
    let targets = match cleaner.discover(ctx).instrument(span.clone()).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(parent: &span, error = %e, "discovery failed");
            report.errors.push(Failure::of(&e));
            return report;
        }
    };
    // Report-only targets are reported, dry run or not, and go no further.
    let (kept, targets): (Vec<_>, Vec<_>) = targets.into_iter().partition(|t| t.kept.is_some());
    for t in kept {
        let why = t.kept.unwrap_or_default();
        tracing::info!(parent: &span, id = %t.id, %why, "reported, not deleted");
        report.kept.push((resource_ref(d, &t.id), why));
    }
    if dry_run {
        plan(cleaner, &targets, &mut report);
        return report;
    }
    let sent = targets.iter().any(|t| t.blocked.is_none());
    for (t, res) in delete_all(cleaner, ctx, targets, &span).await {
        record(&mut report, d, &t, res, ctx.inventory);
    }
    if sent {
        // What this kind's deletes changed is described again by the next step that asks.
        ctx.view.forget(d.service, d.kind).await;
    }
    report
}

/// The report's name for one of the descriptor's resources.
fn resource_ref(d: &Descriptor, id: &str) -> ResourceRef {
    ResourceRef {
        service: d.service.to_string(),
        kind: d.kind.to_string(),
        id: id.to_string(),
    }
}

/// A dry run: what deleting (or untagging) `targets` would do, and what else it would change.
fn plan<C: Cleaner>(cleaner: &C, targets: &[Target<C::Detail>], report: &mut PhaseReport) {
    let d = cleaner.descriptor();
    for t in targets {
        if d.untags {
            // What would lose the cluster's tag, with the key (the detail's `Debug` is it).
            let key = format!("{:?}", t.detail);
            let action = AuditAction::Untagged { key };
            report
                .planned_changes
                .push((resource_ref(d, &t.id), action));
        } else {
            report.planned.push(resource_ref(d, &t.id));
        }
        // What deleting it would change and keep (rules of other groups naming it).
        report.planned_changes.extend(
            cleaner
                .also_changes(&t.detail)
                .into_iter()
                .map(|a| (a.resource, a.action)),
        );
    }
}

/// A target with what became of it.
type Done<D> = (Target<D>, Result<Outcome, CleanError>);

/// Deletes `targets`: the blocked ones remain without a call; the rest go in one request when
/// the cleaner deletes together, else one call each, [`DELETE_CONCURRENCY`] in flight.
async fn delete_all<C: Cleaner>(
    cleaner: &C,
    ctx: &CleanCtx<'_>,
    targets: Vec<Target<C::Detail>>,
    span: &tracing::Span,
) -> Vec<Done<C::Detail>> {
    let (blocked, free): (Vec<_>, Vec<_>) = targets.into_iter().partition(|t| t.blocked.is_some());
    let mut results: Vec<Done<C::Detail>> = blocked
        .into_iter()
        .map(|t| {
            let reason = Failure::waiting(t.blocked.clone().unwrap_or_default());
            (t, Ok(Outcome::Remaining(reason)))
        })
        .collect();
    match cleaner
        .delete_together(ctx, &free)
        .instrument(span.clone())
        .await
    {
        Some(outcomes) => results.extend(one_outcome_each(free, outcomes)),
        None => {
            let each: Vec<Done<C::Detail>> = futures::stream::iter(free)
                .map(|t| {
                    let span = tracing::info_span!(parent: span, "delete", arn = %t.id);
                    async move {
                        let res = cleaner.delete(ctx, &t).await;
                        (t, res)
                    }
                    .instrument(span)
                })
                .buffer_unordered(DELETE_CONCURRENCY)
                .collect()
                .await;
            results.extend(each);
        }
    }
    results
}

/// Pairs a together-delete's outcomes with its targets, in order; a cleaner that returned fewer
/// outcomes than targets left the rest undecided: they remain, retried next pass.
fn one_outcome_each<D>(
    targets: Vec<Target<D>>,
    outcomes: Vec<Result<Outcome, CleanError>>,
) -> Vec<Done<D>> {
    let mut outcomes = outcomes.into_iter();
    targets
        .into_iter()
        .map(|t| {
            let res = outcomes.next().unwrap_or_else(|| {
                Ok(Outcome::Remaining(Failure::new(
                    crate::model::FailureKind::Other,
                    "no outcome reported for it; retried next pass",
                )))
            });
            (t, res)
        })
        .collect()
}

/// What one target's outcome puts in the report: deleted (audited), untagged, remaining, an
/// error, or nothing (already gone); changes to other resources it made are audited first.
fn record<D: std::fmt::Debug>(
    report: &mut PhaseReport,
    d: &Descriptor,
    t: &Target<D>,
    res: Result<Outcome, CleanError>,
    inventory: &Inventory,
) {
    let rref = resource_ref(d, &t.id);
    // What the delete changed besides its target, kept (rules revoked in other groups):
    // audited whatever became of the target.
    let mut res = res;
    while let Ok(Outcome::Also(changed, then)) = res {
        for a in changed {
            tracing::info!(arn = %t.id, changed = %a.resource, action = ?a.action, "changed, kept");
            // Not a note: the service emits notes as the snapshot Event
            // (`DeletedWithSnapshot`); the audit record and `gc plan` carry it.
            report.audit.push(a);
        }
        res = Ok(*then);
    }
    match res {
        Ok(Outcome::Deleted) => {
            // Every delete in the log, as every untag and change above: the dangerous verb is
            // never silent (the audit record holds the same, with the facts it was judged on).
            tracing::info!(arn = %t.id, "deleted");
            report.deleted.push(rref.clone());
            let detail = format!("{:?}", t.detail);
            report.audit.push(audited(rref, t, detail, inventory));
        }
        Ok(Outcome::DeletedWith(note)) => {
            tracing::info!(arn = %t.id, %note, "deleted");
            report.deleted.push(rref.clone());
            let detail = format!("{:?}; {note}", t.detail);
            report.audit.push(audited(rref, t, detail, inventory));
            report.notes.push(note);
        }
        Ok(Outcome::Untagged(key)) => {
            tracing::info!(arn = %t.id, %key, "untagged, kept");
            report.untagged.push((rref.clone(), key.clone()));
            let mut a = audited(rref, t, format!("{:?}", t.detail), inventory);
            a.action = AuditAction::Untagged { key };
            report.audit.push(a);
        }
        // Unwrapped above.
        Ok(Outcome::Also(..)) => {}
        // Not deleted by this pass, so not reported: a locate step that keeps listing a gone
        // resource (eventual consistency) must not keep the teardown from being done.
        Ok(Outcome::Gone) => tracing::debug!(arn = %t.id, "already gone"),
        Ok(Outcome::Remaining(reason)) => {
            tracing::info!(arn = %t.id, %reason, "not deleted yet");
            report.remaining.push((rref.clone(), reason.on(rref)));
        }
        Ok(Outcome::Requested(reason)) => {
            tracing::info!(arn = %t.id, "deletion requested");
            let detail = format!("{:?}; deletion requested", t.detail);
            report
                .audit
                .push(audited(rref.clone(), t, detail, inventory));
            report.remaining.push((rref.clone(), reason.on(rref)));
        }
        Ok(Outcome::Failed(why)) => {
            tracing::warn!(arn = %t.id, error = %why, "not deleted");
            report.errors.push(why.on(rref));
        }
        Err(e) => {
            tracing::warn!(arn = %t.id, error = %e, "delete failed");
            report.errors.push(Failure::of(&e).on(rref));
        }
    }
}

/// The audit entry of a deleted target: its own Describe tags, else the inventory's.
fn audited<D>(
    resource: ResourceRef,
    t: &Target<D>,
    detail: String,
    inventory: &Inventory,
) -> Audited {
    Audited {
        resource,
        action: AuditAction::Deleted,
        detail,
        tags: t.tags.clone().or_else(|| inventory.tags_of(&t.id).cloned()),
    }
}

/// A phase's report, and whether what it left holds up the next phase (see
/// [`Descriptor::holds_next_phase`]).
pub struct PhaseRun {
    pub report: PhaseReport,
    pub holds_next: bool,
}

/// Runs a phase's cleaners (all of `phase`, as the registry gives them): ascending `order`,
/// equal orders concurrently.
pub(crate) async fn run_phase(
    phase: Phase,
    cleaners: &[Box<dyn AnyCleaner>],
    ctx: &CleanCtx<'_>,
    dry_run: bool,
) -> PhaseRun {
    let mut groups: BTreeMap<u32, Vec<&dyn AnyCleaner>> = BTreeMap::new();
    for c in cleaners {
        debug_assert_eq!(c.descriptor().phase, phase, "{}", c.descriptor().kind);
        groups
            .entry(c.descriptor().order)
            .or_default()
            .push(c.as_ref());
    }
    let mut report = PhaseReport::started(phase);
    let mut holds_next = false;
    for group in groups.values() {
        let parts = futures::future::join_all(group.iter().map(|c| c.run(ctx, dry_run))).await;
        let left = |p: &PhaseReport| !p.remaining.is_empty() || !p.errors.is_empty();
        let gated = group
            .iter()
            .zip(&parts)
            .any(|(c, p)| c.descriptor().gates_later && !dry_run && left(p));
        holds_next |= group
            .iter()
            .zip(&parts)
            .any(|(c, p)| c.descriptor().holds_next_phase && left(p));
        for p in parts {
            report.merge(p);
        }
        if gated {
            // The cleaners not run yet may have work: the next phase waits for them.
            holds_next = true;
            break;
        }
    }
    PhaseRun { report, holds_next }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FailureKind;

    const D: Descriptor = Descriptor::new("ec2", "volume", Phase::Tagged, 25);

    fn audit_of(id: &str) -> Audited {
        Audited {
            resource: resource_ref(&D, id),
            action: AuditAction::Deleted,
            detail: String::new(),
            tags: None,
        }
    }

    /// (outcome, deleted, untagged, remaining, errors, audited, notes)
    #[test]
    fn each_outcome_lands_in_its_one_place_of_the_report() {
        let waiting = || Failure::waiting("attached");
        let failed = || Failure::new(FailureKind::Other, "revoked nothing");
        let also = |o: Outcome| Outcome::Also(vec![audit_of("sg-other")], Box::new(o));
        let table: [(Outcome, usize, usize, usize, usize, usize, usize); 9] = [
            (Outcome::Deleted, 1, 0, 0, 0, 1, 0),
            (Outcome::DeletedWith("snap-1".into()), 1, 0, 0, 0, 1, 1),
            (
                Outcome::Untagged("kubernetes.io/cluster/c".into()),
                0,
                1,
                0,
                0,
                1,
                0,
            ),
            (Outcome::Gone, 0, 0, 0, 0, 0, 0),
            (Outcome::Remaining(waiting()), 0, 0, 1, 0, 0, 0),
            // An accepted asynchronous delete: audited by this pass, the phase kept open.
            (Outcome::Requested(waiting()), 0, 0, 1, 0, 1, 0),
            (Outcome::Failed(failed()), 0, 0, 0, 1, 0, 0),
            // Changes to other resources are audited whatever became of the target.
            (also(Outcome::Gone), 0, 0, 0, 0, 1, 0),
            (also(Outcome::Deleted), 1, 0, 0, 0, 2, 0),
        ];
        for (outcome, deleted, untagged, remaining, errors, audited, notes) in table {
            let what = format!("{outcome:?}");
            let mut report = PhaseReport::started(Phase::Tagged);
            let t = Target::new("vol-1", ());
            record(&mut report, &D, &t, Ok(outcome), &Inventory::default());
            let got = (
                report.deleted.len(),
                report.untagged.len(),
                report.remaining.len(),
                report.errors.len(),
                report.audit.len(),
                report.notes.len(),
            );
            let want = (deleted, untagged, remaining, errors, audited, notes);
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn the_remaining_and_errors_name_the_target() {
        let mut report = PhaseReport::started(Phase::Tagged);
        let t = Target::new("vol-1", ());
        let waiting = Outcome::Remaining(Failure::waiting("attached"));
        record(&mut report, &D, &t, Ok(waiting), &Inventory::default());
        let failed = Outcome::Failed(Failure::new(FailureKind::Other, "no"));
        record(&mut report, &D, &t, Ok(failed), &Inventory::default());
        let vol = resource_ref(&D, "vol-1");
        assert_eq!(report.remaining[0].0, vol);
        assert_eq!(report.remaining[0].1.resource.as_ref(), Some(&vol));
        assert_eq!(report.errors[0].resource.as_ref(), Some(&vol));
    }

    #[test]
    fn targets_a_together_delete_left_without_an_outcome_remain() {
        let targets = vec![Target::new("a", ()), Target::new("b", ())];
        let done = one_outcome_each(targets, vec![Ok(Outcome::Deleted)]);
        assert_eq!(done.len(), 2);
        assert!(matches!(done[0].1, Ok(Outcome::Deleted)));
        let Ok(Outcome::Remaining(f)) = &done[1].1 else {
            panic!("{:?}", done[1].1)
        };
        assert_eq!(f.kind, FailureKind::Other);
        assert_eq!(f.message, "no outcome reported for it; retried next pass");
    }
}
