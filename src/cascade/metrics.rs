//! `sweeper_cascade_*` metrics.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GvkLabels {
    /// `group/version/kind` (empty group for core).
    pub resource: String,
}

/// A failed attempt of either work queue: the resource it was about and why it failed
/// (`WorkError::reason`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GvkReasonLabels {
    pub resource: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub queue: String,
}

#[derive(Clone, Default)]
pub struct CascadeMetrics {
    pub objects_tracked: Gauge,
    pub virtual_nodes: Gauge,
    pub queue_depth: Family<QueueLabels, Gauge>,
    pub deleted: Family<GvkLabels, Counter>,
    pub would_delete: Family<GvkLabels, Counter>,
    pub orphaned: Family<GvkLabels, Counter>,
    pub owner_refs_removed: Family<GvkLabels, Counter>,
    pub errors: Family<GvkReasonLabels, Counter>,
    pub watch_events: Counter,
}

impl CascadeMetrics {
    pub fn register(&self, r: &mut Registry) {
        let r = r.sub_registry_with_prefix("cascade");
        r.register(
            "objects_tracked",
            "Objects observed in the dependency graph",
            self.objects_tracked.clone(),
        );
        r.register(
            "virtual_nodes",
            "Owners referenced but not observed (virtual nodes)",
            self.virtual_nodes.clone(),
        );
        r.register(
            "queue_depth",
            "Items waiting in each work queue (attempt_to_delete, attempt_to_orphan)",
            self.queue_depth.clone(),
        );
        r.register(
            "deleted",
            "Dependents deleted, by resource",
            self.deleted.clone(),
        );
        r.register(
            "would_delete",
            "Dependents a dry run would have deleted, by resource",
            self.would_delete.clone(),
        );
        r.register(
            "orphaned",
            "Dependents whose owner reference was removed by orphan deletion, by resource",
            self.orphaned.clone(),
        );
        r.register(
            "owner_refs_removed",
            "Dependents whose dangling owner references were removed, by resource",
            self.owner_refs_removed.clone(),
        );
        r.register(
            "errors",
            "Failed attempts of both work queues (retried with backoff), by resource and reason",
            self.errors.clone(),
        );
        r.register(
            "watch_events",
            "Watch events applied to the graph",
            self.watch_events.clone(),
        );
    }

    pub fn failure(resource: &str, reason: &str) -> GvkReasonLabels {
        GvkReasonLabels {
            resource: resource.to_string(),
            reason: reason.to_string(),
        }
    }

    pub fn resource(r: &str) -> GvkLabels {
        GvkLabels {
            resource: r.to_string(),
        }
    }
}
