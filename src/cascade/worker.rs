//! attempt-to-delete: verify virtual owners, finish foreground and cascade-complete deletions,
//! and collect objects whose owners are gone.

use super::actions::{self, ActionError, ActionOutcome, ActionTarget};
use super::classify::{GcDecision, OwnerStatus, Propagation, decide};
use super::context::Ctx;
use super::failure::{WorkError, WorkFailure};
use super::metrics::CascadeMetrics;
use super::snapshot::Snapshot;
use crate::archive::store::{Item, Ticket};
use crate::archive::then_act::{IfChanged, NotNow, archive_then_act};
use crate::archive::{DeletionReason, OwnerRef};
use crate::engine::graph::node::{CLUSTER, flag};
use crate::engine::graph::uid::Uid;
use crate::engine::meta::{FINALIZER_CASCADE_COMPLETE, FINALIZER_FOREGROUND};
use kube::runtime::events::EventType;
use std::time::Instant;

#[tracing::instrument(skip(ctx, uid), fields(uid = %uid, object))]
pub(crate) async fn attempt_to_delete(ctx: &Ctx, uid: Uid) -> Result<(), WorkFailure> {
    let Some(snap) = Snapshot::take(&ctx.read(), &ctx.absent, &uid) else {
        return Ok(()); // gone from the graph: nothing left to do
    };
    let object = format!(
        "{} {}{}",
        snap.kind,
        snap.namespace
            .as_deref()
            .map(|n| format!("{n}/"))
            .unwrap_or_default(),
        snap.name
    );
    tracing::Span::current().record("object", object.as_str());
    let fail = |error: WorkError| WorkFailure {
        resource: snap.gvk.clone(),
        error,
    };

    if !snap.node.observed() {
        return verify_virtual(ctx, &snap, &object).await.map_err(fail);
    }
    if snap.node.deleting_dependents() {
        return finish_foreground(ctx, &snap).await.map_err(fail);
    }
    if snap.node.completing_cascade() {
        return finish_cascade(ctx, &snap).await.map_err(fail);
    }
    if snap.node.has(flag::DELETING) {
        return Ok(()); // someone else's deletion in progress
    }
    if !snap.invalid_namespace.is_empty() {
        report_invalid_namespace(ctx, &snap).await;
    }
    collect(ctx, &snap, object).await.map_err(fail)
}

/// Some owner references name an owner that cannot be in the object's namespace: said once in
/// a Warning Event (they count as absent).
async fn report_invalid_namespace(ctx: &Ctx, snap: &Snapshot) {
    let note = format!(
        "ownerRef [{}] does not exist in namespace {:?}",
        snap.invalid_namespace.join(", "),
        snap.namespace.as_deref().unwrap_or("")
    );
    ctx.event(
        snap.uid,
        snap.reference(),
        EventType::Warning,
        "OwnerRefInvalidNamespace",
        note,
    )
    .await;
}

/// An observed object no deletion is under way for: decides from its owners whether it is
/// kept, freed of references to gone owners, or deleted, and does it.
async fn collect(ctx: &Ctx, snap: &Snapshot, object: String) -> Result<(), WorkError> {
    let owners: Vec<(Uid, OwnerStatus)> = snap.owners.iter().map(|(l, s)| (l.uid, *s)).collect();
    let Some(resolved) = snap.resolved.clone() else {
        return Err(WorkError::UnknownKind {
            object,
            kind: snap.gvk.clone(),
        });
    };
    let target = ActionTarget {
        resource: &resolved,
        namespace: snap.namespace.as_deref(),
        name: &snap.name,
    };
    match decide(snap.subject(), &owners) {
        GcDecision::Keep => Ok(()),
        GcDecision::Never => {
            let note = "cluster-scoped object has an owner reference to a namespaced kind; it is never garbage-collected".to_string();
            tracing::warn!("{note}");
            ctx.event(
                snap.uid,
                snap.reference(),
                EventType::Warning,
                "OwnerRefInvalidNamespace",
                note,
            )
            .await;
            Ok(())
        }
        GcDecision::Retry => {
            let kind = snap
                .owners
                .iter()
                .find(|(_, s)| *s == OwnerStatus::UnknownKind)
                .map(|(l, _)| ctx.read().kinds.info(l.kind).kind.clone())
                .unwrap_or_default();
            Err(WorkError::UnknownOwnerKind { object, kind })
        }
        GcDecision::RemoveOwnerRefs(drop) => remove_owner_refs(ctx, snap, &target, &drop).await,
        GcDecision::Delete {
            policy,
            unblock_first,
        } => delete(ctx, snap, &target, policy, unblock_first).await,
    }
}

