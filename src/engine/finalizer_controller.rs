//! The controller every teardown collector shares, in the spirit of kube-runtime's `finalizer()`:
//! the engine owns the finalizer dispatch, per-object decoding, the teardown registry
//! (`sweeper status`), the in-progress gauge, the duration histogram, the completions counter,
//! `sweeper_<collector>_reconcile_failures_total` and the completion Event. A collector supplies
//! only what differs: how to validate an object, what to do while it lives, and one idempotent
//! pass that says whether anything is left.

use crate::engine::events::Publisher;
use crate::engine::finalizer::{self, FinalizerError, Stage};
use crate::engine::guard::{Guarded, Invalid};
use crate::engine::teardown_registry::TeardownRegistry;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

/// What validation decided.
pub enum Checked<P> {
    /// Good input: what the teardown needs.
    Valid(P),
    /// Bad input, already reported on the object by the collector. Nothing is deleted. `release`:
    /// the finalizer goes anyway (the input can never be fixed); else it stays until fixed.
    /// `retry`: look again after this long (a fix elsewhere triggers no reconcile).
    Invalid {
        release: bool,
        retry: Option<Duration>,
    },
}

/// Whether a collector may act on an object at all right now, asked before anything else is done
/// for it (Cluster API's contract: a paused cluster, one being moved, one managed elsewhere).
/// `A`: what the admission read that validation needs too (see [`Reconciler::Admitted`]).
pub enum Admission<A = ()> {
    /// Go on as usual: add the finalizer, validate, tear down; validation gets what was read.
    Proceed(A),
    /// Do nothing for now: no finalizer change, no pass. `retry`: look again after this long
    /// (else at the next change or trigger). `status`: the phase and detail `sweeper status` shows
    /// for an object being deleted that waits.
    Hold {
        retry: Option<Duration>,
        status: Option<(String, String)>,
    },
    /// Never the collector's to tear down: our finalizer goes (if it is there) with nothing
    /// deleted, and a Normal Event with `reason` and `note` says so.
    Release { reason: &'static str, note: String },
    /// Not the collector's, and nothing of ours is on it.
    Ignore,
}

/// Picks the objects to reconcile now because something they depend on changed (e.g. their
/// Cluster was unpaused), from the controller's cache.
pub type Pick<K> = std::sync::Arc<dyn Fn(&K) -> bool + Send + Sync>;

/// What one pass left.
pub enum Pass {
    /// Nothing: the finalizer may go. `note` goes into the completion Event (the duration is
    /// appended).
    Done { note: String },
    /// Nothing was torn down and nothing will be by this collector: the finalizer goes anyway so
    /// the deletion is not held (a dry run that finds a finalizer a live run added). Not counted
    /// as a completed teardown; `reason` and `note` make the Event.
    Release { reason: &'static str, note: String },
    /// Work is left: the phase and detail for `sweeper status`, and when to look again.
    Left {
        phase: String,
        detail: String,
        after: Duration,
    },
}

/// The metrics the engine keeps for a collector's teardowns. The engine declares and registers
/// them (under the collector's prefix), so every teardown collector has the same four.
#[derive(Clone)]
pub struct TeardownMetrics {
    /// `sweeper_<collector>_teardowns_in_progress`.
    pub in_progress: Gauge,
    /// `sweeper_<collector>_teardown_seconds`: the object's deletion to released finalizer.
    pub seconds: Histogram,
    /// `sweeper_<collector>_teardowns_completed_total`.
    pub completed: Counter,
    /// `sweeper_<collector>_reconcile_failures_total{reason}`, by [`ErrorLabel::metric_label`].
    pub reconcile_failures: Family<FailureLabels, Counter>,
}

impl TeardownMetrics {
    /// `buckets`: the teardown-duration histogram's, in seconds (a tenant goes in seconds, an AWS
    /// cluster in minutes).
    pub fn new(buckets: impl IntoIterator<Item = f64>) -> Self {
        TeardownMetrics {
            in_progress: Gauge::default(),
            seconds: Histogram::new(buckets),
            completed: Counter::default(),
            reconcile_failures: Family::default(),
        }
    }

