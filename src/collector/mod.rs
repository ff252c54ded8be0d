//! The collector interface: what every collector tells the rest of sweeper about itself (the
//! [`CollectorDescriptor`] each collector's `descriptor.rs` implements), what `run` hands it to build
//! ([`BuildEnv`]), and the built collector `run` starts ([`built::Collector`]).
//!
//! The interface between the configuration below (crate::config) and the list of collectors
//! above (crate::catalog): it names no collector. Everything that differs by collector is
//! said here once, by the collector: its name and gates, its metrics and status, the kinds it
//! reads (`sweeper check`, readiness, `sweeper uninstall`), the permissions it needs and the
//! further checks that apply to it ([`check`]). Nothing else keeps a list keyed by a collector's
//! name.
//!
//! A new collector writes three pieces, because they live at three different times:
//! - [`CollectorDescriptor`], a `static`: what is known before anything runs. The CLI reads it without a
//!   registry or a client (`--feature-gates`, `sweeper check`, `sweeper status`, `sweeper
//!   uninstall`).
//! - [`Registered`], its metrics once registered (always, enabled or not): `/status` reads it on
//!   every replica, and it builds the collector from what `run` hands it ([`BuildEnv`]).
//! - [`Collector`](built::Collector), the built collector (`built.rs`): every replica builds it and serves its routes, only the
//!   leader runs it.
//!
//! A teardown collector (one that holds a finalizer until an object's teardown is done) writes
//! one more: the engine's [`Reconciler`](crate::engine::finalizer_controller::Reconciler), the
//! validation and the pass that differ per collector. The engine's `FinalizerController` drives
//! it (a struct the collector fills, not a trait it implements). docs/CONTRIBUTING.md has a
//! minimal collector, compiled and run as a doc test.

pub mod built;
pub mod check;

use crate::archive::hub::ArchiveHub;
use crate::collector::built::Collector;
use crate::config::{FeatureGates, Gate, RunConfig};
use crate::engine::discovery::DiscoveryReport;
use crate::engine::leader::Fence;
use crate::engine::served::ServedKind;
use crate::engine::teardown_registry::TeardownRegistry;
use crate::metrics::InvalidObjectLabels;
use futures::future::BoxFuture;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde_json::{Map, Value};
use std::sync::Arc;
use tokio::sync::watch;

/// What a collector tells sweeper about itself before anything runs.
pub trait CollectorDescriptor: Sync {
    /// Its name: metric prefix, pause key, `--collector` value, status key.
    fn name(&self) -> &'static str;

    /// The feature gate that enables it.
    fn gate(&self) -> Gate;

    /// Further gates that change how it works (not whether it runs).
    fn further_gates(&self) -> &'static [Gate] {
        &[]
    }

    /// The kinds of other projects it reads: `sweeper check` judges each is served at a version
    /// it reads; those it finalizes are what readiness waits for and where `sweeper uninstall`
    /// looks for its finalizers. None for a collector that works on whatever is served.
    fn kinds(&self) -> &'static [ServedKind] {
        &[]
    }

    /// Whether it may put its finalizer on objects of any kind (not only its finalized
    /// [`CollectorDescriptor::kinds`]): then `sweeper uninstall --collector` must read every kind.
    fn finalizes_every_kind(&self) -> bool {
        false
    }

    /// What its identity must be allowed, beyond what every collector shares (`sweeper check`
    /// reviews each).
    fn permissions(&self, access: check::Access<'_>) -> Vec<check::Permission>;

    /// The further sections of `sweeper check` that apply while it is enabled.
    fn preflights(&self) -> &'static [check::Preflight] {
        &[]
    }

    /// Registers its metrics (always, enabled or not: dashboards see zeros, not gaps) and returns
    /// the collector as registered: its status, and how to build it.
    fn register(&self, registry: &mut Registry) -> Arc<dyn Registered>;

    /// Its lines of `sweeper status`, from what [`Registered::status`] put into /status (read back
    /// by the CLI, so from JSON). None when the answer lacks them (an older server).
    fn render(&self, status: &Map<String, Value>) -> Option<String>;
}

/// A collector whose metrics are registered.
pub trait Registered: Send + Sync {
    /// Its fields of /status (merged into the top level of the answer).
    fn status(&self) -> Map<String, Value>;

    /// Builds the collector (not started) on its own client and fence.
    fn build<'a>(&'a self, env: BuildEnv<'a>) -> BoxFuture<'a, Box<dyn Collector>>;
}

/// What `run` hands a collector to build it.
pub struct BuildEnv<'a> {
    pub config: &'a RunConfig,
    /// Sweeper's own namespace (`--namespace`, else the pod's): the pause switch, the audit
    /// records, the archive of cluster-scoped objects.
    pub sweeper_namespace: &'a str,
    pub gates: &'a FeatureGates,
    /// The collector's own client: the shared rate limit, the lease, and its pause flag.
    pub client: kube::Client,
    /// The same fence, for writes that do not go through the client (AWS calls).
    pub fence: Fence,
    pub teardowns: &'a TeardownRegistry,
    pub discovery: &'a watch::Receiver<Option<Arc<DiscoveryReport>>>,
    pub invalid_objects: &'a Family<InvalidObjectLabels, Counter>,
    pub archive_hub: &'a ArchiveHub,
    /// Test-only fault injection, read once at start-up (see crate::engine::failpoint).
    pub failpoints: &'a crate::engine::failpoint::Failpoints,
}

/// What a teardown collector (one on the engine's finalizer controller) shows: its teardowns in
/// progress, as `<name>_teardowns_in_progress` in /status and `<name>: N teardowns in progress` in
/// `sweeper status`.
pub mod teardowns {
    use crate::engine::finalizer_controller::TeardownMetrics;
    use serde_json::{Map, Value};

    fn field(name: &str) -> String {
        format!("{name}_teardowns_in_progress")
    }

    pub fn status(name: &str, m: &TeardownMetrics) -> Map<String, Value> {
        Map::from_iter([(field(name), Value::from(m.in_progress.get()))])
    }

    pub fn render(name: &str, status: &Map<String, Value>) -> Option<String> {
        let n = status.get(&field(name))?.as_i64()?;
        Some(format!("{name}: {n} teardowns in progress"))
    }
}