/// A solid owner keeps the object: drop its references to absent or waiting owners.
async fn remove_owner_refs(
    ctx: &Ctx,
    snap: &Snapshot,
    target: &ActionTarget<'_>,
    drop: &[Uid],
) -> Result<(), WorkError> {
    let keep: Vec<serde_json::Value> = snap
        .owners
        .iter()
        .zip(&snap.owner_refs)
        .filter(|((l, _), _)| !drop.contains(&l.uid))
        .map(|(_, r)| r.clone())
        .collect();
    if ctx.config.dry_run {
        tracing::info!(
            removed = drop.len(),
            "dry run: would remove dangling owner references"
        );
        return Ok(());
    }
    actions::set_owner_references(&ctx.client, target, snap.node.resource_version, keep.into())
        .await?;
    ctx.metrics
        .owner_refs_removed
        .get_or_create(&CascadeMetrics::resource(&snap.gvk))
        .inc();
    tracing::info!(
        removed = drop.len(),
        "removed owner references to absent or waiting owners; a solid owner remains"
    );
    Ok(())
}

/// Every owner is gone (or deleting in the background): delete the object.
async fn delete(
    ctx: &Ctx,
    snap: &Snapshot,
    target: &ActionTarget<'_>,
    policy: Propagation,
    unblock_first: bool,
) -> Result<(), WorkError> {
    if ctx.config.dry_run {
        tracing::info!(policy = policy.as_str(), "dry run: would delete");
        ctx.metrics
            .would_delete
            .get_or_create(&CascadeMetrics::resource(&snap.gvk))
            .inc();
        return Ok(());
    }
    let mut rv = snap.node.resource_version;
    if unblock_first {
        unblock_owners(ctx, snap, target, rv).await?;
        rv = 0; // the patch moved the version on; the uid precondition still guards
    }
    // Archive first: the record exists before the DELETE leaves, and the DELETE's
    // resourceVersion precondition is the archived version, so what is deleted is what is kept.
    let archive = ctx.archive.as_ref().map(|batcher| {
        let reason = DeletionReason {
            owner: gone_owner(snap),
            ..Default::default()
        };
        let item = archive_item(
            snap,
            target.resource,
            (rv > 0).then(|| rv.to_string()),
            reason,
        );
        (batcher, item)
    });
    let outcome = archive_then_act(
        archive,
        IfChanged::Wait,
        |why| not_archived(snap, why),
        async |ticket: Option<&Ticket>| {
            if let Some(t) = ticket {
                rv = t.resource_version.parse().unwrap_or(rv);
                ctx.config.failpoints.hit("after-archive-record").await;
            }
            let outcome = actions::delete(&ctx.client, target, &snap.uid_text, rv, policy).await;
            if ticket.is_some()
                && policy == Propagation::Foreground
                && matches!(outcome, Ok(ActionOutcome::Done))
            {
                remember_archived_foreground(ctx, snap.uid);
            }
            outcome
        },
        async |outcome| match outcome {
            Ok(ActionOutcome::Done) => true,
            // Already gone (not by this DELETE), changed since, or never sent (paused).
            Ok(ActionOutcome::Gone) | Err(ActionError::Conflict { .. }) => false,
            Err(e) if e.paused() => false,
            // The answer was lost: ask. When even that fails the entry is kept.
            Err(_) => actions::deleted_or_deleting(&ctx.client, target, &snap.uid_text)
                .await
                .unwrap_or(true),
        },
    )
    .await?;
    if outcome == ActionOutcome::Done {
        ctx.metrics
            .deleted
            .get_or_create(&CascadeMetrics::resource(&snap.gvk))
            .inc();
        tracing::info!(policy = policy.as_str(), "deleted: every owner is gone");
    }
    Ok(())
}