    /// Registers the four into the collector's (already prefixed) registry; `objects` names
    /// what is torn down, for the help texts ("tenants", "clusters' AWS resources").
    pub fn register(&self, r: &mut prometheus_client::registry::Registry, objects: &str) {
        r.register(
            "teardowns_in_progress",
            format!("Deleted {objects} whose teardown is not finished"),
            self.in_progress.clone(),
        );
        r.register(
            "teardown_seconds",
            "The object's deletion to released finalizer (so a failover does not restart it)",
            self.seconds.clone(),
        );
        r.register(
            "teardowns_completed",
            format!("Teardowns of {objects} finished (finalizer released)"),
            self.completed.clone(),
        );
        r.register(
            "reconcile_failures",
            format!("Reconciles of {objects} that failed with an API error (retried), by reason"),
            self.reconcile_failures.clone(),
        );
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub reason: String,
}

/// What kind of failure an error is, as a metric label (controller-rs's `metric_label`): a
/// short, bounded set per collector.
pub trait ErrorLabel {
    fn metric_label(&self) -> &'static str;
}

impl ErrorLabel for FinalizerError {
    fn metric_label(&self) -> &'static str {
        "finalizer_patch"
    }
}

/// The object kinds a teardown collector watches.
pub trait TeardownObject:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> TeardownObject for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// What a teardown collector supplies to the [`FinalizerController`]: kube-runtime's reconciler,
/// split by what the object's finalizer says (validate, live, pass, undecodable).
pub trait Reconciler: Send + Sync + 'static {
    type Object: TeardownObject;
    /// What validation makes of a good object: what `live` and `pass` need.
    type Input: Send;
    /// What `admit` read that `validate` needs too, handed on so one reconcile reads it once
    /// (the external collector's owning Cluster); `()` for a collector whose admission reads
    /// nothing.
    type Admitted: Default + Send;
    type Error: std::error::Error + From<FinalizerError> + ErrorLabel + Send + Sync + 'static;

    /// The finalizer this collector holds while it may still have to tear down.
    fn finalizer(&self) -> &'static str;

    /// Whether the finalizer is added before validation: true where an unguarded deletion of an
    /// object with bad input would skip a teardown the user expects (a cluster with a typo in its
    /// annotations); false where bad input means the object is not ours at all (an invalid
    /// tenant id).
    fn guard_before_validating(&self) -> bool;

    /// Whether new objects get the finalizer at all (a dry run only reports).
    fn takes_finalizer(&self) -> bool {
        true
    }

    /// Whether this object is the collector's at all (e.g. a label selector). One that is not
    /// never gets the finalizer, and one it already holds is released with nothing deleted.
    fn selects(&self, _obj: &Self::Object) -> bool {
        true
    }

    /// Whether the object may be acted on at all right now (see [`Admission`]); asked for every
    /// selected object before its finalizer is added or a pass runs. Most collectors proceed.
    fn admit(
        &self,
        _obj: &Self::Object,
        _stage: Stage,
    ) -> impl Future<Output = Result<Admission<Self::Admitted>, Self::Error>> + Send {
        async { Ok(Admission::Proceed(Self::Admitted::default())) }
    }

    /// The object left the watch (deleted for good): forget what was kept about it.
    fn forget(&self, _obj: &Self::Object) {}

    /// The API the object is read and patched through (its namespace, or cluster-wide).
    fn api(&self, obj: &Self::Object) -> Api<Self::Object>;

    /// Checks the object; bad input is reported on it by the collector. `admitted`: what
    /// `admit` read (the default when it read nothing).
    fn validate(
        &self,
        obj: &Self::Object,
        stage: Stage,
        admitted: Self::Admitted,
    ) -> impl Future<Output = Result<Checked<Self::Input>, Self::Error>> + Send;

    /// A valid object that is not being deleted (e.g. write its status). Most have nothing to
    /// do until the deletion.
    fn live(
        &self,
        _obj: &Self::Object,
        _input: Self::Input,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        async { Ok(()) }
    }

    /// One idempotent teardown pass, re-deriving what is left from the world.
    fn pass(
        &self,
        obj: &Self::Object,
        input: Self::Input,
    ) -> impl Future<Output = Result<Pass, Self::Error>> + Send;

