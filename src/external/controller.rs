//! The external controller, one instance per kind (AWSCluster, AWSManagedControlPlane): our
//! finalizer while the object lives; on deletion, teardown passes (services/src/aws) until every
//! phase is empty, then the finalizer goes (FR5: the cluster cannot finish deleting first).
//! Bad input (annotation, cluster name) is an Event + condition and blocks deletion until fixed.

use super::annotations;
use super::cluster::{self, ClusterNameError, LinkedAnnotations, ResolveError};
use super::conditions::{self, Desired, Severity};
use super::metrics::ExternalMetrics;
use crate::api::capa::{AWSCluster, AWSManagedControlPlane};
use crate::engine::events::Publisher;
use crate::engine::finalizer::{self, Stage};
use crate::engine::guard::{self, Guarded, Invalid, WatchHealth};
use crate::engine::progress::Teardowns;
use crate::metrics::InvalidObjectLabels;
use crate::server::AppState;
use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Client, Resource, ResourceExt};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;
use sweeper_services::aws::teardown::{AwsClients, GcTask, TeardownRequest, teardown_pass};
use tokio_util::sync::CancellationToken;

pub const FINALIZER: &str = "sweeper.dev/external-resource-gc";

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

    /// The `<name>` in the cluster's AWS tags.
    fn tag_name(&self) -> Result<String, ClusterNameError>;

    /// Another object whose GC annotations also govern this one (its label and annotations),
    /// read fresh; `Ok(None)` when there is none.
    fn linked_switches(
        &self,
        client: &Client,
    ) -> impl Future<Output = Result<Option<LinkedAnnotations>, ResolveError>> + Send;
}

impl GcKind for AWSCluster {
    const COMPONENT: &'static str = "external-awscluster";

    fn tag_name(&self) -> Result<String, ClusterNameError> {
        cluster::for_aws_cluster(self)
    }

    /// CAPA and clusterawsadm agree on the AWSCluster: nothing else to read.
    async fn linked_switches(
        &self,
        _client: &Client,
    ) -> Result<Option<LinkedAnnotations>, ResolveError> {
        Ok(None)
    }
}

impl GcKind for AWSManagedControlPlane {
    const COMPONENT: &'static str = "external-awsmanagedcontrolplane";

    fn tag_name(&self) -> Result<String, ClusterNameError> {
        cluster::for_control_plane(self)
    }

    /// On EKS `clusterawsadm gc disable` annotates Cluster.spec.infrastructureRef, the
    /// AWSManagedCluster, while CAPA reads this control plane: users who opted out with CAPA's
    /// own tool have the annotation there.
    async fn linked_switches(
        &self,
        client: &Client,
    ) -> Result<Option<LinkedAnnotations>, ResolveError> {
        cluster::managed_cluster_annotations(client, self).await
    }
}

pub struct ExternalCtx {
    pub client: Client,
    pub aws: AwsClients,
    pub metrics: ExternalMetrics,
    /// AlternativeGCStrategy: discover with describe calls instead of the tagging API.
    pub alternative_discovery: bool,
    events: Publisher,
    teardowns: Teardowns,
    /// `sweeper_invalid_objects_total`, shared with the other collectors.
    invalid_objects: Family<InvalidObjectLabels, Counter>,
}

impl ExternalCtx {
    pub fn new(
        client: Client,
        aws: AwsClients,
        metrics: ExternalMetrics,
        alternative_discovery: bool,
        teardowns: Teardowns,
        invalid_objects: Family<InvalidObjectLabels, Counter>,
    ) -> Self {
        ExternalCtx {
            events: Publisher::new(client.clone(), "sweeper-external", "ExternalResourceGC"),
            client,
            aws,
            metrics,
            alternative_discovery,
            teardowns,
            invalid_objects,
        }
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
}

pub async fn run<K: GcKind>(ctx: Arc<ExternalCtx>, state: AppState, shutdown: CancellationToken) {
    let api: Api<Guarded<K>> = Api::all(ctx.client.clone());
    let health = WatchHealth {
        state,
        component: K::COMPONENT,
    };
    guard::controller(api, health)
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(reconcile_guarded::<K>, error_policy::<K>, ctx)
        .for_each(|_| async {})
        .await;
}

fn error_policy<K: GcKind>(
    _o: Arc<Guarded<K>>,
    e: &ExternalError,
    _ctx: Arc<ExternalCtx>,
) -> Action {
    tracing::warn!(error = %e, "external reconcile failed; retrying");
    Action::requeue(Duration::from_secs(10))
}

async fn reconcile_guarded<K: GcKind>(
    g: Arc<Guarded<K>>,
    ctx: Arc<ExternalCtx>,
) -> Result<Action, ExternalError> {
    match &g.0 {
        Ok(o) => reconcile(Arc::new(o.clone()), ctx).await,
        Err(bad) => undecodable::<K>(&ctx, &g, bad).await,
    }
}

/// An object sweeper cannot read as its kind: reported (condition, Event, log,
/// `sweeper_invalid_objects_total`) and never acted on. As with any bad input of this collector,
/// a finalizer we hold stays, so the cluster cannot finish deleting with its AWS resources
/// unexamined; fixing the object resumes the teardown.
#[tracing::instrument(skip_all, fields(object = %format!("{}/{}", g.namespace().unwrap_or_default(), g.name_any())))]
async fn undecodable<K: GcKind>(
    ctx: &ExternalCtx,
    g: &Guarded<K>,
    bad: &Invalid,
) -> Result<Action, ExternalError> {
    let ns = g.namespace().unwrap_or_default();
    let label = format!("{} {ns}/{}", K::kind(&()), g.name_any());
    let message =
        format!("{label} cannot be read: {bad}; nothing is deleted for it until it is fixed");
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ns, &ApiResource::erase::<K>(&()));
    let changed = conditions::set(
        &dynamic,
        &g.name_any(),
        Desired::not_done(Severity::Error, "InvalidObject", &message),
    )
    .await
    .map_err(|source| ExternalError::Condition {
        object: label.clone(),
        source,
    })?;
    if changed {
        tracing::warn!(field = %bad.field, error = %bad.error, "undecodable object: nothing will be deleted for it");
        ctx.invalid_objects
            .get_or_create(&InvalidObjectLabels {
                collector: COLLECTOR.into(),
                kind: K::kind(&()).into_owned(),
            })
            .inc();
        ctx.events
            .emit(
                &g.object_ref(&()),
                EventType::Warning,
                "InvalidObject",
                message,
            )
            .await;
    }
    Ok(Action::await_change())
}

