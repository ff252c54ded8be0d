//! The external collector, one finalizer controller per kind (AWSCluster,
//! AWSManagedControlPlane): our finalizer while the object lives; on deletion, teardown passes
//! (sweeper_aws::phases) until every phase is empty, then the finalizer goes (FR5: the cluster
//! cannot finish deleting first).
//! Bad input (annotation, cluster name) is an Event + condition and blocks deletion until fixed.
//! The finalizer dispatch, registry, metrics and completion Event are the engine's
//! (engine::finalizer_controller); this module supplies validation and one pass.

use super::annotations;
use super::capi::Capi;
use super::cluster::{
    self, ClusterNameError, ClusterNames, LinkedAnnotations, Owning, ResolveError,
};
use super::conditions::{self, Desired, Severity};
use super::identity::{self, Placement};
use super::metrics::ExternalMetrics;
use super::outcome::{self, dry_run_summary};
use super::request::{self, Mode, ObjectFacts};
use crate::api::capa::IdentityRef;
use crate::api::capa::{AWSCluster, AWSManagedControlPlane};
use crate::engine::events::Publisher;
use crate::engine::finalizer::{self, Stage};
use crate::engine::finalizer_controller::{
    Admission, Checked, FinalizerController, Pass, Pick, Reconciler, Watches,
};
use crate::engine::guard::{Guarded, Invalid};
use crate::engine::leader::Fence;
use crate::engine::selector::LabelFilter;
use crate::engine::teardown_registry::TeardownRegistry;
use crate::metrics::InvalidObjectLabels;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::events::EventType;
use kube::{Api, Client, Resource, ResourceExt};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use sweeper_aws::phases::{EksFacts, PassReport, PhaseReport, teardown_pass};
use sweeper_aws::session::SessionCache;
use tracing::Instrument;

pub const FINALIZER: &str = "sweeper.dev/external-resource-gc";

/// Where sweeper keeps, on a live AWSManagedControlPlane, the IRSA issuer CAPA recorded in its
/// status. `clusterctl move` moves annotations but not the status (CAPA#3972: the provider's ARN
/// was lost and CAPA never deleted it), so the teardown reads the status first, this second.
pub const OIDC_ISSUER_ANNOTATION: &str = "sweeper.dev/oidc-issuer";

/// The kinds the external collector handles.
pub trait GcKind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + serde::Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
    /// This kind's readiness component (not ready while its watch keeps failing).
    const COMPONENT: &'static str;

    /// The names in the cluster's AWS tags: CAPA's own and the cloud provider's.
    fn names(&self) -> Result<ClusterNames, ClusterNameError>;

    /// The cluster's VPC as the object states it (`spec.network.vpc.id`): it confirms what the
    /// LB controller and the VPC CNI tagged for a cluster of this name.
    fn vpc_ids(&self) -> Vec<String>;

    /// Where the cluster lives: `spec.region` and `spec.identityRef`.
    fn placement(&self) -> (Option<&str>, Option<&IdentityRef>);

    /// What the EKS-made kinds need, read from the object before the teardown starts; `None`
    /// for a kind that is not EKS.
    fn eks_facts(&self) -> Option<EksFacts> {
        None
    }

    /// The issuer to keep in [`OIDC_ISSUER_ANNOTATION`] while the object lives, when the
    /// annotation does not say it yet; `None` for a kind that is not EKS.
    fn issuer_to_keep(&self) -> Option<String> {
        None
    }

    /// Another object whose GC annotations also govern this one (its label and annotations),
    /// read fresh; `Ok(None)` when there is none. `owning`: the owning Cluster if this reconcile
    /// already read it (`None`: read it when needed).
    fn linked_switches(
        &self,
        capi: &Capi,
        owning: Option<Owning>,
    ) -> impl Future<Output = Result<Option<LinkedAnnotations>, ResolveError>> + Send;
}

impl GcKind for AWSCluster {
    const COMPONENT: &'static str = "external-awscluster";

