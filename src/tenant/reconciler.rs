//! The tenant collector: the `kubezoo.io/tenant` finalizer on every valid Tenant; on deletion,
//! teardown passes until nothing of the tenant is left, then the finalizer goes. The finalizer
//! dispatch, registry, metrics and completion Event are the engine's
//! (engine::finalizer_controller); this module supplies validation, the live status and one pass.

use super::id::{TenantId, TenantIdError};
use super::metrics::TenantMetrics;
use super::pass::{self, PassSettings};
use super::status::{self, StatusError, Warnings, condition, set_status, status_of};
use crate::api::tenant::{Tenant, TenantStatus};
use crate::config::TenantGcStrategy;
use crate::engine::discovery::DiscoveryReport;
use crate::engine::events::Publisher;
use crate::engine::finalizer::{FinalizerError, Stage};
use crate::engine::finalizer_controller::{
    Checked, FinalizerController, Pass, Reconciler, Watches,
};
use crate::engine::guard::{Guarded, Invalid};
use crate::engine::name_index::{IndexWatches, NameIndex};
use crate::engine::selector::LabelFilter;
use crate::engine::teardown_registry::TeardownRegistry;
use crate::metrics::InvalidObjectLabels;
use kube::{Api, Client, ResourceExt};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// KubeZoo's finalizer name, kept exactly for compatibility.
pub const FINALIZER: &str = "kubezoo.io/tenant";

/// The collector's name in the teardown registry (`sweeper status`) and in metrics.
const COLLECTOR: &str = "tenant";

/// How long a pass waits for the first discovery before it reports waiting and retries.
const FIRST_DISCOVERY_WAIT: Duration = Duration::from_secs(5);

/// The readiness component of this collector (not ready while the Tenant watch keeps failing).
pub const COMPONENT: &str = "tenant";

pub struct TenantCtx {
    pub client: Client,
    pub settings: PassSettings,
    pub metrics: TenantMetrics,
    pub discovery: watch::Receiver<Option<Arc<DiscoveryReport>>>,
    /// `sweeper_invalid_objects_total`, shared with the other collectors.
    invalid_objects: Family<InvalidObjectLabels, Counter>,
    warnings: Warnings,
    /// Cluster-scoped objects by name, kept by watches while the strategy is `index`.
    index: NameIndex,
    /// Per tenant uid, etcd's revision when its teardown began (see `inventory::confirm`). Only
    /// an accelerator: lost on restart, when the next pass reads a new one.
    since: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

#[derive(Debug, thiserror::Error)]
pub enum TenantError {
    #[error(transparent)]
    Finalizer(#[from] FinalizerError),
    #[error(transparent)]
    Status(#[from] StatusError),
}

impl crate::engine::finalizer_controller::ErrorLabel for TenantError {
    fn metric_label(&self) -> &'static str {
        match self {
            TenantError::Finalizer(e) => e.metric_label(),
            TenantError::Status(_) => "status_write",
        }
    }
}

/// The tenant collector as `run` sees it: the engine's finalizer controller over [`TenantCtx`],
/// and the Tenants it watches (`--tenant-scope-selector`).
pub struct TenantCollector(Arc<FinalizerController<TenantCtx>>, LabelFilter);

impl TenantCollector {
    pub fn new(
        client: Client,
        settings: PassSettings,
        metrics: TenantMetrics,
        discovery: watch::Receiver<Option<Arc<DiscoveryReport>>>,
        registry: TeardownRegistry,
        invalid_objects: Family<InvalidObjectLabels, Counter>,
        fence: crate::engine::leader::Fence,
    ) -> Self {
        let events = Publisher::new(client.clone(), "sweeper-tenant", "TenantGC");
        let book = metrics.teardown.clone();
        let ctx = TenantCtx {
            client,
            settings,
            metrics,
            discovery,
            invalid_objects,
            warnings: Warnings::new(events.clone()),
            index: NameIndex::default(),
            since: Default::default(),
        };
        TenantCollector(
            Arc::new(FinalizerController {
                collector: COLLECTOR,
                reconciler: ctx,
                metrics: book,
                registry,
                done_reason: "TeardownComplete",
                retry_after: Duration::from_secs(5),
                events,
                fence,
                // Tenants are few; each teardown bounds its own deletes (--tenant-delete-concurrency).
                concurrency: 0,
            }),
            LabelFilter::default(),
        )
    }

