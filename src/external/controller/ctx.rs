//! What both kinds' teardowns share: the clients, the AWS sessions, the metrics, the Event
//! publisher and the collector's settings (its flags).

use crate::engine::events::Publisher;
use crate::engine::selector::LabelFilter;
use crate::external::controller::Mode;
use crate::external::controller::metrics::ExternalMetrics;
use crate::external::core::capi::Capi;
use crate::metrics::InvalidObjectLabels;
use kube::Client;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sweeper_aws::session::SessionCache;

/// What both kinds' teardowns share: clients, metrics, the Event publisher.
pub struct ExternalCtx {
    /// How long the AWS audit records live (`--archive-ttl`).
    pub audit_ttl: Duration,
    /// Where the AWS audit records are written: sweeper's own namespace (`--namespace`), so the
    /// narrow role needs ConfigMap access there only.
    pub audit_namespace: String,
    pub client: Client,
    /// Cluster API lookups, with discovery kept for the collector's life (both kinds share it).
    pub(crate) capi: Capi,
    /// One AWS session per cluster (its region and identity chain).
    pub sessions: Arc<SessionCache>,
    /// CAPA's own namespace, where static identities' Secrets live (`--capa-namespace`).
    pub capa_namespace: String,
    /// Teardowns of one kind run at once (`--external-concurrency`).
    pub concurrency: u16,
    pub metrics: ExternalMetrics,
    /// AlternativeGCStrategy: discover with describe calls instead of the tagging API.
    pub alternative_discovery: bool,
    /// `--external-gc-selector`: the objects this collector takes.
    pub selector: LabelFilter,
    /// `--scope-namespaces`: the namespaces it watches (empty: all). Outside them nothing is seen.
    pub scope: Vec<String>,
    /// `--external-ebs-snapshot`: snapshot volumes before the opt-in `ebs-volume` task deletes them.
    pub ebs_snapshot: bool,
    /// `--external-dry-run`: plan each teardown and report it; delete nothing, take no finalizer.
    pub dry_run: bool,
    pub(super) events: Publisher,
    /// `sweeper_invalid_objects_total`, shared with the other collectors.
    pub(super) invalid_objects: Family<InvalidObjectLabels, Counter>,
    /// Refused identities in a row, per object uid: the retry backs off.
    refusals: Mutex<HashMap<String, u32>>,
    /// The Clusters' pause as the Cluster watch last saw it: lets `sweeper status` show a live,
    /// guarded cluster as paused without a read per reconcile.
    pub(crate) pauses: crate::external::controller::cluster_watch::Pauses,
}

impl ExternalCtx {
    pub fn new(
        client: Client,
        sessions: Arc<SessionCache>,
        metrics: ExternalMetrics,
        alternative_discovery: bool,
        invalid_objects: Family<InvalidObjectLabels, Counter>,
    ) -> Self {
        ExternalCtx {
            events: Publisher::new(client.clone(), "sweeper-external", "ExternalResourceGC"),
            capi: Capi::new(client.clone()),
            client,
            sessions,
            capa_namespace: "capa-system".into(),
            concurrency: 8,
            metrics,
            alternative_discovery,
            selector: LabelFilter::default(),
            scope: Vec::new(),
            ebs_snapshot: true,
            dry_run: false,
            invalid_objects,
            audit_ttl: Duration::from_secs(72 * 3600),
            audit_namespace: "sweeper-system".into(),
            refusals: Mutex::new(HashMap::new()),
            pauses: Default::default(),
        }
    }

    /// CAPA's namespace, where static identities' Secrets are read (`--capa-namespace`).
    pub fn with_capa_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.capa_namespace = namespace.into();
        self
    }

    /// Plan and report every teardown, delete nothing (`--external-dry-run`).
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// At most `n` teardowns of each kind at once.
    pub fn with_concurrency(mut self, n: u16) -> Self {
        self.concurrency = n;
        self
    }

    /// How its passes run (the request builder's [`Mode`]), from its flags.
    pub fn mode(&self) -> Mode {
        Mode {
            dry_run: self.dry_run,
            alternative_discovery: self.alternative_discovery,
            ebs_snapshot: self.ebs_snapshot,
        }
    }

    /// The next retry after a refused identity: 5 s, doubling to 5 minutes.
    pub(super) fn refused_again(&self, uid: &str) -> Duration {
        let mut map = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(uid.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        Duration::from_secs(5u64.saturating_mul(1 << (*n - 1).min(6)).min(300))
    }

    pub(super) fn accepted(&self, uid: &str) {
        self.refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }

    /// How long the AWS audit records are kept (`--archive-ttl`).
    pub fn with_audit_ttl(mut self, ttl: Duration) -> Self {
        self.audit_ttl = ttl;
        self
    }

    /// Sweeper's own namespace, where the AWS audit records are written.
    pub fn with_audit_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.audit_namespace = namespace.into();
        self
    }

    pub fn with_ebs_snapshot(mut self, on: bool) -> Self {
        self.ebs_snapshot = on;
        self
    }

    /// Only the objects in `namespaces` (empty: all) are watched (`--scope-namespaces`).
    pub fn with_scope(mut self, namespaces: Vec<String>) -> Self {
        self.scope = namespaces;
        self
    }

    /// Only the objects `selector` selects (see `--external-gc-selector`).
    pub fn with_selector(mut self, selector: LabelFilter) -> Self {
        self.selector = selector;
        self
    }
}