    fn names(&self) -> Result<ClusterNames, ClusterNameError> {
        cluster::for_aws_cluster(self)
    }

    fn vpc_ids(&self) -> Vec<String> {
        crate::api::capa::vpc_ids(self.spec.network.as_ref())
    }

    fn placement(&self) -> (Option<&str>, Option<&IdentityRef>) {
        (self.spec.region.as_deref(), self.spec.identity_ref.as_ref())
    }

    /// CAPA and clusterawsadm agree on the AWSCluster: nothing else to read.
    async fn linked_switches(
        &self,
        _capi: &Capi,
        _owning: Option<Owning>,
    ) -> Result<Option<LinkedAnnotations>, ResolveError> {
        Ok(None)
    }
}

impl GcKind for AWSManagedControlPlane {
    const COMPONENT: &'static str = "external-awsmanagedcontrolplane";

    fn names(&self) -> Result<ClusterNames, ClusterNameError> {
        cluster::for_control_plane(self)
    }

    fn vpc_ids(&self) -> Vec<String> {
        crate::api::capa::vpc_ids(self.spec.network.as_ref())
    }

    fn placement(&self) -> (Option<&str>, Option<&IdentityRef>) {
        (self.spec.region.as_deref(), self.spec.identity_ref.as_ref())
    }

    /// The IRSA issuer CAPA recorded in `status.oidcProvider`, else the one sweeper kept from
    /// it while the object lived (none when neither says one).
    fn eks_facts(&self) -> Option<EksFacts> {
        Some(EksFacts {
            oidc_issuer: recorded_issuer(self).or_else(|| {
                self.annotations()
                    .get(OIDC_ISSUER_ANNOTATION)
                    .map(|i| i.trim().to_string())
                    .filter(|i| !i.is_empty())
            }),
        })
    }

    fn issuer_to_keep(&self) -> Option<String> {
        recorded_issuer(self).filter(|i| self.annotations().get(OIDC_ISSUER_ANNOTATION) != Some(i))
    }

    /// On EKS `clusterawsadm gc disable` annotates Cluster.spec.infrastructureRef, the
    /// AWSManagedCluster, while CAPA reads this control plane: users who opted out with CAPA's
    /// own tool have the annotation there.
    async fn linked_switches(
        &self,
        capi: &Capi,
        owning: Option<Owning>,
    ) -> Result<Option<LinkedAnnotations>, ResolveError> {
        cluster::managed_cluster_annotations(capi, self, owning).await
    }
}

