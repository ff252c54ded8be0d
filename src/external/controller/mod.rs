//! The external collector, one finalizer controller per kind (AWSCluster,
//! AWSManagedControlPlane): our finalizer while the object lives; on deletion, teardown passes
//! (sweeper_aws::phases) until every phase is empty, then the finalizer goes (FR5: the cluster
//! cannot finish deleting first).
//! Bad input (annotation, cluster name) is an Event + condition and blocks deletion until fixed.
//! The finalizer dispatch, registry, metrics and completion Event are the engine's
//! (engine::finalizer_controller); this module supplies validation and one pass.
//!
//! Beside it: what both kinds' teardowns share (`ctx.rs`: `ExternalCtx`), Cluster API's contract
//! on this side (`admission.rs`), a name two objects claim (`collision.rs`), how a pass is told on
//! the object (`publish.rs`: condition, Events, plan, audit record; the words come from
//! external::report), the Clusters watched for their pause (`cluster_watch.rs`), the clusters
//! left behind (`held.rs`), the metrics, and the collector's descriptor (`descriptor.rs`). The two
//! kinds behind one trait are external::core::kind (`GcKind`). The pass's
//! request is built by `external::core::request`, as `gc plan` builds it.

use crate::api::capa::{AWSCluster, AWSManagedControlPlane};
use crate::engine::finalizer::{self, Stage};
use crate::engine::finalizer_controller::{
    Admission, Checked, FinalizerController, Pass, Pick, Reconciler, Watches,
};
use crate::engine::guard::{Guarded, Invalid};
use crate::engine::leader::Fence;
use crate::engine::teardown_registry::TeardownRegistry;
use crate::external::core::annotations;
use crate::external::core::cluster::{self, ClusterNames, LinkedAnnotations};
use crate::external::core::conditions::{Desired, Severity};
use crate::external::core::identity::{self, Placement};
use crate::external::core::kind::{GcKind, OIDC_ISSUER_ANNOTATION};
use crate::external::core::request::{self, Mode, ObjectFacts};
use crate::external::report::outcome;
use crate::metrics::InvalidObjectLabels;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use std::sync::Arc;
use std::time::Duration;
use sweeper_aws::phases::{PassReport, PassRequest, PhaseReport, teardown_pass};
use tracing::Instrument;

pub const FINALIZER: &str = "sweeper.dev/external-resource-gc";

