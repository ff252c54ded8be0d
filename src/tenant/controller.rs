//! The tenant controller: `kubezoo.io/tenant` finalizer on every valid Tenant; on deletion,
//! teardown passes until nothing of the tenant is left, then the finalizer goes.

use super::id::{TenantId, TenantIdError};
use super::inventory::Strategy;
use super::metrics::TenantMetrics;
use super::teardown::{self, PassReport, TeardownSettings};
use crate::api::tenant::{Condition, Tenant, TenantStatus};
use crate::engine::discovery::DiscoveryReport;
use crate::engine::events::Publisher;
use crate::engine::finalizer::{self, Stage};
use crate::engine::guard::{self, Guarded, Invalid, WatchHealth};
use crate::engine::name_index::{IndexWatches, NameIndex};
use crate::engine::progress::Teardowns;
use crate::metrics::InvalidObjectLabels;
use crate::server::AppState;
use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Client, Resource, ResourceExt};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// KubeZoo's finalizer name, kept exactly for compatibility.
pub const FINALIZER: &str = "kubezoo.io/tenant";

/// The collector's name in the teardown registry (`sweeper status`).
const COLLECTOR: &str = "tenant";

pub struct TenantCtx {
    pub client: Client,
    pub settings: TeardownSettings,
    pub metrics: TenantMetrics,
    pub discovery: watch::Receiver<Option<Arc<DiscoveryReport>>>,
    events: Publisher,
    teardowns: Teardowns,
    /// `sweeper_invalid_objects_total`, shared with the other collectors.
    invalid_objects: Family<InvalidObjectLabels, Counter>,
    /// The last Warning published per tenant uid (reason and note): a blocked teardown requeues
    /// every few seconds, and KubeZoo's Tenant CRD has no status subresource to compare against,
    /// so repeats are suppressed here. Forgotten when the tenant's finalizer is released.
    warned: Mutex<HashMap<String, String>>,
    /// Cluster-scoped objects by name, kept by watches while the strategy is `index`.
    index: NameIndex,
}