/// The issuer in CAPA's `status.oidcProvider` of a control plane.
fn recorded_issuer(cp: &AWSManagedControlPlane) -> Option<String> {
    cp.status
        .as_ref()
        .and_then(|s| s.oidc_provider.as_ref())
        .and_then(|p| p.issuer())
}

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
    events: Publisher,
    /// `sweeper_invalid_objects_total`, shared with the other collectors.
    invalid_objects: Family<InvalidObjectLabels, Counter>,
    /// Refused identities in a row, per object uid: the retry backs off.
    refusals: Mutex<HashMap<String, u32>>,
    /// The Clusters' pause as the Cluster watch last saw it: lets `sweeper status` show a live,
    /// guarded cluster as paused without a read per reconcile.
    pub(crate) pauses: super::cluster_watch::Pauses,
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
    fn refused_again(&self, uid: &str) -> Duration {
        let mut map = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(uid.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        Duration::from_secs(5u64.saturating_mul(1 << (*n - 1).min(6)).min(300))
    }

    fn accepted(&self, uid: &str) {
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

#[derive(Debug, thiserror::Error)]
pub enum ExternalError {
    #[error(transparent)]
    Finalizer(#[from] finalizer::FinalizerError),
    #[error(
        "cannot set the {} condition on {object}: {source}",
        conditions::CONDITION
    )]
    Condition {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot annotate {object} with {OIDC_ISSUER_ANNOTATION}: {source}")]
    Annotate {
        object: String,
        #[source]
        source: kube::Error,
    },
}

impl crate::engine::finalizer_controller::ErrorLabel for ExternalError {
    fn metric_label(&self) -> &'static str {
        match self {
            ExternalError::Finalizer(e) => e.metric_label(),
            ExternalError::Condition { .. } => "condition_write",
            ExternalError::Annotate { .. } => "annotation_write",
        }
    }
}

/// One kind's teardown (the engine drives one controller per kind).
pub struct KindReconciler<K> {
    ctx: Arc<ExternalCtx>,
    _kind: std::marker::PhantomData<fn() -> K>,
}

/// The external collector as `run` sees it: the engine's finalizer controller for each kind, on one
/// shared context.
pub struct ExternalCollector {
    clusters: Arc<FinalizerController<KindReconciler<AWSCluster>>>,
    control_planes: Arc<FinalizerController<KindReconciler<AWSManagedControlPlane>>>,
}

impl ExternalCollector {
    pub fn new(ctx: ExternalCtx, registry: TeardownRegistry, fence: Fence) -> Self {
        let ctx = Arc::new(ctx);
        ExternalCollector {
            clusters: Arc::new(finalizer_controller(
                ctx.clone(),
                registry.clone(),
                fence.clone(),
            )),
            control_planes: Arc::new(finalizer_controller(ctx, registry, fence)),
        }
    }
}

fn finalizer_controller<K: GcKind>(
    ctx: Arc<ExternalCtx>,
    registry: TeardownRegistry,
    fence: Fence,
) -> FinalizerController<KindReconciler<K>> {
    let m = &ctx.metrics;
    FinalizerController {
        collector: COLLECTOR,
        metrics: m.teardown.clone(),
        registry,
        done_reason: "ExternalResourcesDeleted",
        retry_after: Duration::from_secs(10),
        events: ctx.events.clone(),
        fence,
        concurrency: ctx.concurrency,
        reconciler: KindReconciler {
            ctx,
            _kind: std::marker::PhantomData,
        },
    }
}

impl crate::engine::collector::Collector for ExternalCollector {
    fn name(&self) -> &'static str {
        COLLECTOR
    }

    fn components(&self) -> Vec<&'static str> {
        vec![AWSCluster::COMPONENT, AWSManagedControlPlane::COMPONENT]
    }

    fn run(
        self: Box<Self>,
        env: crate::engine::collector::RunEnv,
    ) -> futures::future::BoxFuture<'static, ()> {
        let client = self.clusters.reconciler.ctx.client.clone();
        let pauses = self.clusters.reconciler.ctx.pauses.clone();
        let scope = self.clusters.reconciler.ctx.scope.clone();
        // A Cluster's pause changing reconciles its objects of both kinds at once.
        let (changes, _) = tokio::sync::broadcast::channel(256);
        let clusters = self.clusters.run(
            Watches::namespaces(client.clone(), &scope),
            env.state.clone(),
            AWSCluster::COMPONENT,
            env.shutdown.clone(),
            {
                let changes = changes.clone();
                move || Some(picks::<AWSCluster>(changes.subscribe()))
            },
        );
        let control_planes = self.control_planes.run(
            Watches::namespaces(client.clone(), &scope),
            env.state,
            AWSManagedControlPlane::COMPONENT,
            env.shutdown.clone(),
            {
                let changes = changes.clone();
                move || Some(picks::<AWSManagedControlPlane>(changes.subscribe()))
            },
        );
        let watch = super::cluster_watch::run(client, scope, changes, pauses, env.shutdown);
        Box::pin(async move {
            futures::future::join3(clusters, control_planes, watch).await;
        })
    }
}