/// Breaks a potential foreground cycle before a delete: our owners must not wait on us, so
/// every owner reference is rewritten with `blockOwnerDeletion: false` (at version `rv`).
async fn unblock_owners(
    ctx: &Ctx,
    snap: &Snapshot,
    target: &ActionTarget<'_>,
    rv: u64,
) -> Result<(), WorkError> {
    let refs: Vec<serde_json::Value> = snap
        .owner_refs
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r["blockOwnerDeletion"] = false.into();
            r
        })
        .collect();
    actions::set_owner_references(&ctx.client, target, rv, refs.into()).await?;
    Ok(())
}

/// Why an object the archive did not admit is not acted on now, as the worker's error.
fn not_archived(snap: &Snapshot, why: NotNow) -> WorkError {
    match why {
        NotNow::Changed => WorkError::Changed {
            object: snap.label(),
        },
        NotNow::Failed(e) => WorkError::archive(snap, e),
    }
}

/// Marks an owner this process archived as it deleted it in the foreground: its finalizer
/// release later must not archive it again. Bounded: past the cap the memory is dropped, which
/// costs at most a second record of a still-deleting owner.
fn remember_archived_foreground(ctx: &Ctx, uid: Uid) {
    let mut set = ctx
        .archived_foreground
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if set.len() >= 65_536 {
        set.clear();
    }
    set.insert(uid);
}

/// The owner that made `snap` garbage: the first one not solid.
fn gone_owner(snap: &Snapshot) -> Option<OwnerRef> {
    snap.owners
        .iter()
        .zip(&snap.owner_refs)
        .find(|((_, s), _)| *s != OwnerStatus::Solid)
        .or_else(|| snap.owners.iter().zip(&snap.owner_refs).next())
        .map(|(_, r)| OwnerRef {
            api_version: r["apiVersion"].as_str().unwrap_or_default().into(),
            kind: r["kind"].as_str().unwrap_or_default().into(),
            name: r["name"].as_str().unwrap_or_default().into(),
            uid: r["uid"].as_str().unwrap_or_default().into(),
        })
}

/// What the archive needs to record `snap` (of kind `resolved`) before it goes.
fn archive_item(
    snap: &Snapshot,
    resolved: &crate::engine::graph::kinds::ResolvedKind,
    expect_rv: Option<String>,
    reason: DeletionReason,
) -> Item {
    Item {
        resource: resolved.resource.clone(),
        namespaced: resolved.namespaced,
        namespace: snap.namespace.clone(),
        name: snap.name.clone(),
        uid: snap.uid_text.clone(),
        expect_rv,
        reason,
        object: None,
        in_sweeper_namespace: false,
    }
}

