//! Starts and stops the cascade collector: watches follow discovery, one writer, N workers.
//! Workers start once every watched resource has been listed (or the sync timeout passed), so
//! start-up does not verify owners that are merely not listed yet.

use super::context::{CascadeConfig, Ctx};
use super::metrics::CascadeMetrics;
use super::{gone, orphan, worker, writer};
use crate::engine::discovery::DiscoveryReport;
use crate::engine::graph::kinds::KindId;
use crate::engine::graph::kinds::ResolvedKind;
use crate::engine::watch::{WatchEvent, WatchSet};
use kube::Client;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
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
    let mut watches = WatchSet::new(ctx.client.clone(), tx.clone(), ctx.config.page_size);
    let mut kinds = ServedKinds::default();
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
            kinds.update(&report.resources, |r| {
                ctx.write()
                    .kinds
                    .intern(&r.resource.api_version, &r.resource.kind)
            });
            ctx.ever_served
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(kinds.served.keys().cloned());
            // Whatever waited for a kind may resolve now (a new CRD, a group back from failure).
            ctx.requeue_unresolved();
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
        kinds.check_due(&ctx.client, &tx).await;
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep_until(kinds.next_due()), if kinds.any_pending() => {}
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

/// Kinds discovery stopped serving, until the API server confirms they are gone (see `gone`) or
/// they are served again. A confirmed kind's objects still in the graph are treated as deleted
/// (an empty resync through the writer): its watch ended with the CRD and may not have delivered
/// every deletion, and a stale "solid" owner would keep its dependents forever.
#[derive(Default)]
struct ServedKinds {
    served: HashMap<(String, String), KindId>,
    unserved: HashMap<(String, String), Recheck>,
}

struct Recheck {
    kind: KindId,
    next: Instant,
    delay: Duration,
}

/// First re-check after this, doubling up to [`RECHECK_MAX`]: a terminating CRD is usually gone
/// within seconds; an aggregated API server that is down may take long, and costs two lists a
/// minute meanwhile.
const RECHECK_FIRST: Duration = Duration::from_secs(2);
const RECHECK_MAX: Duration = Duration::from_secs(60);

impl ServedKinds {
    fn update(
        &mut self,
        resources: &[crate::engine::discovery::DeletableResource],
        mut intern: impl FnMut(&crate::engine::discovery::DeletableResource) -> KindId,
    ) {
        let now: HashMap<(String, String), KindId> = resources
            .iter()
            .map(|r| {
                let gk = (r.resource.group.clone(), r.resource.kind.clone());
                (gk, intern(r))
            })
            .collect();
        for (gk, kind) in self.served.drain() {
            if !now.contains_key(&gk) {
                self.unserved.insert(
                    gk,
                    Recheck {
                        kind,
                        next: Instant::now(),
                        delay: RECHECK_FIRST,
                    },
                );
            }
        }
        self.unserved.retain(|gk, _| !now.contains_key(gk));
        self.served = now;
    }

    fn any_pending(&self) -> bool {
        !self.unserved.is_empty()
    }

    fn next_due(&self) -> Instant {
        self.unserved
            .values()
            .map(|r| r.next)
            .min()
            .unwrap_or_else(|| Instant::now() + RECHECK_MAX)
    }

    /// Asks the API server about every kind due, and resyncs the confirmed ones to nothing.
    async fn check_due(&mut self, client: &Client, events: &mpsc::Sender<WatchEvent>) {
        let now = Instant::now();
        let due: Vec<(String, String)> = self
            .unserved
            .iter()
            .filter(|(_, r)| r.next <= now)
            .map(|(gk, _)| gk.clone())
            .collect();
        for gk in due {
            let (group, kind) = (&gk.0, &gk.1);
            let answer =
                tokio::time::timeout(Duration::from_secs(10), gone::check(client, group, kind))
                    .await;
            match answer {
                Ok(Ok(gone::Verdict::Gone)) => {
                    let Some(r) = self.unserved.remove(&gk) else {
                        continue;
                    };
                    tracing::info!(
                        group,
                        kind,
                        "kind no longer served and no CustomResourceDefinition defines it: its objects are gone"
                    );
                    let _ = events
                        .send(WatchEvent::Resynced {
                            kind: r.kind,
                            seen: HashSet::new(),
                        })
                        .await;
                }
                other => {
                    let why = match other {
                        Ok(Ok(gone::Verdict::MayExist(why))) => why.to_string(),
                        Ok(Err(e)) => e.to_string(),
                        _ => "the check timed out".to_string(),
                    };
                    if let Some(r) = self.unserved.get_mut(&gk) {
                        tracing::debug!(group, kind, %why, "kind not served, but may still exist");
                        r.next = Instant::now() + r.delay;
                        r.delay = (r.delay * 2).min(RECHECK_MAX);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::discovery::DeletableResource;
    use kube::api::ApiResource;

    fn res(group: &str, kind: &str) -> DeletableResource {
        DeletableResource {
            resource: ApiResource {
                group: group.into(),
                version: "v1".into(),
                api_version: format!("{group}/v1"),
                kind: kind.into(),
                plural: format!("{}s", kind.to_lowercase()),
            },
            namespaced: true,
        }
    }

    #[test]
    fn a_kind_that_stops_being_served_is_rechecked_with_backoff_until_served_again() {
        let mut k = ServedKinds::default();
        let mut next_id = 0u16;
        let mut intern = |_: &DeletableResource| {
            next_id += 1;
            next_id
        };
        k.update(
            &[res("a.dev", "Widget"), res("a.dev", "Gadget")],
            &mut intern,
        );
        assert!(!k.any_pending(), "nothing unserved yet");
        k.update(&[res("a.dev", "Gadget")], &mut intern);
        assert!(k.any_pending());
        assert!(k.unserved.contains_key(&("a.dev".into(), "Widget".into())));
        assert!(k.next_due() <= Instant::now(), "checked at once");
        // A failed check backs off: 2 s, then 4 s, capped at a minute.
        let r = k.unserved.values_mut().next().unwrap();
        r.next = Instant::now() + r.delay;
        r.delay = (r.delay * 2).min(RECHECK_MAX);
        assert_eq!(r.delay, Duration::from_secs(4));
        // Served again (a CRD re-created, a group back from a failed discovery): forgotten.
        k.update(
            &[res("a.dev", "Gadget"), res("a.dev", "Widget")],
            &mut intern,
        );
        assert!(!k.any_pending());
        // A kind never served is never a candidate: an owner of it is "unknown", kept.
        k.update(&[res("a.dev", "Gadget")], &mut intern);
        assert_eq!(k.unserved.len(), 1);
    }
}
