//! Starts and stops the cascade collector: watches follow discovery, one writer, N workers.
//! Workers start once every watched resource has been listed (or the sync timeout passed), so
//! start-up does not verify owners that are merely not listed yet.

use super::context::{CascadeConfig, Ctx};
use super::metrics::CascadeMetrics;
use super::{orphan, worker, writer};
use crate::engine::discovery::DiscoveryReport;
use crate::engine::graph::kinds::ResolvedKind;
use crate::engine::watch::WatchSet;
use kube::Client;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// Creates the collector's shared state (so the HTTP query routes can be mounted before it runs).
pub fn context(
    client: Client,
    config: CascadeConfig,
    metrics: CascadeMetrics,
    archive: Option<crate::archive::batch::Batcher>,
) -> (
    Arc<Ctx>,
    mpsc::UnboundedReceiver<crate::engine::graph::uid::Uid>,
) {
    let (absent_tx, absent_rx) = mpsc::unbounded_channel();
    (
        Arc::new(Ctx::new(client, config, metrics, absent_tx, archive)),
        absent_rx,
    )
}

/// The cascade collector as `run` sees it.
pub struct CascadeCollector {
    ctx: Arc<Ctx>,
    absent_rx: mpsc::UnboundedReceiver<crate::engine::graph::uid::Uid>,
}

impl CascadeCollector {
    pub fn new(
        client: Client,
        config: CascadeConfig,
        metrics: CascadeMetrics,
        archive: Option<crate::archive::batch::Batcher>,
    ) -> Self {
        let (ctx, absent_rx) = context(client, config, metrics, archive);
        CascadeCollector { ctx, absent_rx }
    }
}

impl crate::engine::collector::Collector for CascadeCollector {
    fn name(&self) -> &'static str {
        "cascade"
    }

    fn components(&self) -> Vec<&'static str> {
        vec!["cascade"]
    }

    fn routes(&self) -> Option<axum::Router> {
        Some(super::query::router(self.ctx.clone()))
    }

    fn run(
        self: Box<Self>,
        env: crate::engine::collector::RunEnv,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(run(
            self.ctx,
            self.absent_rx,
            env.discovery,
            env.state,
            env.shutdown,
        ))
    }
}

/// Runs until `shutdown`. `discovery` publishes each refresh.
pub async fn run(
    ctx: Arc<Ctx>,
    absent_rx: mpsc::UnboundedReceiver<crate::engine::graph::uid::Uid>,
    mut discovery: watch::Receiver<Option<Arc<DiscoveryReport>>>,
    state: crate::server::AppState,
    shutdown: CancellationToken,
) {
    let (tx, rx) = mpsc::channel(4096);
    let writer = tokio::spawn(writer::run(ctx.clone(), rx, absent_rx));
    let mut watches = WatchSet::new(ctx.client.clone(), tx, ctx.config.page_size);
    let mut workers: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    let mut starter: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        let report = discovery.borrow_and_update().clone();
        if let Some(report) = report {
            {
                let mut g = ctx.write();
                g.kinds
                    .set_resolved(report.resources.iter().map(|r| ResolvedKind {
                        resource: r.resource.clone(),
                        namespaced: r.namespaced,
                    }));
            }
            let started = watches.reconcile(&report.resources, |r| {
                ctx.write()
                    .kinds
                    .intern(&r.resource.api_version, &r.resource.kind)
            });
            if !started.is_empty() {
                tracing::info!(
                    new = started.len(),
                    total = watches.len(),
                    "watching resources"
                );
            }
            if starter.is_none() {
                let (ctx2, synced, keys) = (ctx.clone(), watches.synced.clone(), watches.keys());
                starter = Some(tokio::spawn(async move {
                    let unsynced = synced.wait(&keys, ctx2.config.sync_timeout).await;
                    // Records other processes left pending are settled (once the collector may
                    // write), so each deleted object keeps exactly one entry.
                    if let Some(b) = &ctx2.archive {
                        let (archiver, fence) = (b.archiver.clone(), ctx2.config.fence.clone());
                        tokio::spawn(async move {
                            fence.resumed().await;
                            match archiver.reconcile_pending().await {
                                Ok(0) => {}
                                Ok(n) => {
                                    tracing::info!(records = n, "settled pending archive records")
                                }
                                Err(e) => {
                                    tracing::warn!(error = %e, "cannot settle pending archive records; they stay pending")
                                }
                            }
                        });
                    }
                    if unsynced.is_empty() {
                        tracing::info!(resources = keys.len(), "graph synced; starting workers");
                    } else {
                        tracing::warn!(
                            ?unsynced,
                            "some resources did not list in time; starting workers anyway"
                        );
                    }
                }));
            }
        }
        if workers.is_empty() && starter.as_ref().is_some_and(|s| s.is_finished()) {
            for _ in 0..ctx.config.workers.max(1) {
                workers.push(tokio::spawn(worker::run(ctx.clone())));
            }
            for _ in 0..ctx.config.workers.max(1).div_ceil(4) {
                workers.push(tokio::spawn(orphan::run(ctx.clone())));
            }
            state.set_ready("cascade", true);
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = discovery.changed() => if changed.is_err() { break },
            _ = tokio::time::sleep(std::time::Duration::from_millis(200)), if workers.is_empty() => {}
        }
    }
    ctx.delete_q.shutdown();
    ctx.orphan_q.shutdown();
    drop(watches);
    for w in workers {
        let _ = w.await;
    }
    writer.abort();
    tracing::info!("cascade collector stopped");
}