    /// An object that does not decode as `Object`: report it; nothing is deleted for it.
    fn undecodable(
        &self,
        obj: &Guarded<Self::Object>,
        bad: &Invalid,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// The finalizer is gone (teardown complete, or released on bad input): forget per-object
    /// memory.
    fn released(&self, _obj: &Self::Object) {}
}

/// The engine's side of a teardown collector: the kube-runtime controller that holds the
/// collector's finalizer and drives its [`Reconciler`].
pub struct FinalizerController<T> {
    pub collector: &'static str,
    pub reconciler: T,
    pub metrics: TeardownMetrics,
    pub registry: TeardownRegistry,
    /// The Normal Event's reason when a teardown completes.
    pub done_reason: &'static str,
    /// How long after a failed reconcile to try again.
    pub retry_after: Duration,
    pub events: Publisher,
    /// The collector's fence: its writes pass it, and its resume retries every object at once.
    pub fence: crate::engine::leader::Fence,
    /// Objects reconciled at once (0: no bound).
    pub concurrency: u16,
}

impl<T: Reconciler> FinalizerController<T>
where
    <T::Object as Resource>::DynamicType: Default + Eq + Hash + Clone + Debug + Unpin,
{
    /// Asks the reconciler whether `obj` may be acted on now: Continue with what its admission
    /// read, or Break with the action to return at once (having held, or released, it).
    async fn admission(
        &self,
        obj: &T::Object,
        stage: Stage,
    ) -> Result<std::ops::ControlFlow<Action, T::Admitted>, T::Error> {
        use std::ops::ControlFlow::{Break, Continue};
        Ok(match self.reconciler.admit(obj, stage).await? {
            Admission::Proceed(admitted) => Continue(admitted),
            Admission::Ignore => Break(Action::await_change()),
            Admission::Hold { retry, status } => {
                if stage == Stage::Cleanup
                    && let Some((phase, detail)) = status
                {
                    let label = self.begin(obj);
                    self.registry.update(self.collector, &label, phase, detail);
                }
                Break(retry.map_or_else(Action::await_change, Action::requeue))
            }
            Admission::Release { reason, note } => {
                if self.let_go(obj).await? {
                    tracing::info!(%reason, %note, "finalizer released without a teardown");
                    self.events
                        .emit(&obj.object_ref(&()), EventType::Normal, reason, note)
                        .await;
                }
                Break(Action::await_change())
            }
        })
    }

    /// The object's name in `sweeper status`: `Kind ns/name`, or `Kind name` when
    /// cluster-scoped (how `kubectl describe` names it, and what the status tests read).
    fn label(obj: &impl Resource<DynamicType = ()>) -> String {
        crate::engine::meta::object_label(
            &T::Object::kind(&()),
            obj.meta().namespace.as_deref(),
            obj.meta().name.as_deref().unwrap_or_default(),
        )
    }

    /// Records that `obj`'s teardown has begun (idempotent): `sweeper status` lists it, and the
    /// first time it is counted in progress. It began when the object was deleted, whichever
    /// replica saw it first: its age survives a failover.
    fn begin(&self, obj: &T::Object) -> String {
        let label = Self::label(obj);
        let ago = obj
            .meta()
            .deletion_timestamp
            .as_ref()
            .and_then(|t| {
                let since = k8s_openapi::jiff::Timestamp::now().duration_since(t.0);
                std::time::Duration::try_from(since).ok()
            })
            .unwrap_or_default();
        if self.registry.begin_since(self.collector, &label, ago).1 {
            self.metrics.in_progress.inc();
        }
        label
    }

    /// Our finalizer goes with nothing torn down (input that can never be fixed, an object no
    /// longer selected, one released by `admit`): a teardown it had begun is no longer in progress
    /// (neither completed). Returns whether there was a finalizer to release.
    async fn let_go(&self, obj: &T::Object) -> Result<bool, FinalizerError> {
        let t = &self.reconciler;
        if !obj.finalizers().iter().any(|f| f == t.finalizer()) {
            return Ok(false);
        }
        finalizer::remove(&t.api(obj), obj, t.finalizer()).await?;
        t.released(obj);
        if self
            .registry
            .finish(self.collector, &Self::label(obj))
            .is_some()
        {
            self.metrics.in_progress.dec();
        }
        Ok(true)
    }

    async fn cleanup(&self, obj: &T::Object, input: T::Input) -> Result<Action, T::Error> {
        let label = self.begin(obj);
        match self.reconciler.pass(obj, input).await? {
            Pass::Left {
                phase,
                detail,
                after,
            } => {
                self.registry.update(self.collector, &label, phase, detail);
                Ok(Action::requeue(after))
            }
            Pass::Release { reason, note } => {
                if self.let_go(obj).await? {
                    tracing::info!(%reason, %note, "finalizer released without a teardown");
                    self.events
                        .emit(&obj.object_ref(&()), EventType::Normal, reason, note)
                        .await;
                } else {
                    // Not ours to release (a dry run planning a deletion it never held): the
                    // registry entry `begin` made goes, so `sweeper status` shows no teardown.
                    if self.registry.finish(self.collector, &label).is_some() {
                        self.metrics.in_progress.dec();
                    }
                }
                Ok(Action::await_change())
            }
            Pass::Done { note } => {
                finalizer::remove(&self.reconciler.api(obj), obj, self.reconciler.finalizer())
                    .await?;
                self.reconciler.released(obj);
                let secs = self
                    .registry
                    .finish(self.collector, &label)
                    .unwrap_or_default()
                    .as_secs_f64();
                self.metrics.in_progress.dec();
                self.metrics.completed.inc();
                self.metrics.seconds.observe(secs);
                tracing::info!(seconds = secs, "teardown complete; finalizer released");
                self.events
                    .emit(
                        &obj.object_ref(&()),
                        EventType::Normal,
                        self.done_reason,
                        format!("{note} ({secs:.1}s)"),
                    )
                    .await;
                Ok(Action::await_change())
            }
        }
    }
}

fn error_policy<T: Reconciler>(
    _obj: Arc<Guarded<T::Object>>,
    e: &T::Error,
    driver: Arc<FinalizerController<T>>,
) -> Action {
    driver
        .metrics
        .reconcile_failures
        .get_or_create(&FailureLabels {
            reason: e.metric_label().to_string(),
        })
        .inc();
    tracing::warn!(collector = driver.collector, error = %e, "reconcile failed; retrying");
    Action::requeue(driver.retry_after)
}

/// `pub(crate)`: collectors' unit tests drive their teardown through it, as production does.
#[tracing::instrument(skip_all, fields(collector = driver.collector, object = %FinalizerController::<T>::label(&*g)))]
pub(crate) async fn reconcile<T: Reconciler>(
    g: Arc<Guarded<T::Object>>,
    driver: Arc<FinalizerController<T>>,
) -> Result<Action, T::Error>
where
    <T::Object as Resource>::DynamicType: Default + Eq + Hash + Clone + Debug + Unpin,
{
    let t = &driver.reconciler;
    let obj = match &g.0 {
        Ok(obj) => obj,
        Err(bad) => {
            t.undecodable(&g, bad).await?;
            return Ok(Action::await_change());
        }
    };
    if !t.selects(obj) {
        if driver.let_go(obj).await? {
            tracing::info!("not selected: finalizer released, nothing deleted");
        }
        return Ok(Action::await_change());
    }
    let stage = match finalizer::stage(obj, t.finalizer()) {
        // A collector that takes no finalizer (a dry run) plans every deletion it sees: it
        // holds nothing, and its passes never release or delete.
        Stage::NotOurs if !t.takes_finalizer() => Stage::Cleanup,
        stage => stage,
    };
    if stage == Stage::NotOurs {
        return Ok(Action::await_change());
    }
    let admitted = match driver.admission(obj, stage).await? {
        std::ops::ControlFlow::Continue(admitted) => admitted,
        std::ops::ControlFlow::Break(action) => return Ok(action),
    };
    if stage == Stage::AddFinalizer && t.guard_before_validating() && t.takes_finalizer() {
        finalizer::add(&t.api(obj), obj, t.finalizer()).await?;
        return Ok(Action::await_change());
    }
    let input = match t.validate(obj, stage, admitted).await? {
        Checked::Valid(input) => input,
        Checked::Invalid { release, retry } => {
            if release && stage == Stage::Cleanup {
                driver.let_go(obj).await?;
            }
            return Ok(match (stage, retry) {
                (Stage::Cleanup, Some(after)) => Action::requeue(after),
                _ => Action::await_change(),
            });
        }
    };
    match stage {
        Stage::AddFinalizer => {
            if t.takes_finalizer() {
                finalizer::add(&t.api(obj), obj, t.finalizer()).await?;
            }
            Ok(Action::await_change())
        }
        Stage::Live => {
            t.live(obj, input).await?;
            Ok(Action::await_change())
        }
        Stage::Cleanup => driver.cleanup(obj, input).await,
        Stage::NotOurs => Ok(Action::await_change()),
    }
}

mod run;

pub use run::Watches;

#[cfg(test)]
mod label_tests {
    use super::*;

    #[test]
    fn failures_are_counted_by_kind() {
        let e = FinalizerError::Patch {
            action: "remove",
            finalizer: "sweeper.dev/x".into(),
            object: "AWSCluster ns/a".into(),
            source: kube::Error::LinesCodecMaxLineLengthExceeded,
        };
        assert_eq!(e.metric_label(), "finalizer_patch");
        let m = TeardownMetrics::new([1.0]);
        m.reconcile_failures
            .get_or_create(&FailureLabels {
                reason: e.metric_label().into(),
            })
            .inc();
        let n = m
            .reconcile_failures
            .get_or_create(&FailureLabels {
                reason: "finalizer_patch".into(),
            })
            .get();
        assert_eq!(n, 1);
    }
}

#[cfg(test)]
mod tests;