/// The objects of kind `K` that belong to each changed Cluster; all of them when changes were
/// missed (the channel lagged).
fn picks<K: GcKind>(
    rx: tokio::sync::broadcast::Receiver<super::cluster_watch::ClusterChange>,
) -> futures::stream::BoxStream<'static, Pick<K>> {
    use futures::StreamExt;
    use tokio::sync::broadcast::error::RecvError;
    futures::stream::unfold(rx, |mut rx| async move {
        let pick: Pick<K> = match rx.recv().await {
            Ok(change) => Arc::new(move |o: &K| {
                o.namespace().as_deref() == Some(change.namespace.as_str())
                    && cluster::owning_cluster(o).as_deref() == Some(change.name.as_str())
            }),
            Err(RecvError::Lagged(_)) => Arc::new(|_: &K| true),
            Err(RecvError::Closed) => return None,
        };
        Some((pick, rx))
    })
    .boxed()
}

/// What the admission read that validation needs too: the GC switches of the linked object
/// (`None`: not read; validation reads them).
#[derive(Default)]
pub struct Admitted {
    linked: Option<Option<LinkedAnnotations>>,
}

/// What a valid object's teardown needs.
pub struct ClusterInput {
    settings: annotations::GcSettings,
    names: ClusterNames,
}

impl<K: GcKind> KindReconciler<K> {
    fn dynamic(&self, obj: &impl Resource<DynamicType = ()>) -> Api<DynamicObject> {
        let ns = obj.meta().namespace.clone().unwrap_or_default();
        Api::namespaced_with(self.ctx.client.clone(), &ns, &ApiResource::erase::<K>(&()))
    }

    fn label(obj: &impl Resource<DynamicType = ()>) -> String {
        crate::engine::meta::object_label(
            &K::kind(&()),
            obj.meta().namespace.as_deref(),
            obj.meta().name.as_deref().unwrap_or_default(),
        )
    }

    /// Sets our condition; true when it changed.
    async fn condition(
        &self,
        obj: &impl Resource<DynamicType = ()>,
        want: Desired<'_>,
    ) -> Result<bool, ExternalError> {
        let name = obj.meta().name.clone().unwrap_or_default();
        conditions::set(&self.dynamic(obj), &name, want)
            .await
            .map_err(|source| ExternalError::Condition {
                object: Self::label(obj),
                source,
            })
    }

    /// The cluster's identity or session was refused: nothing is called or deleted, the
    /// finalizer stays, the condition and a Warning Event name the identity and the reason,
    /// and the pass is retried with backoff (a fix to an identity object or Secret is seen at
    /// the next try, since they are read fresh).
    async fn refused(
        &self,
        o: &K,
        uid: &str,
        reason: &str,
        message: String,
    ) -> Result<Pass, ExternalError> {
        let after = self.ctx.refused_again(uid);
        tracing::warn!(%reason, error = %message, retry_in = ?after, "cluster identity refused: no AWS call made, nothing deleted");
        self.ctx
            .metrics
            .identity_refused
            .get_or_create(&super::metrics::ReasonLabels {
                reason: reason.into(),
            })
            .inc();
        let text = format!("{message}; nothing is deleted until it is fixed");
        if self
            .condition(o, Desired::not_done(Severity::Warning, reason, &text))
            .await?
        {
            self.warn(o, reason, text.clone()).await;
        }
        Ok(Pass::Left {
            phase: "identity".into(),
            detail: text,
            after,
        })
    }

    /// `--external-dry-run`: a pass that only planned. The plan goes into the condition (reason
    /// `DryRun`), an Event and the would-delete metric when it is new or changes, and into
    /// `sweeper status`; it is made again every minute while the object is being deleted.
    async fn planned(
        &self,
        o: &K,
        cluster_name: &str,
        place: &str,
        report: &PassReport,
        problem: Option<&str>,
    ) -> Result<Pass, ExternalError> {
        let mut message = format!("{} ({place})", dry_run_summary(report));
        if let Some(p) = problem {
            message = format!("{p}; {message}");
        }
        tracing::info!(cluster = %cluster_name, plan = %message, "dry run: external teardown plan");
        let changed = self
            .condition(o, Desired::not_done(Severity::Info, "DryRun", &message))
            .await?;
        if changed {
            for r in report.phases.iter().flat_map(|p| &p.planned) {
                self.ctx
                    .metrics
                    .would_delete
                    .get_or_create(&ExternalMetrics::labels(&r.service, &r.kind))
                    .inc();
            }
            self.ctx
                .events
                .emit(
                    &o.object_ref(&()),
                    EventType::Normal,
                    "DryRunPlan",
                    message.clone(),
                )
                .await;
            if let Some(p) = problem {
                self.warn(o, "InvalidConfiguration", p.to_string()).await;
            }
        }
        Ok(Pass::Left {
            phase: "DryRun".into(),
            detail: message,
            after: Duration::from_secs(60),
        })
    }