#[derive(Debug, thiserror::Error)]
pub enum ExternalError {
    #[error(transparent)]
    Finalizer(#[from] finalizer::FinalizerError),
    #[error(
        "cannot set the {} condition on {object}: {source}",
        crate::external::core::conditions::CONDITION
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

impl crate::collector::built::Collector for ExternalCollector {
    fn components(&self) -> Vec<&'static str> {
        vec![AWSCluster::COMPONENT, AWSManagedControlPlane::COMPONENT]
    }

    fn run(
        self: Box<Self>,
        env: crate::collector::built::RunEnv,
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
        let watch = crate::external::controller::cluster_watch::run(
            client,
            scope,
            changes,
            pauses,
            env.shutdown,
        );
        Box::pin(async move {
            futures::future::join3(clusters, control_planes, watch).await;
        })
    }
}

/// The objects of kind `K` that belong to each changed Cluster; all of them when changes were
/// missed (the channel lagged).
fn picks<K: GcKind>(
    rx: tokio::sync::broadcast::Receiver<crate::external::controller::cluster_watch::ClusterChange>,
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
    /// Whether the owning Cluster proves the object's name (`None`: not read; validation reads
    /// it at deletion). See cluster.rs, "Whose cluster".
    proof: Option<Result<(), cluster::OwnerNotProven>>,
}

/// A deletion whose owner is not proven looks again this often (the Cluster may be restored,
/// or an administrator releases it).
const UNPROVEN_RETRY: Duration = Duration::from_secs(30);

/// What a valid object's teardown needs.
pub struct ClusterInput {
    settings: annotations::GcSettings,
    names: ClusterNames,
}

impl<K: GcKind> KindReconciler<K> {
    /// One pass in the cluster's session, in its span; the time its calls waited for the
    /// account's request budget is counted.
    async fn run_pass(
        &self,
        session: &sweeper_aws::session::Session,
        req: &PassRequest,
    ) -> PassReport {
        let report = teardown_pass(&session.clients, req)
            .instrument(tracing::info_span!("session", region = %session.scope.region, account = %session.scope.account, identity = %session.chain))
            .await;
        if let Some(b) = session.clients.throttle.as_ref().and_then(|t| t.budget()) {
            self.ctx.metrics.count_budget_wait(b);
        }
        report
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
    // Long: one check after another, each bad input an Event and condition on the object, in the
    // order the docs' condition table lists them.
    async fn validate(
        &self,
        o: &K,
        stage: Stage,
        admitted: Admitted,
    ) -> Result<Checked<ClusterInput>, ExternalError> {
        let proof = admitted.proof;
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
        let names = o.names();
        // A live object without its owner reference yet is normal (Cluster API's Cluster
        // controller adds it after the object is created): nothing is at stake, nothing to say.
        // At deletion, no owner is no proof: held as an unproven owner, not as a typo.
        if parsed.is_ok()
            && let Err(cluster::ClusterNameError::NoOwner { .. }) = names
        {
            if stage == Stage::Cleanup {
                return self.unproven(o, &cluster::OwnerNotProven::NoOwner).await;
            }
            tracing::debug!("no owner Cluster yet; checked again when it changes");
            return Ok(Checked::Invalid {
                release: false,
                retry: None,
            });
        }
        match (
            parsed.map_err(|e| e.to_string()),
            names.map_err(|e| e.to_string()),
        ) {
            (Ok(settings), Ok(names)) => {
                // Whose cluster: before anything can be deleted, the owner Cluster must name
                // this object (cluster.rs). Checked after the input, so bad input is said first.
                if stage == Stage::Cleanup {
                    let proof = match proof {
                        Some(p) => p,
                        None => cluster::Owning::read(&self.ctx.capi, o)
                            .await
                            .proof(&K::kind(&()), &o.name_any()),
                    };
                    if let Err(why) = proof {
                        return self.unproven(o, &why).await;
                    }
                }
                Ok(Checked::Valid(ClusterInput { settings, names }))
            }
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
            crate::external::core::contract::PAUSED,
            crate::external::core::contract::DELETE_FOR_MOVE,
            crate::external::core::contract::MANAGED_BY,
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

    // Long: one teardown pass as the controller runs it: the request, the pass in the cluster's
    // session, then the report published (publish.rs) and counted; split further, the span and
    // the registry's phase would be passed through every step.
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
        if let Some(held) = self.collision(o, &names, &session.scope).await? {
            if self.ctx.dry_run
                && let Pass::Left { detail, .. } = &held
                && o.finalizers().iter().any(|f| f == FINALIZER)
            {
                return Ok(Pass::Release {
                    reason: "DryRunReleased",
                    note: format!(
                        "dry run: nothing deleted; finalizer {FINALIZER} released so the deletion is not held ({detail})"
                    ),
                });
            }
            return Ok(held);
        }
        let place = session.describe();
        let req = request::pass_request(&names, ObjectFacts::of(o), &settings, self.ctx.mode());
        // A bad owner id holds nothing: its records are only reported, and it is said with this
        // pass's condition and a Warning Event (below), as other bad annotations are.
        let problem = settings.dns_owner.problem().map(|e| e.to_string());
        if let Some(p) = &problem {
            tracing::warn!(error = %p, "invalid external-dns owner id: its records are reported, not deleted; the teardown goes on");
        }
        let report = self.run_pass(&session, &req).await;
        if self.ctx.dry_run {
            return self
                .planned(o, &cluster_name, &place, &report, problem.as_deref())
                .await;
        }
        metrics::count(&report, &self.ctx.metrics);
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
pub mod cluster_watch;
mod collision;
mod ctx;
pub mod descriptor;
pub mod held;
pub mod metrics;
mod publish;

pub use ctx::ExternalCtx;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod admission_tests;

#[cfg(test)]
mod eks_calls_tests;

#[cfg(test)]
mod scope_tests;
