//! One teardown pass for a deleted tenant. Idempotent and stateless: it re-finds what is left,
//! deletes what is not already being deleted, and says whether anything remains. The controller
//! calls it until it reports `done`, then releases the finalizer; a crash anywhere just means
//! the next pass finds less.
//!
//! Order: the tenant's CRDs first (which removes their custom resources), then every other
//! cluster-scoped `<id>-` object, namespaces included; namespaces are then waited for (the
//! namespace controller empties them) and reported by name when stuck.

use super::id::TenantId;
use super::inventory::{self, Found, TenantInventory};
use super::metrics::TenantMetrics;
use crate::config::TenantGcStrategy;
use crate::engine::discovery::DeletableResource;
use crate::engine::name_index::{self, NameIndex};
use futures::StreamExt;
use kube::api::{DeleteParams, DynamicObject, Preconditions};
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::time::Instant;
use tracing::Instrument;

#[derive(Clone, Debug)]
pub struct PassSettings {
    pub strategy: TenantGcStrategy,
    pub scan_kinds: Vec<String>,
    pub dry_run: bool,
    /// Deletes in flight at once within a teardown stage.
    pub delete_concurrency: usize,
    /// The archive (None with `--archive=none`): what a teardown deletes is recorded first, in
    /// sweeper's namespace, labelled with the tenant id.
    pub archive: Option<std::sync::Arc<crate::archive::store::Archiver>>,
}