    /// The audit trail: what this pass deleted in AWS, recorded in sweeper's namespace and
    /// labelled with the cluster (its namespace and name). A failed write is logged, never
    /// fatal: the deletes happened.
    async fn audit(
        &self,
        o: &K,
        names: &ClusterNames,
        session: &sweeper_aws::session::Session,
        report: &PassReport,
    ) {
        let deleted: Vec<_> = report
            .phases
            .iter()
            .flat_map(|p| p.audit.iter().map(move |a| (p.phase.number(), a)))
            .collect();
        // What the pass found and left for the user (external-dns records of the cluster's load
        // balancers): in the audit record of the pass that deletes those load balancers.
        let kept: Vec<_> = report
            .phases
            .iter()
            .flat_map(|p| p.kept.iter().map(move |k| (p.phase.number(), k)))
            .collect();
        if !deleted.is_empty()
            && let Err(e) = super::audit::write(
                &self.ctx.client,
                &self.ctx.audit_namespace,
                names,
                session,
                &o.object_ref(&()),
                super::audit::Pass {
                    deleted: &deleted,
                    kept: &kept,
                },
                self.ctx.audit_ttl,
            )
            .await
        {
            tracing::warn!(error = %e, "cannot write the AWS audit record; the deletes happened and are logged");
        }
    }

    async fn warn(&self, obj: &impl Resource<DynamicType = ()>, reason: &str, note: String) {
        self.ctx
            .events
            .emit(&obj.object_ref(&()), EventType::Warning, reason, note)
            .await;
    }
}

impl<K: GcKind> Reconciler for KindReconciler<K> {
    type Object = K;
    type Input = ClusterInput;
    type Admitted = Admitted;
    type Error = ExternalError;

