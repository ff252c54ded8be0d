//! One teardown pass for a deleted tenant. Idempotent and stateless: it re-finds what is left,
//! deletes what is not already being deleted, and says whether anything remains. The controller
//! calls it until it reports `done`, then releases the finalizer; a crash anywhere just means
//! the next pass finds less.
//!
//! Order: the tenant's CRDs first (which removes their custom resources), then every other
//! cluster-scoped `<id>-` object, namespaces included; namespaces are then waited for (the
//! namespace controller empties them) and reported by name when stuck.

use super::id::TenantId;
use super::inventory::{self, Found, Inventory, Strategy};
use super::metrics::TenantMetrics;
use crate::engine::discovery::DeletableResource;
use crate::engine::name_index::{self, NameIndex};
use futures::StreamExt;
use kube::api::{DeleteParams, DynamicObject, Preconditions};
use kube::{Api, Client};
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub struct TeardownSettings {
    pub strategy: Strategy,
    pub scan_kinds: Vec<String>,
    pub dry_run: bool,
    /// Deletes in flight at once within a teardown stage.
    pub delete_concurrency: usize,
}

#[derive(Debug, thiserror::Error, Clone)]
pub enum TeardownError {
    #[error("cannot delete {kind} {name}: {message}")]
    Delete {
        kind: String,
        name: String,
        message: String,
    },
    #[error(transparent)]
    Inventory(#[from] inventory::InventoryError),
}

#[derive(Debug, Default)]
pub struct PassReport {
    /// Nothing of the tenant is left and nothing failed: the finalizer may go.
    pub done: bool,
    /// What is still there, by kind (`group/Kind`, core kinds bare).
    pub remaining: BTreeMap<String, u64>,
    pub deleted: u64,
    pub listed: u64,
    /// Objects being deleted but held by finalizers: `Kind name [finalizers]`.
    pub stuck: Vec<String>,
    pub errors: Vec<TeardownError>,
    /// Dry run: what would be deleted.
    pub would_delete: Vec<String>,
    /// etcd's revision when the teardown began (`index` strategy): the caller hands it back to
    /// every later pass of the same teardown; see [`inventory::confirm`].
    pub since: Option<u64>,
    /// The objects the API server deleted at once in this pass (no finalizer held them).
    gone: Vec<Found>,
}

pub async fn pass(
    client: &Client,
    id: &TenantId,
    resources: &[DeletableResource],
    settings: &TeardownSettings,
    metrics: &TenantMetrics,
    index: &NameIndex,
    since: Option<u64>,
) -> PassReport {
    let mut report = PassReport::default();
    if settings.strategy == Strategy::Index {
        // Read before anything is found: whatever the tenant has at this revision is seen.
        report.since = match since {
            Some(s) => Some(s),
            None => name_index::current_revision(client).await,
        };
    }
    let inv: Inventory = inventory::find(
        client,
        id,
        resources,
        settings.strategy,
        &settings.scan_kinds,
        index,
    )
    .await;
    let mut done = delete_found(client, id, inv, settings, metrics, &mut report).await;
    if done && settings.strategy == Strategy::Index {
        // The index said nothing is left (or everything went at once): one authoritative check
        // before the finalizer may go. What it finds is deleted now and checked again next pass.
        let check = inventory::confirm(
            client,
            id,
            resources,
            &settings.scan_kinds,
            index,
            report.since,
            &report.gone,
        )
        .await;
        if !check.is_empty() || !check.errors.is_empty() {
            tracing::info!(tenant = %id, found = check.crds.len() + check.objects.len(), "the last check found objects the index had not seen yet");
            delete_found(client, id, check, settings, metrics, &mut report).await;
            done = false;
        } else {
            // What the check listed counts even when it found nothing.
            report.listed += check.listed;
        }
    }
    metrics.listed(settings.strategy, report.listed);
    report.done = done;
    report
}

/// Deletes what `inv` holds, stage by stage, into `report`; true when nothing is left of it:
/// nothing was found, or everything found was deleted outright (the API server answered with a
/// Status, not an object still held by finalizers), so it need not be listed again to be seen
/// gone.
async fn delete_found(
    client: &Client,
    id: &TenantId,
    inv: Inventory,
    settings: &TeardownSettings,
    metrics: &TenantMetrics,
    report: &mut PassReport,
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
            } else if settings.dry_run {
                report
                    .would_delete
                    .push(format!("{} {}", f.kind_key(), f.name));
            } else {
                todo.push(f.clone());
            }
        }
        // Owned items and client: the futures must not borrow (they run inside the controller).
        let results: Vec<(Found, Result<bool, TeardownError>)> = futures::stream::iter(todo)
            .map(|f| {
                let client = client.clone();
                async move {
                    let r = delete(&client, &f).await;
                    (f, r)
                }
            })
            .buffer_unordered(settings.delete_concurrency.max(1))
            .collect()
            .await;
        for (f, result) in results {
            match result {
                Ok(gone) => {
                    report.deleted += 1;
                    if gone {
                        report.gone.push(f.clone());
                    }
                    metrics.deleted(&f.kind_key());
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

/// Deletes `f`; `Ok(true)` when the object is gone now, `Ok(false)` when finalizers hold it.
async fn delete(client: &Client, f: &Found) -> Result<bool, TeardownError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &f.resource);
    // uid precondition: a same-named object created after we listed is not ours to delete.
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(f.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&f.name, &dp).await {
        Ok(either) => Ok(either.is_right()),
        // 404: already gone. 409: the uid precondition failed, a new object took the name; it is
        // not the one we found, so this pass leaves it to the next one to judge.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(TeardownError::Delete {
            kind: f.kind_key(),
            name: f.name.clone(),
            message: e.to_string(),
        }),
    }
}