#[derive(Debug, thiserror::Error, Clone)]
pub enum PassError {
    #[error("cannot delete {kind} {name}: {message}")]
    Delete {
        kind: String,
        name: String,
        message: String,
    },
    #[error(transparent)]
    TenantInventory(#[from] inventory::InventoryError),
    #[error("not deleting {kind} {name} yet: {source}")]
    Archive {
        kind: String,
        name: String,
        #[source]
        source: crate::archive::store::ArchiveFailure,
    },
}

#[derive(Debug, Default)]
pub struct TenantPassReport {
    /// Nothing of the tenant is left and nothing failed: the finalizer may go.
    pub done: bool,
    /// What is still there, by kind (`group/Kind`, core kinds bare).
    pub remaining: BTreeMap<String, u64>,
    pub deleted: u64,
    pub listed: u64,
    /// Objects being deleted but held by finalizers: `Kind name [finalizers]`.
    pub stuck: Vec<String>,
    pub errors: Vec<PassError>,
    /// Dry run: what would be deleted.
    pub would_delete: Vec<String>,
    /// The revision the teardown began at (`index` strategy): the caller hands it back to
    /// every later pass of the same teardown; see [`inventory::confirm`].
    pub since: Option<u64>,
    /// The objects the API server deleted at once in this pass (no finalizer held them).
    gone: Vec<Found>,
}

/// The revision a teardown's last check proves gone against, from the Tenant being torn down:
/// its own resourceVersion once it is being deleted. That is at or after its deletion, so
/// everything the tenant had when it was deleted is covered, and it needs no request. After a
/// restart it is older than the index's epoch, so every kind the index has listed is current
/// enough and the last check lists nothing (issue #52). None (not deleting, or not etcd's number):
/// the pass reads the store's current revision instead.
pub fn teardown_revision(deleting: bool, resource_version: Option<&str>) -> Option<u64> {
    resource_version.filter(|_| deleting)?.parse().ok()
}

pub async fn pass(
    client: &Client,
    id: &TenantId,
    resources: &[DeletableResource],
    settings: &PassSettings,
    metrics: &TenantMetrics,
    index: &NameIndex,
    since: Option<u64>,
) -> TenantPassReport {
    let mut report = TenantPassReport::default();
    let started = Instant::now();
    if settings.strategy == TenantGcStrategy::Index {
        // Read before anything is found: whatever the tenant has at this revision is seen.
        report.since = match since {
            Some(s) => Some(s),
            None => name_index::current_revision(client).await,
        };
    }
    let inv: TenantInventory = inventory::find(
        client,
        id,
        resources,
        settings.strategy,
        &settings.scan_kinds,
        index,
    )
    .instrument(tracing::debug_span!("find", tenant = %id))
    .await;
    let found = (inv.crds.len() + inv.objects.len()) as u64;
    tracing::debug!(tenant = %id, found, listed = inv.listed, ms = started.elapsed().as_millis() as u64, "found the tenant's objects");
    metrics.progress.found(&id.to_string(), found);
    let mut done = delete_found(client, id, inv, settings, metrics, &mut report).await;
    if done && settings.strategy == TenantGcStrategy::Index {
        // The index said nothing is left (or everything went at once): one authoritative check
        // before the finalizer may go. What it finds is deleted now and checked again next pass.
        let check_started = Instant::now();
        let check = inventory::confirm(
            client,
            id,
            resources,
            &settings.scan_kinds,
            index,
            report.since,
            &report.gone,
        )
        .instrument(tracing::debug_span!("confirm", tenant = %id))
        .await;
        tracing::debug!(tenant = %id, listed = check.listed, ms = check_started.elapsed().as_millis() as u64, "the last check is done");
        if !check.is_empty() || !check.errors.is_empty() {
            let more = (check.crds.len() + check.objects.len()) as u64;
            tracing::info!(tenant = %id, found = more, "the last check found objects the index had not seen yet");
            metrics.progress.found_more(&id.to_string(), more);
            delete_found(client, id, check, settings, metrics, &mut report).await;
            done = false;
        } else {
            // What the check listed counts even when it found nothing.
            report.listed += check.listed;
        }
    }
    metrics.listed(settings.strategy, report.listed);
    report.done = done;
    tracing::debug!(tenant = %id, deleted = report.deleted, done, ms = started.elapsed().as_millis() as u64, "pass over");
    report
}

/// Deletes what `inv` holds, stage by stage, into `report`; true when nothing is left of it:
/// nothing was found, or everything found was deleted outright (the API server answered with a
/// Status, not an object still held by finalizers), so it need not be listed again to be seen
/// gone.
async fn delete_found(
    client: &Client,
    id: &TenantId,
    inv: TenantInventory,
    settings: &PassSettings,
    metrics: &TenantMetrics,
    report: &mut TenantPassReport,
) -> bool {
    report.listed += inv.listed;
    report
        .errors
        .extend(inv.errors.iter().cloned().map(Into::into));
    let errors_before = report.errors.len();
    let gone_before = report.gone.len();
    // CRDs before everything else; namespaces last, so RBAC and webhooks they may need go first.
    // Within a stage, deletes run concurrently (bounded).
    let (namespaces, others): (Vec<&Found>, Vec<&Found>) = inv
        .objects
        .iter()
        .partition(|f| f.resource.group.is_empty() && f.resource.kind == "Namespace");
    for stage in [inv.crds.iter().collect::<Vec<_>>(), others, namespaces] {
        let todo = triage(stage, settings.dry_run, report);
        // Archive first; what cannot be archived now is not deleted now.
        let todo = match &settings.archive {
            Some(archive) if !todo.is_empty() => {
                let started = Instant::now();
                let n = todo.len();
                let todo = archive_stage(client, archive, id, todo, report)
                    .instrument(tracing::debug_span!("archive", tenant = %id))
                    .await;
                tracing::debug!(tenant = %id, objects = n, ms = started.elapsed().as_millis() as u64, "archived before the deletes");
                todo
            }
            _ => todo.into_iter().map(|f| (f, Vec::new())).collect(),
        };
        // Each answer is taken (logged, counted, shown in /status) as it comes, not once the
        // whole stage is over: a stage of hundreds of deletes lasts seconds at the rate limit.
        let mut answers = delete_stage(client, settings, todo);
        while let Some((f, result)) = answers.next().await {
            match result {
                Ok(gone) => {
                    report.deleted += 1;
                    if gone {
                        report.gone.push(f.clone());
                    }
                    metrics.deleted(&f.kind_key());
                    metrics.progress.deleted(&id.to_string(), gone);
                    tracing::info!(tenant = %id, kind = %f.kind_key(), name = %f.name, "deleted");
                }
                Err(e) => {
                    metrics.error(&f.kind_key());
                    tracing::warn!(tenant = %id, error = %e, "delete failed; the teardown goes on and retries it");
                    report.errors.push(e);
                }
            }
        }
    }
    let found = (inv.crds.len() + inv.objects.len()) as u64;
    report.errors.len() == errors_before
        && inv.errors.is_empty()
        && !settings.dry_run
        && (inv.is_empty() || (report.gone.len() - gone_before) as u64 == found)
}

/// What of a stage is deleted now, decided without I/O: everything still there counts as
/// remaining; an object already being deleted is waited for (reported stuck when finalizers hold
/// it), a dry run only reports what it would delete, and the rest is returned.
fn triage(stage: Vec<&Found>, dry_run: bool, report: &mut TenantPassReport) -> Vec<Found> {
    let mut todo = Vec::new();
    for f in stage {
        *report.remaining.entry(f.kind_key()).or_default() += 1;
        if f.deleting {
            if !f.finalizers.is_empty() {
                report.stuck.push(format!(
                    "{} {} [{}]",
                    f.kind_key(),
                    f.name,
                    f.finalizers.join(", ")
                ));
            }
        } else if dry_run {
            report
                .would_delete
                .push(format!("{} {}", f.kind_key(), f.name));
        } else {
            todo.push(f.clone());
        }
    }
    todo
}

/// Deletes a stage's objects concurrently (bounded), each guarded by its archive tickets; per
/// object as it is answered, whether it is gone at once (no finalizer held it) or the error
/// naming it.
fn delete_stage(
    client: &Client,
    settings: &PassSettings,
    todo: Vec<(Found, Vec<crate::archive::store::Ticket>)>,
) -> futures::stream::BoxStream<'static, (Found, Result<bool, PassError>)> {
    // Owned items and client: the futures must not borrow (they run inside the controller).
    let (client, archive) = (client.clone(), settings.archive.clone());
    futures::stream::iter(todo)
        .map(move |(f, tickets)| {
            let client = client.clone();
            let archive = archive.clone();
            async move {
                // The archived version is the DELETE's precondition: what goes is what is kept.
                let rv = tickets
                    .iter()
                    .find(|t| t.uid == f.uid)
                    .map(|t| t.resource_version.clone());
                let r = crate::archive::store::Archiver::guarded(
                    archive.as_deref(),
                    &tickets,
                    delete(&client, &f, rv),
                    async |r| match r {
                        Ok(d) => d.by_us(),
                        Err(e) => took_effect(&client, &f, e).await,
                    },
                )
                .await;
                let r = r.map(|d| d.gone()).map_err(|e| PassError::Delete {
                    kind: f.kind_key(),
                    name: f.name.clone(),
                    message: e.to_string(),
                });
                (f, r)
            }
        })
        .buffer_unordered(settings.delete_concurrency.max(1))
        .boxed()
}

