//! The one list of collectors, and what each one tells the rest of sweeper about itself.
//!
//! `run` (building and starting), `/status` and `sweeper status`, the pause switch and the CLI's
//! `--collector` and `--feature-gates` all iterate [`ALL`]. Adding a collector is a folder with
//! its code and a [`Spec`], and one line in [`ALL`]; nothing else names collectors.

use crate::archive::hub::Archives;
use crate::cli::RunArgs;
use crate::engine::collector::Collector;
use crate::engine::discovery::DiscoveryReport;
use crate::engine::leader::Fence;
use crate::engine::progress::Teardowns;
use crate::engine::served::{Needs, ServedKind};
use crate::metrics::InvalidObjectLabels;
use futures::future::BoxFuture;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde_json::{Map, Value};
use std::sync::Arc;
use tokio::sync::watch;

/// Every collector, in the order they are built, started and shown.
pub static ALL: [&dyn Spec; 3] = [
    &crate::cascade::spec::SPEC,
    &crate::tenant::spec::SPEC,
    &crate::external::spec::SPEC,
];

/// The kinds a collector cannot work without, by collector name: while one of an enabled
/// collector's is not served, `engine::served` names its CRD in the log and on /readyz. The
/// cascade collector works on whatever is served.
pub static SERVED_KINDS: [(&str, &[ServedKind]); 2] = [
    (
        "tenant",
        &[ServedKind {
            group: "tenant.kubezoo.io",
            resource: "tenants",
            owner: "KubeZoo's Tenant",
        }],
    ),
    (
        "external",
        &[
            ServedKind {
                group: "infrastructure.cluster.x-k8s.io",
                resource: "awsclusters",
                owner: "CAPA's AWSCluster",
            },
            ServedKind {
                group: "controlplane.cluster.x-k8s.io",
                resource: "awsmanagedcontrolplanes",
                owner: "CAPA's AWSManagedControlPlane",
            },
        ],
    ),
];

/// What `engine::served` checks for these enabled collectors.
pub fn served_needs<'a>(enabled: impl IntoIterator<Item = &'a str>) -> Vec<Needs> {
    enabled
        .into_iter()
        .filter_map(|name| {
            let spec = ALL.iter().find(|s| s.name() == name)?;
            let (_, kinds) = SERVED_KINDS.iter().find(|(n, _)| *n == name)?;
            Some(Needs {
                collector: spec.name(),
                gate: spec.gate().name,
                kinds,
            })
        })
        .collect()
}

/// The collectors' names, in [`ALL`]'s order (the pause switch's keys, `--collector` values).
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|s| s.name()).collect()
}

/// A feature gate: its `--feature-gates` name and whether it is on when not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gate {
    pub name: &'static str,
    pub default: bool,
}

/// What a collector tells sweeper about itself before anything runs.
pub trait Spec: Sync {
    /// Its name: metric prefix, pause key, `--collector` value, status key.
    fn name(&self) -> &'static str;

    /// The feature gate that enables it.
    fn gate(&self) -> Gate;

    /// Further gates that change how it works (not whether it runs).
    fn further_gates(&self) -> &'static [Gate] {
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
    pub args: &'a RunArgs,
    /// The collector's own client: the shared rate limit, the lease, and its pause flag.
    pub client: kube::Client,
    /// The same fence, for writes that do not go through the client (AWS calls).
    pub fence: Fence,
    pub teardowns: &'a Teardowns,
    pub discovery: &'a watch::Receiver<Option<Arc<DiscoveryReport>>>,
    pub invalid_objects: &'a Family<InvalidObjectLabels, Counter>,
    pub archives: &'a Archives,
}

/// What a teardown collector (one on the engine's teardown driver) shows: its teardowns in
/// progress, as `<name>_teardowns_in_progress` in /status and `<name>: N teardowns in progress` in
/// `sweeper status`.
pub mod teardowns {
    use crate::engine::teardown::TeardownMetrics;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_gates_are_unique() {
        let mut names = names();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ALL.len(), "two collectors share a name");
        let mut gates: Vec<_> = ALL.iter().map(|s| s.gate().name).collect();
        gates.sort();
        gates.dedup();
        assert_eq!(gates.len(), ALL.len(), "two collectors share a gate");
    }

    #[test]
    fn served_kinds_name_collectors_and_follow_their_gates() {
        for (name, _) in &SERVED_KINDS {
            assert!(names().contains(name), "{name} is not a collector");
        }
        let needs = served_needs(["cascade", "tenant", "external"]);
        let gates: Vec<_> = needs.iter().map(|n| (n.collector, n.gate)).collect();
        assert_eq!(
            gates,
            [("tenant", "TenantGC"), ("external", "ExternalResourceGC")]
        );
        assert!(served_needs(["cascade"]).is_empty());
    }

    #[test]
    fn every_collector_reports_a_status_it_can_render() {
        for spec in ALL {
            let mut registry = Registry::default();
            let registered = spec.register(&mut registry);
            let status = registered.status();
            assert!(!status.is_empty(), "{} reports no status", spec.name());
            let line = spec
                .render(&status)
                .unwrap_or_else(|| panic!("{} cannot render its own status", spec.name()));
            assert!(line.starts_with(spec.name()), "{line}");
        }
    }
}
