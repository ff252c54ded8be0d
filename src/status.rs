//! `sweeper status`: what each collector is doing, from the running service (GET /status).

use crate::cascade::metrics::{CascadeMetrics, QueueLabels};
use crate::external::metrics::ExternalMetrics;
use crate::server::AppState;
use crate::tenant::metrics::TenantMetrics;
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::{Deserialize, Serialize};

/// Handles on the gauges the status reads (clones share the same values).
#[derive(Clone)]
pub struct StatusSources {
    pub app: AppState,
    pub cascade: CascadeMetrics,
    pub tenant: TenantMetrics,
    pub external: ExternalMetrics,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Status {
    pub ready: bool,
    pub not_ready: Vec<String>,
    pub cascade: CascadeStatus,
    pub tenant_teardowns_in_progress: i64,
    pub external_teardowns_in_progress: i64,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct CascadeStatus {
    pub objects_tracked: i64,
    pub virtual_nodes: i64,
    pub attempt_to_delete_queue: i64,
    pub attempt_to_orphan_queue: i64,
}

pub fn snapshot(s: &StatusSources) -> Status {
    let queue = |q: &str| {
        s.cascade
            .queue_depth
            .get_or_create(&QueueLabels { queue: q.into() })
            .get()
    };
    Status {
        ready: s.app.is_ready(),
        not_ready: s.app.not_ready().into_iter().map(String::from).collect(),
        cascade: CascadeStatus {
            objects_tracked: s.cascade.objects_tracked.get(),
            virtual_nodes: s.cascade.virtual_nodes.get(),
            attempt_to_delete_queue: queue("attempt_to_delete"),
            attempt_to_orphan_queue: queue("attempt_to_orphan"),
        },
        tenant_teardowns_in_progress: s.tenant.teardowns_in_progress.get(),
        external_teardowns_in_progress: s.external.teardowns_in_progress.get(),
    }
}

async fn status(State(s): State<StatusSources>) -> Json<Status> {
    Json(snapshot(&s))
}

pub fn router(sources: StatusSources) -> Router {
    Router::new()
        .route("/status", get(status))
        .with_state(sources)
}

/// The table `sweeper status` prints.
pub fn render(s: &Status) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "ready: {}{}\n",
        s.ready,
        if s.not_ready.is_empty() {
            String::new()
        } else {
            format!(" (waiting for {})", s.not_ready.join(", "))
        }
    ));
    out.push_str(&format!(
        "cascade: {} objects tracked, {} virtual owners, queues: attempt-to-delete {}, attempt-to-orphan {}\n",
        s.cascade.objects_tracked, s.cascade.virtual_nodes, s.cascade.attempt_to_delete_queue, s.cascade.attempt_to_orphan_queue
    ));
    out.push_str(&format!(
        "tenant: {} teardowns in progress\n",
        s.tenant_teardowns_in_progress
    ));
    out.push_str(&format!(
        "external: {} teardowns in progress\n",
        s.external_teardowns_in_progress
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn snapshot_reads_the_shared_gauges() {
        let sources = StatusSources {
            app: AppState::new(Metrics::new()),
            cascade: CascadeMetrics::default(),
            tenant: TenantMetrics::default(),
            external: ExternalMetrics::default(),
        };
        sources.app.expect("cascade");
        sources.cascade.objects_tracked.set(42);
        sources.tenant.teardowns_in_progress.set(2);
        let s = snapshot(&sources);
        assert!(!s.ready);
        assert_eq!(s.not_ready, vec!["cascade"]);
        assert_eq!(s.cascade.objects_tracked, 42);
        let text = render(&s);
        assert!(
            text.contains("42 objects tracked")
                && text.contains("2 teardowns")
                && text.contains("waiting for cascade"),
            "{text}"
        );
    }
}