/// Archives a stage's objects (and, for a CRD, every custom resource it holds, which the API
/// server deletes with it) before they are deleted. Returns what to delete, each with the tickets
/// its DELETE settles; what could not be archived is reported and left for the next pass.
async fn archive_stage(
    client: &Client,
    archive: &crate::archive::store::Archiver,
    id: &TenantId,
    todo: Vec<Found>,
    report: &mut TenantPassReport,
) -> Vec<(Found, Vec<crate::archive::store::Ticket>)> {
    use crate::archive::DeletionReason;
    use crate::archive::store::Item;
    let reason = |with_crd: Option<String>| DeletionReason {
        tenant: Some(id.to_string()),
        with_crd,
        ..Default::default()
    };
    // A CRD whose custom resources cannot be read is not deleted this pass.
    let mut ready: Vec<(Found, Vec<Item>)> = Vec::new();
    for f in todo {
        let mut crs = Vec::new();
        if f.resource.kind == "CustomResourceDefinition" {
            match custom_resources(client, &f.name).await {
                Ok(found) => {
                    for (resource, namespaced, object) in found {
                        crs.push(Item {
                            resource,
                            namespaced,
                            namespace: object["metadata"]["namespace"].as_str().map(String::from),
                            name: object["metadata"]["name"]
                                .as_str()
                                .unwrap_or_default()
                                .into(),
                            uid: object["metadata"]["uid"]
                                .as_str()
                                .unwrap_or_default()
                                .into(),
                            expect_rv: None,
                            reason: reason(Some(f.name.clone())),
                            object: Some(object),
                            in_sweeper_namespace: true,
                        });
                    }
                }
                Err(e) => {
                    report.errors.push(PassError::Archive {
                        kind: f.kind_key(),
                        name: f.name.clone(),
                        source: e.into(),
                    });
                    continue;
                }
            }
        }
        ready.push((f, crs));
    }
    let (items, of) = archive_items(&ready, reason(None));
    let prepared = archive.record(items).await;
    let (tickets, go, errors) = admitted(&ready, prepared, of);
    report.errors.extend(errors);
    let mut out = Vec::new();
    for ((f, _), (t, go)) in ready.into_iter().zip(tickets.into_iter().zip(go)) {
        if go {
            out.push((f, t));
        } else {
            // Recorded but not deleted: settled as such, so no false entry stays.
            for ticket in &t {
                archive.settle(ticket, false).await;
            }
        }
    }
    out
}

