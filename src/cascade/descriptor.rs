//! The cascade collector as sweeper's one list of collectors sees it (see crate::catalog): its
//! implementation of the collector interface, crate::collector.

use super::context::CascadeConfig;
use super::metrics::{CascadeMetrics, QueueLabels};
use crate::collector::built::Collector;
use crate::collector::check::{self, Access, Permission, Preflight};
use crate::collector::{BuildEnv, CollectorDescriptor, Registered};
use crate::config::Gate;
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;

pub const NAME: &str = "cascade";

pub struct CascadeDescriptor;
pub static DESCRIPTOR: CascadeDescriptor = CascadeDescriptor;

/// The `cascade` object of /status.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct CascadeStatus {
    pub objects_tracked: i64,
    pub virtual_nodes: i64,
    pub attempt_to_delete_queue: i64,
    pub attempt_to_orphan_queue: i64,
}

impl CollectorDescriptor for CascadeDescriptor {
    fn name(&self) -> &'static str {
        NAME
    }

    /// On by default: it is sweeper's core job.
    fn gate(&self) -> Gate {
        Gate {
            name: "CascadeGC",
            default: true,
        }
    }

    /// Its `sweeper.dev/cascade-complete` goes on owners of any kind.
    fn finalizes_every_kind(&self) -> bool {
        true
    }

    fn permissions(&self, access: Access<'_>) -> Vec<Permission> {
        check::every_kind(access)
    }

    /// Beside kube-controller-manager's own garbage collector every delete is raced; it archives.
    fn preflights(&self) -> &'static [Preflight] {
        &[Preflight::KubeGc, Preflight::Archive]
    }

    fn register(&self, registry: &mut Registry) -> Arc<dyn Registered> {
        let metrics = CascadeMetrics::default();
        metrics.register(registry);
        Arc::new(metrics)
    }

    fn render(&self, status: &Map<String, Value>) -> Option<String> {
        let s: CascadeStatus = serde_json::from_value(status.get(NAME)?.clone()).ok()?;
        Some(format!(
            "cascade: {} objects tracked, {} virtual owners, queues: attempt-to-delete {}, attempt-to-orphan {}",
            s.objects_tracked,
            s.virtual_nodes,
            s.attempt_to_delete_queue,
            s.attempt_to_orphan_queue
        ))
    }
}

impl Registered for CascadeMetrics {
    fn status(&self) -> Map<String, Value> {
        let queue = |q: &str| {
            self.queue_depth
                .get_or_create(&QueueLabels { queue: q.into() })
                .get()
        };
        let s = CascadeStatus {
            objects_tracked: self.objects_tracked.get(),
            virtual_nodes: self.virtual_nodes.get(),
            attempt_to_delete_queue: queue("attempt_to_delete"),
            attempt_to_orphan_queue: queue("attempt_to_orphan"),
        };
        Map::from_iter([(
            NAME.to_string(),
            serde_json::to_value(s).unwrap_or_default(),
        )])
    }

    fn build<'a>(&'a self, env: BuildEnv<'a>) -> BoxFuture<'a, Box<dyn Collector>> {
        Box::pin(async move {
            let config = env.config;
            let cfg = CascadeConfig {
                workers: config.cascade_workers() as usize,
                dry_run: config.cascade_dry_run,
                sync_timeout: config.cascade_sync_timeout,
                fence: env.fence.clone(),
                failpoints: env.failpoints.clone(),
            };
            // Workers share one group commit: one read and one record per batch of deletes.
            let batcher = env
                .archive_hub
                .archiver(&env.client, &env.fence, NAME)
                .map(|a| {
                    use crate::archive::batch::{Batcher, gather_window};
                    Batcher::start(
                        a,
                        config.cascade_workers() as usize,
                        gather_window(config.kube_api_qps),
                    )
                });
            Box::new(super::start::CascadeCollector::new(
                env.client,
                cfg,
                self.clone(),
                batcher,
            )) as Box<dyn Collector>
        })
    }
}