    fn finalizer(&self) -> &'static str {
        FINALIZER
    }

    /// A dry run only reports: no finalizer, so a cluster's deletion is never held by it.
    fn takes_finalizer(&self) -> bool {
        !self.ctx.dry_run
    }

    /// A cluster is guarded from creation: with a typo in its annotations its deletion must wait
    /// for the fix, not skip the teardown.
    fn guard_before_validating(&self) -> bool {
        true
    }

    fn selects(&self, o: &K) -> bool {
        self.ctx.selector.matches(o.labels())
    }

    /// Cluster API's contract: nothing for a paused cluster, one being moved, or one managed
    /// elsewhere (see contract.rs).
    async fn admit(&self, o: &K, stage: Stage) -> Result<Admission<Admitted>, ExternalError> {
        self.admission(o, stage).await
    }

    fn forget(&self, o: &K) {
        self.forgotten(o);
    }

    fn api(&self, obj: &K) -> Api<K> {
        Api::namespaced(
            self.ctx.client.clone(),
            obj.meta().namespace.as_deref().unwrap_or_default(),
        )
    }

    /// Validates before anything is deleted; bad input is reported while the object lives, too.
    /// The linked switches the admission read are used as read (one read of the owning Cluster
    /// per reconcile); else they are read here.
    async fn validate(
        &self,
        o: &K,
        stage: Stage,
        admitted: Admitted,
    ) -> Result<Checked<ClusterInput>, ExternalError> {
        let read = match admitted.linked {
            Some(linked) => Ok(linked),
            None => o.linked_switches(&self.ctx.capi, None).await,
        };
        let linked = match read {
            Ok(linked) => linked,
            // Nothing is at stake while the object lives; it is checked again at deletion.
            Err(e) if stage == Stage::Live => {
                tracing::warn!(error = %e, "cannot read the linked GC switches");
                return Ok(Checked::Invalid {
                    release: false,
                    retry: None,
                });
            }
            Err(e) => {
                // Whether the user opted out there is unknown: deleting now could delete what
                // they asked to keep, so wait until it can be read.
                let message = format!(
                    "cannot read the GC annotations that also apply to this object: {e}; nothing is deleted until they can be read"
                );
                tracing::warn!(error = %e, "linked GC switches unreadable: requeue");
                self.condition(
                    o,
                    Desired::not_done(Severity::Warning, "SettingsUnreadable", &message),
                )
                .await?;
                return Ok(Checked::Invalid {
                    release: false,
                    retry: Some(Duration::from_secs(10)),
                });
            }
        };
        let parsed = annotations::settings_of(o.annotations(), linked.as_ref());
        match (parsed, o.names().map_err(|e| e.to_string())) {
            (Ok(settings), Ok(names)) => Ok(Checked::Valid(ClusterInput { settings, names })),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "invalid GC configuration: nothing is deleted until it is fixed");
                let want = Desired::not_done(Severity::Error, "InvalidConfiguration", &e);
                if self.condition(o, want).await? {
                    self.ctx.metrics.invalid_objects.inc();
                    self.warn(o, "InvalidConfiguration", e).await;
                }
                // A fix on this object triggers a reconcile; a fix on the linked object does
                // not, so a deletion waiting on it looks again now and then.
                Ok(Checked::Invalid {
                    release: false,
                    retry: Some(Duration::from_secs(30)),
                })
            }
        }
    }

    /// Keeps the IRSA issuer CAPA recorded in an annotation (see [`OIDC_ISSUER_ANNOTATION`]):
    /// one write per issuer, none in dry run (which changes nothing), and none while Cluster
    /// API's contract says to leave the cluster alone: its object paused, moving or handed over,
    /// or its Cluster paused as the Cluster watch last saw it (no read for this).
    async fn live(&self, o: &K, _input: ClusterInput) -> Result<(), ExternalError> {
        let Some(issuer) = o.issuer_to_keep().filter(|_| !self.ctx.dry_run) else {
            return Ok(());
        };
        let marked = [
            super::contract::PAUSED,
            super::contract::DELETE_FOR_MOVE,
            super::contract::MANAGED_BY,
        ]
        .iter()
        .any(|k| o.annotations().contains_key(*k));
        let namespace = o.namespace().unwrap_or_default();
        let cluster_paused = cluster::owning_cluster(o)
            .is_some_and(|c| self.ctx.pauses.get(&namespace, &c) == Some(true));
        if marked || cluster_paused {
            tracing::debug!(
                "IRSA issuer not kept now: Cluster API's contract leaves the cluster alone"
            );
            return Ok(());
        }
        let api: Api<K> =
            Api::namespaced(self.ctx.client.clone(), &o.namespace().unwrap_or_default());
        let patch =
            serde_json::json!({"metadata": {"annotations": {OIDC_ISSUER_ANNOTATION: issuer}}});
        api.patch(
            &o.name_any(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map_err(|source| ExternalError::Annotate {
            object: Self::label(o),
            source,
        })?;
        tracing::info!(%issuer, "kept the IRSA issuer CAPA recorded");
        Ok(())
    }

    fn released(&self, o: &K) {
        self.ctx.accepted(&o.uid().unwrap_or_default());
    }

    async fn pass(&self, o: &K, input: ClusterInput) -> Result<Pass, ExternalError> {
        let ClusterInput { settings, names } = input;
        let cluster_name = names.describe();
        let uid = o.uid().unwrap_or_default();
        let namespace = o.namespace().unwrap_or_default();
        let (region, identity_ref) = o.placement();
        let at = Placement {
            namespace: &namespace,
            region,
            identity_ref,
        };
        // The cluster's own session, or nothing: a refused identity never falls back to
        // another principal, so no AWS call is made and nothing is deleted.
        let spec = match identity::resolve(&self.ctx.client, &self.ctx.capa_namespace, &at).await {
            Ok(spec) => spec,
            Err(e) => return self.refused(o, &uid, e.reason(), e.to_string()).await,
        };
        let session = match self.ctx.sessions.session(&spec).await {
            Ok(s) => s,
            Err(e) => {
                return self
                    .refused(o, &uid, "IdentityRefused", e.to_string())
                    .await;
            }
        };
        self.ctx.accepted(&uid);
        let place = session.describe();
        let req = request::pass_request(&names, ObjectFacts::of(o), &settings, self.ctx.mode());
        // A bad owner id holds nothing: its records are only reported, and it is said with this
        // pass's condition and a Warning Event (below), as other bad annotations are.
        let problem = settings.dns_owner.problem().map(|e| e.to_string());
        if let Some(p) = &problem {
            tracing::warn!(error = %p, "invalid external-dns owner id: its records are reported, not deleted; the teardown goes on");
        }
        let report = teardown_pass(&session.clients, &req)
            .instrument(tracing::info_span!("session", region = %session.scope.region, account = %session.scope.account, identity = %session.chain))
            .await;
        if self.ctx.dry_run {
            return self
                .planned(o, &cluster_name, &place, &report, problem.as_deref())
                .await;
        }
        outcome::count(&report, &self.ctx.metrics);
        // Credentials revoked or expired mid-teardown (the identity objects unchanged): the
        // next pass proves the session again, and reports the refusal if AWS refuses it.
        self.ctx.sessions.forget_if_credentials_failed(
            &spec,
            report.phases.iter().flat_map(PhaseReport::failures),
        );
        self.audit(o, &names, &session, &report).await;
        let mut out = outcome::of(&report, &cluster_name, &place);
        if let Some(p) = &problem {
            out = outcome::with_config_problem(out, p);
        }
        for note in &out.notes {
            self.ctx
                .events
                .emit(
                    &o.object_ref(&()),
                    EventType::Normal,
                    "DeletedWithSnapshot",
                    note.clone(),
                )
                .await;
        }
        for (reason, note) in out.warnings_now {
            self.warn(o, reason, note).await;
        }
        tracing::info!(cluster = %cluster_name, deleted = out.deleted, left = out.left, done = report.done, "teardown pass");
        let want = Desired {
            done: out.done,
            severity: out.severity,
            reason: out.reason,
            message: &out.message,
        };
        // Warnings only when the condition changed: a pass that finds the same trouble again
        // says nothing new.
        if self.condition(o, want).await? {
            for (reason, note) in out.warnings {
                self.warn(o, reason, note).await;
            }
        }
        Ok(out.pass)
    }

    /// An object sweeper cannot read as its kind: reported (condition, Event, log,
    /// `sweeper_invalid_objects_total`) and never acted on. As with any bad input of this
    /// collector, a finalizer we hold stays, so the cluster cannot finish deleting with its AWS
    /// resources unexamined; fixing the object resumes the teardown.
    async fn undecodable(&self, g: &Guarded<K>, bad: &Invalid) -> Result<(), ExternalError> {
        let message = format!(
            "{} cannot be read: {bad}; nothing is deleted for it until it is fixed",
            Self::label(g)
        );
        let want = Desired::not_done(Severity::Error, "InvalidObject", &message);
        if self.condition(g, want).await? {
            tracing::warn!(field = %bad.field, error = %bad.error, "undecodable object: nothing will be deleted for it");
            self.ctx
                .invalid_objects
                .get_or_create(&InvalidObjectLabels {
                    collector: COLLECTOR.into(),
                    kind: K::kind(&()).into_owned(),
                })
                .inc();
            self.warn(g, "InvalidObject", message).await;
        }
        Ok(())
    }
}

/// The collector's name in the teardown registry (`sweeper status`).
const COLLECTOR: &str = "external";

mod admission;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod admission_tests;

#[cfg(test)]
mod eks_calls_tests;

#[cfg(test)]
mod scope_tests;