struct Obj<'a, K> {
    obj: &'a K,
    api: Api<K>,
    dynamic: Api<DynamicObject>,
    label: String,
}

impl<K: GcKind> Obj<'_, K> {
    /// Sets our condition; true when it changed.
    async fn condition(&self, want: Desired<'_>) -> Result<bool, ExternalError> {
        conditions::set(&self.dynamic, &self.obj.name_any(), want)
            .await
            .map_err(|source| ExternalError::Condition {
                object: self.label.clone(),
                source,
            })
    }
}

async fn event<K: GcKind>(
    ctx: &ExternalCtx,
    obj: &K,
    type_: EventType,
    reason: &str,
    note: String,
) {
    ctx.events
        .emit(&obj.object_ref(&()), type_, reason, note)
        .await;
}

#[tracing::instrument(skip_all, fields(object = %format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())))]
async fn reconcile<K: GcKind>(o: Arc<K>, ctx: Arc<ExternalCtx>) -> Result<Action, ExternalError> {
    let ns = o.namespace().unwrap_or_default();
    let this = Obj {
        obj: &*o,
        api: Api::namespaced(ctx.client.clone(), &ns),
        dynamic: Api::namespaced_with(ctx.client.clone(), &ns, &ApiResource::erase::<K>(&())),
        label: format!("{} {ns}/{}", K::kind(&()), o.name_any()),
    };
    let stage = finalizer::stage(&*o, FINALIZER);
    match stage {
        Stage::NotOurs => return Ok(Action::await_change()),
        Stage::AddFinalizer => {
            finalizer::add(&this.api, &*o, FINALIZER).await?;
            return Ok(Action::await_change());
        }
        Stage::Live | Stage::Cleanup => {}
    }
    // Validate before anything is deleted; report bad input while the object lives, too.
    let linked = match o.linked_switches(&ctx.client).await {
        Ok(linked) => linked,
        // Nothing is at stake while the object lives; it is checked again at deletion.
        Err(e) if stage == Stage::Live => {
            tracing::warn!(error = %e, "cannot read the linked GC switches");
            return Ok(Action::await_change());
        }
        Err(e) => {
            // Whether the user opted out there is unknown: deleting now could delete what they
            // asked to keep, so wait until it can be read.
            let message = format!(
                "cannot read the GC annotations that also apply to this object: {e}; nothing is deleted until they can be read"
            );
            tracing::warn!(error = %e, "linked GC switches unreadable: requeue");
            this.condition(Desired::not_done(
                Severity::Warning,
                "SettingsUnreadable",
                &message,
            ))
            .await?;
            return Ok(Action::requeue(Duration::from_secs(10)));
        }
    };
    let parsed = annotations::parse(o.annotations()).map_err(|e| e.to_string());
    let parsed = match (parsed, linked) {
        (Ok(own), Some((label, other))) => annotations::parse(&other)
            .map(|other| annotations::combine(own, other))
            .map_err(|e| format!("{label}: {e}")),
        (parsed, _) => parsed,
    };
    let name = o.tag_name().map_err(|e| e.to_string());
    let (settings, cluster_name) = match (parsed, name) {
        (Ok(s), Ok(n)) => (s, n),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(error = %e, "invalid GC configuration: nothing is deleted until it is fixed");
            if this
                .condition(Desired::not_done(
                    Severity::Error,
                    "InvalidConfiguration",
                    &e,
                ))
                .await?
            {
                ctx.metrics.invalid_objects.inc();
                event(&ctx, &*o, EventType::Warning, "InvalidConfiguration", e).await;
            }
            // A fix on this object triggers a reconcile; a fix on the linked object does not,
            // so a deletion waiting on it looks again now and then.
            return Ok(match stage {
                Stage::Cleanup => Action::requeue(Duration::from_secs(30)),
                _ => Action::await_change(),
            });
        }
    };
    if stage == Stage::Live {
        return Ok(Action::await_change());
    }
    cleanup(&ctx, &this, settings, cluster_name).await
}