type Ticket = crate::archive::store::Ticket;

/// What the archive is asked to record for a stage, in order: each object, then its custom
/// resources; `of[k]` is (the object item k belongs to, whether item k is that object itself).
fn archive_items(
    ready: &[(Found, Vec<crate::archive::store::Item>)],
    reason: crate::archive::DeletionReason,
) -> (Vec<crate::archive::store::Item>, Vec<(usize, bool)>) {
    let mut items = Vec::new();
    let mut of = Vec::new();
    for (i, (f, crs)) in ready.iter().enumerate() {
        items.push(crate::archive::store::Item {
            resource: f.resource.clone(),
            namespaced: false,
            namespace: None,
            name: f.name.clone(),
            uid: f.uid.clone(),
            expect_rv: None,
            reason: reason.clone(),
            object: None,
            in_sweeper_namespace: true,
        });
        of.push((i, true));
        for cr in crs {
            items.push(cr.clone());
            of.push((i, false));
        }
    }
    (items, of)
}

/// The deletion-safety decision on the archive's answers, pure: per object of `ready`, its
/// tickets and whether it may be deleted now. An object that changed (gone, replaced) waits for
/// the next pass to judge it again; one the archive failed to record waits and is reported; a
/// custom resource gone meanwhile has nothing to keep and holds nothing up.
fn admitted(
    ready: &[(Found, Vec<crate::archive::store::Item>)],
    prepared: Vec<crate::archive::store::Prepared>,
    of: Vec<(usize, bool)>,
) -> (Vec<Vec<Ticket>>, Vec<bool>, Vec<PassError>) {
    use crate::archive::then_act::{AfterArchive, IfChanged, NotNow, admit};
    let mut tickets: Vec<Vec<Ticket>> = vec![Vec::new(); ready.len()];
    let mut go = vec![true; ready.len()];
    let mut errors = Vec::new();
    for (p, (i, is_object)) in prepared.into_iter().zip(of) {
        // The object itself was judged on what was listed; its custom resources go with it.
        let if_changed = if is_object {
            IfChanged::Wait
        } else {
            IfChanged::Act
        };
        match admit(p, if_changed) {
            AfterArchive::Act(Some(t)) => tickets[i].push(t),
            AfterArchive::Act(None) => {}
            AfterArchive::NotNow(NotNow::Changed) => go[i] = false,
            AfterArchive::NotNow(NotNow::Failed(source)) => {
                go[i] = false;
                errors.push(PassError::Archive {
                    kind: ready[i].0.kind_key(),
                    name: ready[i].0.name.clone(),
                    source,
                });
            }
        }
    }
    (tickets, go, errors)
}

/// Every custom resource a CRD holds, as full objects with their resource and scope.
async fn custom_resources(
    client: &Client,
    crd: &str,
) -> Result<
    Vec<(kube::api::ApiResource, bool, serde_json::Value)>,
    crate::archive::store::ArchiveError,