impl TenantCtx {
    pub fn new(
        client: Client,
        settings: TeardownSettings,
        metrics: TenantMetrics,
        discovery: watch::Receiver<Option<Arc<DiscoveryReport>>>,
        teardowns: Teardowns,
        invalid_objects: Family<InvalidObjectLabels, Counter>,
    ) -> Self {
        TenantCtx {
            events: Publisher::new(client.clone(), "sweeper-tenant", "TenantGC"),
            client,
            settings,
            metrics,
            discovery,
            teardowns,
            invalid_objects,
            warned: Mutex::default(),
            index: NameIndex::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TenantError {
    #[error(transparent)]
    Finalizer(#[from] finalizer::FinalizerError),
    #[error("cannot update the status of tenant {name}: {source}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The readiness component of this collector (not ready while the Tenant watch keeps failing).
pub const COMPONENT: &str = "tenant";

pub async fn run(ctx: Arc<TenantCtx>, state: AppState, shutdown: CancellationToken) {
    let api: Api<Guarded<Tenant>> = Api::all(ctx.client.clone());
    let health = WatchHealth {
        state,
        component: COMPONENT,
    };
    let index = (ctx.settings.strategy == Strategy::Index).then(|| {
        tokio::spawn(follow_discovery(
            IndexWatches::new(ctx.client.clone(), ctx.index.clone()),
            ctx.discovery.clone(),
            shutdown.clone(),
        ))
    });
    guard::controller(api, health)
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(reconcile_guarded, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "tenant reconcile");
            }
        })
        .await;
    if let Some(task) = index {
        task.abort();
    }
    tracing::info!("tenant collector stopped");
}

/// Keeps the index's watches on the cluster-scoped resources discovery finds.
async fn follow_discovery(
    mut watches: IndexWatches,
    mut discovery: watch::Receiver<Option<Arc<DiscoveryReport>>>,
    shutdown: CancellationToken,
) {
    loop {
        if let Some(report) = discovery.borrow_and_update().clone() {
            watches.reconcile(&report.resources);
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = discovery.changed() => if changed.is_err() { return },
        }
    }
}

fn error_policy(_t: Arc<Guarded<Tenant>>, e: &TenantError, _ctx: Arc<TenantCtx>) -> Action {
    tracing::warn!(error = %e, "tenant reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

fn condition(type_: &str, ok: bool, reason: &str, message: String) -> Condition {
    Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_transition_time: Some(k8s_openapi::jiff::Timestamp::now().to_string()),
    }
}

/// Writes `status` unless it says what the object already says (status writes re-trigger the
/// controller: writing unchanged status would loop). Conditions keep their transition time while
/// their status holds.
async fn set_status(
    api: &Api<Tenant>,
    t: &Tenant,
    mut status: TenantStatus,
) -> Result<bool, TenantError> {
    let current = t.status.clone().unwrap_or_default();
    for c in &mut status.conditions {
        if let Some(old) = current
            .conditions
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
        {
            c.last_transition_time = old.last_transition_time.clone();
        }
    }
    if serde_json::to_value(&current).ok() == serde_json::to_value(&status).ok() {
        return Ok(false);
    }
    let name = t.name_any();
    let patch = serde_json::json!({ "status": status });
    match api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(source) => Err(TenantError::Status { name, source }),
    }
}

/// Publishes a Warning unless it repeats the last one on this tenant; true when published.
async fn warn_once<K: Resource<DynamicType = ()>>(
    ctx: &TenantCtx,
    t: &K,
    reason: &str,
    note: String,
) -> bool {
    let key = t.meta().uid.clone().unwrap_or_default();
    let said = format!("{reason}: {note}");
    let repeat = ctx
        .warned
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, said.clone())
        .is_some_and(|last| last == said);
    if !repeat {
        ctx.events
            .emit(&t.object_ref(&()), EventType::Warning, reason, note)
            .await;
    }
    !repeat
}

fn forget_warnings(ctx: &TenantCtx, t: &Tenant) {
    if let Some(uid) = &t.metadata.uid {
        ctx.warned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(uid);
    }
}

async fn event(ctx: &TenantCtx, t: &Tenant, type_: EventType, reason: &str, note: String) {
    ctx.events
        .emit(&t.object_ref(&()), type_, reason, note)
        .await;
}

#[tracing::instrument(skip_all, fields(tenant = %g.name_any()))]
async fn reconcile_guarded(
    g: Arc<Guarded<Tenant>>,
    ctx: Arc<TenantCtx>,
) -> Result<Action, TenantError> {
    match &g.0 {
        Ok(t) => reconcile(t, &ctx).await,
        Err(bad) => undecodable(&ctx, &g, bad).await,
    }
}

/// A Tenant sweeper cannot read: reported on the object (Event, condition where the CRD has a
/// status subresource), in the log and in `sweeper_invalid_objects_total`; nothing is deleted.
/// Unlike an invalid id (the name can never change, so the finalizer is released), a malformed
/// spec can be fixed: a finalizer we already hold stays, and the teardown runs once it decodes.
async fn undecodable(
    ctx: &TenantCtx,
    g: &Guarded<Tenant>,
    bad: &Invalid,
) -> Result<Action, TenantError> {
    let message = format!(
        "Tenant {} cannot be read: {bad}; nothing is deleted for it until it is fixed",
        g.name_any()
    );
    if !warn_once(ctx, g, "InvalidObject", message.clone()).await {
        return Ok(Action::await_change());
    }
    tracing::warn!(field = %bad.field, error = %bad.error, "undecodable tenant: nothing will be deleted for it");
    ctx.invalid_objects
        .get_or_create(&InvalidObjectLabels {
            collector: COLLECTOR.into(),
            kind: "Tenant".into(),
        })
        .inc();
    let status = TenantStatus {
        phase: Some("Invalid".into()),
        last_error: Some(message.clone()),
        conditions: vec![condition("Valid", false, "InvalidObject", message)],
        ..Default::default()
    };
    let api: Api<Tenant> = Api::all(ctx.client.clone());
    let patch = serde_json::json!({ "status": status });
    match api
        .patch_status(
            &g.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        // 404: the CRD has no status subresource (KubeZoo's own has none); the Event stands.
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(source) => {
            return Err(TenantError::Status {
                name: g.name_any(),
                source,
            });
        }
    }
    Ok(Action::await_change())
}

async fn reconcile(t: &Tenant, ctx: &TenantCtx) -> Result<Action, TenantError> {
    let name = t.name_any();
    let api: Api<Tenant> = Api::all(ctx.client.clone());
    let stage = finalizer::stage(t, FINALIZER);
    let id = match TenantId::parse(&name, t.spec.id.as_ref()) {
        Ok(id) => id,
        Err(e) => return invalid(ctx, &api, t, stage, e).await,
    };
    match stage {
        Stage::AddFinalizer if !ctx.settings.dry_run => {
            finalizer::add(&api, t, FINALIZER).await?;
            Ok(Action::await_change())
        }
        Stage::AddFinalizer | Stage::Live | Stage::NotOurs => {
            if stage == Stage::Live {
                let status = TenantStatus {
                    phase: Some("Active".into()),
                    conditions: vec![condition(
                        "IdValid",
                        true,
                        "Valid",
                        format!("objects of this tenant are named {}", id.prefix()),
                    )],
                    ..Default::default()
                };
                set_status(&api, t, status).await?;
            }
            Ok(Action::await_change())
        }
        Stage::Cleanup => cleanup(ctx, &api, t, &id).await,
    }
}

/// An invalid id is never used as a prefix: nothing is deleted. A tenant that carries our
/// finalizer anyway is released, so it does not hang.
async fn invalid(
    ctx: &TenantCtx,
    api: &Api<Tenant>,
    t: &Tenant,
    stage: Stage,
    e: TenantIdError,
) -> Result<Action, TenantError> {
    let status = TenantStatus {
        phase: Some("Invalid".into()),
        last_error: Some(e.to_string()),
        conditions: vec![condition("IdValid", false, "InvalidId", e.to_string())],
        ..Default::default()
    };
    set_status(api, t, status).await?;
    // Reported once per change, not on every resync.
    if warn_once(ctx, t, "InvalidTenantId", e.to_string()).await {
        tracing::warn!(error = %e, "invalid tenant: nothing will be deleted for it");
        ctx.metrics.invalid_tenants.inc();
    }
    if stage == Stage::Cleanup {
        finalizer::remove(api, t, FINALIZER).await?;
        forget_warnings(ctx, t);
    }
    Ok(Action::await_change())
}

async fn cleanup(
    ctx: &TenantCtx,
    api: &Api<Tenant>,
    t: &Tenant,
    id: &TenantId,
) -> Result<Action, TenantError> {
    let name = t.name_any();
    let Some(discovery) = ctx.discovery.borrow().clone() else {
        return Ok(Action::requeue(Duration::from_secs(1))); // first discovery not done yet
    };
    let object = format!("Tenant/{name}");
    if ctx.teardowns.begin(COLLECTOR, &object).1 {
        ctx.metrics.teardowns_in_progress.inc();
    }
    let mut report = teardown::pass(
        &ctx.client,
        id,
        &discovery.resources,
        &ctx.settings,
        &ctx.metrics,
        &ctx.index,
    )
    .await;
    // A group we could not discover may hold tenant objects: the finalizer stays until it is back.
    let failed_groups: Vec<String> = discovery
        .failed
        .iter()
        .map(|f| f.group_version.clone())
        .collect();
    if !failed_groups.is_empty() {
        report.done = false;
    }
    if report.done {
        finalizer::remove(api, t, FINALIZER).await?;
        forget_warnings(ctx, t);
        let secs = ctx
            .teardowns
            .finish(COLLECTOR, &object)
            .unwrap_or_default()
            .as_secs_f64();
        ctx.metrics.teardowns_in_progress.dec();
        ctx.metrics.teardowns_completed.inc();
        ctx.metrics.teardown_seconds.observe(secs);
        tracing::info!(
            seconds = secs,
            "tenant teardown complete; finalizer released"
        );
        event(
            ctx,
            t,
            EventType::Normal,
            "TeardownComplete",
            format!("every object of tenant {id} is gone ({secs:.1}s)"),
        )
        .await;
        return Ok(Action::await_change());
    }
    let mut errors: Vec<String> = report.errors.iter().map(|e| e.to_string()).collect();
    errors.extend(
        failed_groups
            .iter()
            .map(|g| format!("API group {g} failed discovery; its objects cannot be checked")),
    );
    let status = status_of(&report, &errors, ctx.settings.dry_run);
    if let Some(phase) = &status.phase {
        let detail = status
            .conditions
            .first()
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        ctx.teardowns
            .update(COLLECTOR, &object, phase.clone(), detail);
    }
    set_status(api, t, status).await?;
    if let Some(first) = errors.first() {
        warn_once(ctx, t, "TeardownBlocked", first.clone()).await;
        return Ok(Action::requeue(Duration::from_secs(5)));
    }
    if ctx.settings.dry_run {
        tracing::info!(would_delete = ?report.would_delete, "dry run: tenant teardown plan");
        return Ok(Action::requeue(Duration::from_secs(60)));
    }
    Ok(Action::requeue(Duration::from_secs(
        if report.deleted > 0 { 1 } else { 2 },
    )))
}

fn status_of(report: &PassReport, errors: &[String], dry_run: bool) -> TenantStatus {
    let phase = if dry_run {
        "DryRun"
    } else if errors.is_empty() {
        "Deleting"
    } else {
        "Blocked"
    };
    let message = if dry_run {
        format!("dry run: would delete {}", report.would_delete.join(", "))
    } else {
        format!("{} objects remain", report.remaining.values().sum::<u64>())
    };
    TenantStatus {
        phase: Some(phase.into()),
        remaining: Some(report.remaining.clone()),
        last_error: errors.first().cloned(),
        stuck: report.stuck.clone(),
        conditions: vec![condition("TeardownComplete", false, phase, message)],
    }
}