    /// Only the Tenants `selector` selects are watched (`--tenant-scope-selector`).
    pub fn with_scope(mut self, selector: LabelFilter) -> Self {
        self.1 = selector;
        self
    }
}

impl crate::collector::built::Collector for TenantCollector {
    fn components(&self) -> Vec<&'static str> {
        vec![COMPONENT]
    }

    fn run(
        self: Box<Self>,
        env: crate::collector::built::RunEnv,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(run(self.0, self.1, env.state, env.shutdown))
    }
}

async fn run(
    driver: Arc<FinalizerController<TenantCtx>>,
    scope: LabelFilter,
    state: crate::engine::health::Health,
    shutdown: CancellationToken,
) {
    let ctx = &driver.reconciler;
    let index = (ctx.settings.strategy == TenantGcStrategy::Index).then(|| {
        tokio::spawn(follow_discovery(
            IndexWatches::new(ctx.client.clone(), ctx.index.clone()),
            ctx.discovery.clone(),
            shutdown.clone(),
        ))
    });
    let watches = Watches::all(ctx.client.clone()).labelled(&scope.to_string());
    driver
        .run(watches, state, COMPONENT, shutdown, || None)
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

impl Reconciler for TenantCtx {
    type Object = Tenant;
    type Input = TenantId;
    type Admitted = ();
    type Error = TenantError;

    fn finalizer(&self) -> &'static str {
        FINALIZER
    }

    /// An invalid id means the tenant's objects cannot be named: no finalizer is taken.
    fn guard_before_validating(&self) -> bool {
        false
    }

    fn takes_finalizer(&self) -> bool {
        !self.settings.dry_run
    }

    fn api(&self, _t: &Tenant) -> Api<Tenant> {
        Api::all(self.client.clone())
    }

    async fn validate(
        &self,
        t: &Tenant,
        _stage: Stage,
        _admitted: (),
    ) -> Result<Checked<TenantId>, TenantError> {
        match TenantId::parse(&t.name_any(), t.spec.id.as_ref()) {
            Ok(id) => Ok(Checked::Valid(id)),
            Err(e) => self.invalid(t, e).await,
        }
    }

    async fn live(&self, t: &Tenant, id: TenantId) -> Result<(), TenantError> {
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
        set_status(&self.api(t), t, status).await?;
        Ok(())
    }

    async fn pass(&self, t: &Tenant, id: TenantId) -> Result<Pass, TenantError> {
        // The first discovery is usually a fraction of a second behind the first reconcile of a
        // restart: waiting for it here costs that, where a retry cost a whole `after` (issue #52).
        let mut first = self.discovery.clone();
        let _ = tokio::time::timeout(FIRST_DISCOVERY_WAIT, first.wait_for(Option::is_some)).await;
        let Some(discovery) = first.borrow().clone() else {
            // The first discovery has not finished yet.
            return Ok(Pass::Left {
                phase: "waiting for discovery".into(),
                detail: String::new(),
                after: Duration::from_secs(1),
            });
        };
        let uid = t.metadata.uid.clone().unwrap_or_default();
        let since = self.since_of(&uid, None).or_else(|| {
            pass::teardown_revision(
                t.metadata.deletion_timestamp.is_some(),
                t.resource_version().as_deref(),
            )
        });
        let mut report = pass::pass(
            &self.client,
            &id,
            &discovery.resources,
            &self.settings,
            &self.metrics,
            &self.index,
            since,
        )
        .await;
        self.since_of(&uid, report.since);
        // A group we could not discover may hold tenant objects: the finalizer stays until it
        // is back.
        let failed_groups: Vec<String> = discovery
            .failed
            .iter()
            .map(|f| f.group_version.clone())
            .collect();
        if !failed_groups.is_empty() {
            report.done = false;
        }
        if report.done {
            return Ok(Pass::Done {
                note: format!("every object of tenant {id} is gone"),
            });
        }
        let mut errors: Vec<String> = report.errors.iter().map(|e| e.to_string()).collect();
        errors.extend(
            failed_groups
                .iter()
                .map(|g| format!("API group {g} failed discovery; its objects cannot be checked")),
        );
        let status = status_of(&report, &errors, self.settings.dry_run);
        let phase = status.phase.clone().unwrap_or_default();
        let detail = status
            .conditions
            .first()
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        set_status(&self.api(t), t, status).await?;
        let after = if let Some(first) = errors.first() {
            self.warnings
                .once(t, "TeardownBlocked", first.clone())
                .await;
            Duration::from_secs(5)
        } else if self.settings.dry_run {
            tracing::info!(would_delete = ?report.would_delete, "dry run: tenant teardown plan");
            Duration::from_secs(60)
        } else if report.deleted > 0 {
            Duration::from_secs(1)
        } else {
            Duration::from_secs(2)
        };
        Ok(Pass::Left {
            phase,
            detail,
            after,
        })
    }

    /// A Tenant sweeper cannot read: reported on the object (Event, condition where the CRD has
    /// a status subresource), in the log and in `sweeper_invalid_objects_total`. Unlike an
    /// invalid id (the name can never change, so the finalizer is released), a malformed spec can
    /// be fixed: a finalizer we already hold stays, and the teardown runs once it decodes.
    async fn undecodable(&self, g: &Guarded<Tenant>, bad: &Invalid) -> Result<(), TenantError> {
        let message = format!(
            "Tenant {} cannot be read: {bad}; nothing is deleted for it until it is fixed",
            g.name_any()
        );
        if !self
            .warnings
            .once(g, "InvalidObject", message.clone())
            .await
        {
            return Ok(());
        }
        tracing::warn!(field = %bad.field, error = %bad.error, "undecodable tenant: nothing will be deleted for it");
        self.invalid_objects
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
        status::force_status(&Api::all(self.client.clone()), &g.name_any(), &status).await?;
        Ok(())
    }

    /// A Tenant gone for good (its finalizer removed by someone else, too) shows no progress.
    fn forget(&self, t: &Tenant) {
        self.metrics.progress.finish(&t.name_any());
    }

    fn released(&self, t: &Tenant) {
        self.warnings.forget(t);
        self.metrics.progress.finish(&t.name_any());
        if let Some(uid) = &t.metadata.uid {
            self.since
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(uid);
        }
    }
}

impl TenantCtx {
    /// The teardown's starting revision for `uid`; records `set` when given.
    fn since_of(&self, uid: &str, set: Option<u64>) -> Option<u64> {
        let mut since = self.since.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rev) = set {
            since.insert(uid.to_string(), rev);
        }
        since.get(uid).copied()
    }

    /// An invalid id is never used as a prefix: nothing is deleted. A tenant that carries our
    /// finalizer anyway is released, so it does not hang.
    async fn invalid(
        &self,
        t: &Tenant,
        e: TenantIdError,
    ) -> Result<Checked<TenantId>, TenantError> {
        let status = TenantStatus {
            phase: Some("Invalid".into()),
            last_error: Some(e.to_string()),
            conditions: vec![condition("IdValid", false, "InvalidId", e.to_string())],
            ..Default::default()
        };
        set_status(&self.api(t), t, status).await?;
        // Reported once per change, not on every resync.
        if self
            .warnings
            .once(t, "InvalidTenantId", e.to_string())
            .await
        {
            tracing::warn!(error = %e, "invalid tenant: nothing will be deleted for it");
            self.metrics.invalid_tenants.inc();
        }
        Ok(Checked::Invalid {
            release: true,
            retry: None,
        })
    }
}

#[cfg(test)]
mod tests;