> {
    use crate::archive::store::ArchiveError;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let Some(c) = Api::<CustomResourceDefinition>::all(client.clone())
        .get_opt(crd)
        .await
        .map_err(|source| ArchiveError::Crd {
            name: crd.to_string(),
            source,
        })?
    else {
        return Ok(Vec::new());
    };
    let spec = &c.spec;
    // A served version: the storage version may be no longer served, and listing it would 404.
    let Some(version) = spec
        .versions
        .iter()
        .find(|v| v.served && v.storage)
        .or_else(|| spec.versions.iter().find(|v| v.served))
    else {
        // Nobody can read them, so nobody can archive them: deleted unarchived, like an object
        // over the size cap, and said so.
        tracing::warn!(
            crd,
            "the CRD serves no version: its custom resources cannot be archived"
        );
        return Ok(Vec::new());
    };
    let gvk = kube::api::GroupVersionKind::gvk(&spec.group, &version.name, &spec.names.kind);
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, &spec.names.plural);
    let namespaced = spec.scope == "Namespaced";
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut out = Vec::new();
    let established = {
        use kube::runtime::wait::{Condition, conditions::is_crd_established};
        is_crd_established().matches_object(Some(&c))
    };
    let mut lp = kube::api::ListParams::default().limit(500);
    loop {
        let page = match api.list(&lp).await {
            Ok(p) => p,
            // An established CRD's served version answering 404 is a passing state (a version
            // just changed): retried, never taken for "nothing to archive". One never
            // established serves nothing, so nothing was created through it.
            Err(kube::Error::Api(s)) if s.code == 404 && !established => return Ok(out),
            Err(source) => {
                return Err(ArchiveError::CustomResources {
                    crd: crd.to_string(),
                    source,
                });
            }
        };
        for o in page.items {
            out.push((
                resource.clone(),
                namespaced,
                serde_json::to_value(&o).unwrap_or_default(),
            ));
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => return Ok(out),
        }
    }
}

/// What one DELETE did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deleted {
    /// Deleted and gone at once.
    Now,
    /// Deleted; finalizers hold it for now.
    Held,
    /// 404: already gone, not by this DELETE.
    AlreadyGone,
    /// 409: the precondition failed (a new object took the name, or it changed since archived);
    /// the next pass judges it again.
    Changed,
}

impl Deleted {
    fn gone(self) -> bool {
        matches!(self, Deleted::Now | Deleted::AlreadyGone)
    }
    fn by_us(self) -> bool {
        matches!(self, Deleted::Now | Deleted::Held)
    }
}

/// Deletes `f` (guarded by its uid, and by `resource_version` when it was archived).
async fn delete(
    client: &Client,
    f: &Found,
    resource_version: Option<String>,
) -> Result<Deleted, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &f.resource);
    // uid precondition: a same-named object created after we listed is not ours to delete.
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(f.uid.clone()),
            resource_version,
        }),
        ..Default::default()
    };
    match api.delete(&f.name, &dp).await {
        Ok(either) if either.is_right() => Ok(Deleted::Now),
        Ok(_) => Ok(Deleted::Held),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Deleted::AlreadyGone),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Deleted::Changed),
        Err(e) => Err(e),
    }
}

/// Whether a DELETE of `f` that failed with `e` may still have deleted it. Not when the fence
/// refused it (paused, or not the leader: it was never sent). Otherwise the object itself tells
/// (an admission webhook's 403 or a 422 leaves it as it was; a lost answer may not): gone,
/// replaced or being deleted means it took effect. When even that read fails the entry is kept:
/// a record is never lost for an object that may be gone.
async fn took_effect(client: &Client, f: &Found, e: &kube::Error) -> bool {
    if crate::engine::client::refusal(e).is_some() {
        return false;
    }
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &f.resource);
    match api.get_metadata_opt(&f.name).await {
        Ok(m) => crate::engine::meta::deleted_or_deleting(m.as_ref().map(|m| &m.metadata), &f.uid),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests;