/// A virtual node: does the owner exist? If not, its dependents are collected.
async fn verify_virtual(ctx: &Ctx, snap: &Snapshot, object: &str) -> Result<(), WorkError> {
    if snap.node.known_absent() {
        // Its dependents were queued when it was found gone.
        return Ok(());
    }
    if ctx.absent.contains(&snap.uid) {
        // Seen deleted: its dependents go, without a lookup.
        let _ = ctx.absent_tx.send(snap.uid);
        return Ok(());
    }
    let Some(resolved) = snap.resolved.clone() else {
        // Discovery does not serve the owner's kind: not yet, for a while, or never again.
        return absent_if_kind_gone(ctx, snap, object).await;
    };
    // A namespaced owner is looked up in its dependents' namespace; a cluster-scoped one in none.
    let namespace = if resolved.namespaced {
        match snap.namespace.as_deref() {
            Some(ns) => Some(ns),
            // Referenced only from cluster-scoped objects: invalid, never collected (reported there).
            None => return Ok(()),
        }
    } else {
        None
    };
    let target = ActionTarget {
        resource: &resolved,
        namespace,
        name: &snap.name,
    };
    match actions::exists_with_uid(&ctx.client, &target, &snap.uid_text).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!("owner is absent; its dependents will be collected");
            let _ = ctx.absent_tx.send(snap.uid);
        }
        // A 404 that is not a NotFound Status: the resource itself is no longer served (its CRD
        // went after our last discovery). Only the API server's own answer decides.
        Err(ActionError::Api { source, .. }) if actions::is_status(&source, 404) => {
            return absent_if_kind_gone(ctx, snap, object).await;
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// The owner's kind is not served: it is absent if nothing can serve the kind any more (see
/// `gone_kinds`), else the verification is retried (a kind not discovered yet, an aggregated API down).
async fn absent_if_kind_gone(ctx: &Ctx, snap: &Snapshot, object: &str) -> Result<(), WorkError> {
    let group = super::gone_kinds::group_of(&snap.api_version);
    let retry = |why: String| WorkError::UnknownOwnerKind {
        object: object.to_string(),
        kind: format!("{} ({why})", snap.kind),
    };
    let gk = (group.to_string(), snap.kind.clone());
    let now = std::time::Instant::now();
    let answered = {
        let h = ctx.kind_history.lock().unwrap_or_else(|p| p.into_inner());
        if !h.was_crd_served(&gk) {
            return Err(WorkError::UnknownOwnerKind {
                object: object.to_string(),
                kind: snap.kind.clone(),
            });
        }
        h.answer(&gk, now)
    };
    let verdict = match answered {
        Some(v) => v,
        None => match super::gone_kinds::check(&ctx.client, group, &snap.kind).await {
            Ok(v) => {
                ctx.kind_history
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remember(gk, v.clone(), now);
                v
            }
            Err(e) => return Err(retry(format!("cannot tell whether it still exists: {e}"))),
        },
    };
    match verdict {
        super::gone_kinds::KindPresence::Gone => {
            tracing::info!(
                kind = %snap.kind,
                group,
                "owner absent: its kind is no longer served and no CustomResourceDefinition defines it"
            );
            let _ = ctx.absent_tx.send(snap.uid);
            Ok(())
        }
        super::gone_kinds::KindPresence::MayExist(why) => Err(retry(why.to_string())),
    }
}

/// Foreground deletion: remove `foregroundDeletion` once no blocking dependent remains, else
/// make sure every blocking dependent is being collected.
async fn finish_foreground(ctx: &Ctx, snap: &Snapshot) -> Result<(), WorkError> {
    let blocking: Vec<&super::snapshot::Dependent> =
        snap.dependents.iter().filter(|d| d.blocks).collect();
    if blocking.is_empty() {
        if ctx.config.dry_run {
            return Ok(());
        }
        let mut finalizers = vec![FINALIZER_FOREGROUND];
        if snap.dependents.is_empty() {
            finalizers.push(FINALIZER_CASCADE_COMPLETE);
        }
        release_archived(ctx, snap, &finalizers).await?;
        tracing::info!(
            non_blocking = snap.dependents.len(),
            "foreground deletion complete: no blocking dependents remain"
        );
        return Ok(());
    }
    for d in blocking {
        if !d.deleting_dependents {
            ctx.delete_q.add(d.uid);
        }
    }
    Ok(())
}

/// Background deletion held by `sweeper.dev/cascade-complete`: release it when every dependent is gone.
async fn finish_cascade(ctx: &Ctx, snap: &Snapshot) -> Result<(), WorkError> {
    let (started, initial) = {
        let mut c = ctx.cascades.lock().unwrap_or_else(|p| p.into_inner());
        *c.entry(snap.uid)
            .or_insert((Instant::now(), snap.dependents.len()))
    };
    if !snap.dependents.is_empty() {
        for d in &snap.dependents {
            ctx.delete_q.add(d.uid);
        }
        return Ok(());
    }
    if ctx.config.dry_run {
        return Ok(());
    }
    release_archived(ctx, snap, &[FINALIZER_CASCADE_COMPLETE]).await?;
    ctx.cascades
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&snap.uid);
    let secs = started.elapsed().as_secs_f64();
    tracing::info!(dependents = initial, seconds = secs, "cascade complete");
    ctx.event(
        snap.uid,
        snap.reference(),
        EventType::Normal,
        "CascadeComplete",
        format!("garbage collection of {initial} dependents finished in {secs:.1}s"),
    )
    .await;
    Ok(())
}

