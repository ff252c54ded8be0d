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
use kube::api::{DeleteParams, DynamicObject, Preconditions};
use kube::{Api, Client};
use futures::StreamExt;
use std::collections::BTreeMap;

/// Deletes in flight at once within a teardown stage.
const DELETE_CONCURRENCY: usize = 8;

#[derive(Clone, Debug)]
pub struct TeardownSettings {
    pub strategy: Strategy,
    pub scan_kinds: Vec<String>,
    pub dry_run: bool,
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
}

pub async fn pass(
    client: &Client,
    id: &TenantId,
    resources: &[DeletableResource],
    settings: &TeardownSettings,
    metrics: &TenantMetrics,
) -> PassReport {
    let inv: Inventory = inventory::find(
        client,
        id,
        resources,
        settings.strategy,
        &settings.scan_kinds,
    )
    .await;
    let mut report = PassReport {
        listed: inv.listed,
        errors: inv.errors.iter().cloned().map(Into::into).collect(),
        ..Default::default()
    };
    metrics.listed(settings.strategy, inv.listed);
    // CRDs before everything else; namespaces last, so RBAC and webhooks they may need go first.
    // Within a stage, deletes run concurrently (bounded).
    let (namespaces, others): (Vec<&Found>, Vec<&Found>) =
        inv.objects.iter().partition(|f| f.resource.group.is_empty() && f.resource.kind == "Namespace");
    for stage in [inv.crds.iter().collect::<Vec<_>>(), others, namespaces] {
        let mut todo = Vec::new();
        for f in stage {
            *report.remaining.entry(f.kind_key()).or_default() += 1;
            if f.deleting {
                if !f.finalizers.is_empty() {
                    report.stuck.push(format!("{} {} [{}]", f.kind_key(), f.name, f.finalizers.join(", ")));
                }
            } else if settings.dry_run {
                report.would_delete.push(format!("{} {}", f.kind_key(), f.name));
            } else {
                todo.push(f.clone());
            }
        }
        // Owned items and client: the futures must not borrow (they run inside the controller).
        let results: Vec<(Found, Result<(), TeardownError>)> = futures::stream::iter(todo)
            .map(|f| {
                let client = client.clone();
                async move {
                    let r = delete(&client, &f).await;
                    (f, r)
                }
            })
            .buffer_unordered(DELETE_CONCURRENCY)
            .collect()
            .await;
        for (f, result) in results {
            match result {
                Ok(()) => {
                    report.deleted += 1;
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
    report.done = inv.is_empty() && report.errors.is_empty() && !settings.dry_run;
    report
}

async fn delete(client: &Client, f: &Found) -> Result<(), TeardownError> {
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
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(TeardownError::Delete {
            kind: f.kind_key(),
            name: f.name.clone(),
            message: e.to_string(),
        }),
    }
}