async fn cleanup<K: GcKind>(
    ctx: &ExternalCtx,
    this: &Obj<'_, K>,
    settings: annotations::GcSettings,
    cluster_name: String,
) -> Result<Action, ExternalError> {
    if ctx.teardowns.begin(COLLECTOR, &this.label).1 {
        ctx.metrics.teardowns_in_progress.inc();
    }
    let req = TeardownRequest {
        cluster_name: cluster_name.clone(),
        external_gc: settings.external_gc,
        tasks: settings.tasks.map(|ts| {
            ts.iter()
                .filter_map(|t| t.as_str().parse::<GcTask>().ok())
                .collect()
        }),
        dry_run: false,
        alternative_discovery: ctx.alternative_discovery,
    };
    let report = teardown_pass(&ctx.aws, &req).await;
    let mut deleted = 0usize;
    let mut remaining = Vec::new();
    let mut errors = Vec::new();
    for p in &report.phases {
        for d in &p.deleted {
            deleted += 1;
            ctx.metrics
                .deleted
                .get_or_create(&ExternalMetrics::labels(&d.service, &d.kind))
                .inc();
        }
        for (r, why) in &p.remaining {
            ctx.metrics
                .errors
                .get_or_create(&ExternalMetrics::labels(&r.service, &r.kind))
                .inc();
            remaining.push(format!("phase {}: {} {} ({why})", p.phase, r.kind, r.id));
        }
        errors.extend(p.errors.iter().map(|e| format!("phase {}: {e}", p.phase)));
    }
    tracing::info!(cluster = %cluster_name, deleted, remaining = remaining.len(), errors = errors.len(), done = report.done, "teardown pass");
    let (phase, detail) = phase_of(&report);
    ctx.teardowns.update(COLLECTOR, &this.label, phase, detail);
    if report.done {
        this.condition(Desired::done(
            "Deleted",
            &format!("all AWS resources of cluster {cluster_name} are deleted"),
        ))
        .await?;
        finalizer::remove(&this.api, this.obj, FINALIZER).await?;
        let secs = ctx
            .teardowns
            .finish(COLLECTOR, &this.label)
            .unwrap_or_default()
            .as_secs_f64();
        ctx.metrics.teardowns_in_progress.dec();
        ctx.metrics.teardown_seconds.observe(secs);
        event(
            ctx,
            this.obj,
            EventType::Normal,
            "ExternalResourcesDeleted",
            format!("AWS teardown of {cluster_name} finished in {secs:.0}s"),
        )
        .await;
        return Ok(Action::await_change());
    }
    let mut left: Vec<String> = errors
        .iter()
        .chain(remaining.iter())
        .take(10)
        .cloned()
        .collect();
    let more = errors.len() + remaining.len();
    if more > left.len() {
        left.push(format!("… and {} more", more - left.len()));
    }
    let message = if left.is_empty() {
        "teardown in progress".to_string()
    } else {
        left.join("; ")
    };
    // Failures are retried with backoff, so they are Warnings, not Errors (which CAPI reserves
    // for what does not fix itself).
    let (severity, reason) = if errors.is_empty() {
        (Severity::Info, "Deleting")
    } else {
        (Severity::Warning, "DeletionFailed")
    };
    let changed = this
        .condition(Desired::not_done(severity, reason, &message))
        .await?;
    if !errors.is_empty() && changed {
        event(
            ctx,
            this.obj,
            EventType::Warning,
            "ExternalResourcesDeletionFailed",
            message,
        )
        .await;
    }
    Ok(Action::requeue(Duration::from_secs(if deleted > 0 {
        1
    } else {
        5
    })))
}

/// The collector's name in the teardown registry (`sweeper status`).
const COLLECTOR: &str = "external";

/// The phase a pass stopped in (the last one started), for `sweeper status`.
fn phase_of(report: &sweeper_services::aws::teardown::TeardownReport) -> (String, String) {
    const NAMES: [&str; 3] = [
        "CAPA-owned non-network",
        "external resources",
        "CAPA-owned network",
    ];
    if report.done {
        return ("done".into(), "every phase finished".into());
    }
    match report.phases.iter().rev().find(|p| p.started) {
        Some(p) => {
            let name = NAMES
                .get(usize::from(p.phase.saturating_sub(1)))
                .copied()
                .unwrap_or("?");
            (
                format!("phase {}: {name}", p.phase),
                format!(
                    "{} deleted this pass, {} remaining, {} errors",
                    p.deleted.len(),
                    p.remaining.len(),
                    p.errors.len()
                ),
            )
        }
        None => ("starting".into(), String::new()),
    }
}