/// Releases an owner's finalizers, archiving it first: releasing the last finalizer is what
/// deletes an owner the user deleted in the foreground (or with `cascade-complete`), so
/// `restore --cascade-of` can bring back the owner with its dependents. An owner this process
/// archived when it deleted it is not archived again.
async fn release_archived(
    ctx: &Ctx,
    snap: &Snapshot,
    finalizers: &[&str],
) -> Result<(), WorkError> {
    let already = ctx
        .archived_foreground
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&snap.uid);
    let archive = match (&ctx.archive, &snap.resolved, already) {
        (Some(batcher), Some(resolved), false) => {
            let reason = DeletionReason {
                released: Some(finalizers.join(",")),
                ..Default::default()
            };
            Some((batcher, archive_item(snap, resolved, None, reason)))
        }
        _ => None,
    };
    let result = archive_then_act(
        archive,
        // The release does not depend on the version: an object changed since is released anyway.
        IfChanged::Act,
        |why| not_archived(snap, why),
        async |_: Option<&Ticket>| remove(ctx, snap, finalizers).await,
        async |result| match result {
            Ok(()) => true,
            // Refused before it was sent.
            Err(e) if e.paused() => false,
            // The answer may have been lost after the release applied: the object tells. When
            // even that read fails the entry is kept (never lost for an object that may be gone).
            Err(_) => match &snap.resolved {
                Some(resolved) => actions::finalizers_released(
                    &ctx.client,
                    &graph_target(snap, resolved),
                    &snap.uid_text,
                    finalizers,
                )
                .await
                .unwrap_or(true),
                None => false,
            },
        },
    )
    .await;
    if result.is_ok() {
        // Released: a retry after a failure must not archive it a second time, so the mark
        // goes only now.
        ctx.archived_foreground
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&snap.uid);
    }
    result
}

async fn remove(ctx: &Ctx, snap: &Snapshot, finalizers: &[&str]) -> Result<(), WorkError> {
    let Some(resolved) = snap.resolved.clone() else {
        return Err(WorkError::UnknownKind {
            object: snap.name.clone(),
            kind: snap.gvk.clone(),
        });
    };
    actions::remove_finalizers(
        &ctx.client,
        &graph_target(snap, &resolved),
        &snap.uid_text,
        finalizers,
    )
    .await?;
    Ok(())
}

/// The object a snapshot describes, in the namespace the graph holds it in.
fn graph_target<'a>(
    snap: &'a Snapshot,
    resolved: &'a crate::engine::graph::kinds::ResolvedKind,
) -> ActionTarget<'a> {
    ActionTarget {
        resource: resolved,
        namespace: (snap.node.namespace != CLUSTER)
            .then_some(snap.namespace.as_deref())
            .flatten(),
        name: &snap.name,
    }
}

#[cfg(test)]
mod tests;
