//! The single graph writer: applies watch events (and workers' "virtual owner is absent"
//! findings) to the graph, in order, and routes the resulting work to the queues.

use super::context::Ctx;
use crate::engine::graph::uid::Uid;
use crate::engine::watch::WatchEvent;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;
use std::sync::Arc;
use tokio::sync::mpsc;

const BATCH: usize = 256;

pub async fn run(
    ctx: Arc<Ctx>,
    mut events: mpsc::Receiver<WatchEvent>,
    mut absent: mpsc::UnboundedReceiver<Uid>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    // Gauges are refreshed on a timer: counting on every batch would be O(graph) per event.
    let mut gauges = tokio::time::interval(std::time::Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = gauges.tick() => {
                let g = ctx.read();
                let tracked = g.observed_count();
                ctx.metrics.objects_tracked.set(tracked as i64);
                ctx.metrics.virtual_nodes.set((g.len() - tracked) as i64);
                ctx.metrics.queue_depth.get_or_create(&super::metrics::QueueLabels { queue: "attempt_to_delete".into() }).set(ctx.delete_q.pending() as i64);
                ctx.metrics.queue_depth.get_or_create(&super::metrics::QueueLabels { queue: "attempt_to_orphan".into() }).set(ctx.orphan_q.pending() as i64);
            }
            n = events.recv_many(&mut batch, BATCH) => {
                if n == 0 {
                    return;
                }
                let mut invalid = Vec::new();
                {
                    let mut g = ctx.write();
                    for ev in batch.drain(..) {
                        ctx.metrics.watch_events.inc();
                        let work = match ev {
                            WatchEvent::Apply { kind, meta } => g.apply(kind, &meta),
                            WatchEvent::Delete { meta, .. } => {
                                ctx.absent.insert(meta.uid);
                                ctx.forget(&meta.uid);
                                g.remove(&meta.uid)
                            }
                            WatchEvent::Resynced { kind, seen } => {
                                let (gone, work) = g.resync(kind, &seen);
                                for uid in gone {
                                    ctx.absent.insert(uid);
                                    ctx.forget(&uid);
                                }
                                work
                            }
                            WatchEvent::Invalid { kind, namespace, name, error } => {
                                let info = g.kinds.info(kind);
                                invalid.push((ObjectReference {
                                    api_version: Some(info.api_version.clone()),
                                    kind: Some(info.kind.clone()),
                                    namespace,
                                    name: Some(name),
                                    ..Default::default()
                                }, error));
                                Vec::new()
                            }
                        };
                        ctx.route(work);
                    }
                }
                for (reference, error) in invalid {
                    tracing::warn!(object = ?reference.name, namespace = ?reference.namespace, %error, "invalid owner reference ignored");
                    let uid = crate::engine::graph::uid::Uid::hash_of(&format!("{reference:?}"));
                    ctx.event(uid, reference, EventType::Warning, "OwnerRefInvalid", error.to_string()).await;
                }
            }
            Some(uid) = absent.recv() => {
                ctx.absent.insert(uid);
                let work = ctx.write().virtual_absent(&uid);
                ctx.route(work);
            }
        }
    }
}
