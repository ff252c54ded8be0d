//! Starts and stops the cascade collector: watches follow discovery, one writer, N workers.
//! Workers start once every watched resource has been listed (or the sync timeout passed), so
//! start-up does not verify owners that are merely not listed yet.

use super::context::{CascadeConfig, Ctx};
use super::driver::{self, Queue};
use super::metrics::CascadeMetrics;
use super::{gone_kinds, writer};
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

impl crate::collector::built::Collector for CascadeCollector {
    fn components(&self) -> Vec<&'static str> {
        vec!["cascade"]
    }

    fn routes(&self) -> Option<axum::Router> {
        Some(super::query::router(self.ctx.clone()))
    }

    fn run(
        self: Box<Self>,
        env: crate::collector::built::RunEnv,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(run(
            self.ctx,
            self.absent_rx,
            env.discovery,
            env.refresh_discovery,
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
    refresh_discovery: crate::engine::discovery::RefreshNow,
    state: crate::engine::health::Health,
    shutdown: CancellationToken,
) {
    let (tx, rx) = mpsc::channel(4096);
    // Until the workers start, nothing is classified: the graph may skip re-checks (see
    // Graph::set_initial_sync).
    ctx.write().set_initial_sync(true);
    let writer = tokio::spawn(writer::run(ctx.clone(), rx, absent_rx));
    let mut served = Following {
        watches: WatchSet::new(ctx.client.clone(), tx.clone(), refresh_discovery),
        kinds: ServedKinds::default(),
        last: None,
        crd_scan_due: None,
    };
    let mut workers: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    let mut starter: Option<tokio::task::JoinHandle<()>> = None;
    // Set by the starter when the wait is over: wakes the loop at once to start the workers.
    let (sync_done_tx, mut sync_done) = watch::channel(false);
    let mut sync_done_tx = Some(sync_done_tx);
    loop {
        let report = discovery.borrow_and_update().clone();
        if let Some(report) = report {
            served.follow(&ctx, report);
            if starter.is_none() {
                starter = Some(wait_for_sync(&ctx, &served.watches, sync_done_tx.take()));
            }
        }
        // Closed without `true`: the starter panicked; start anyway, as after a sync timeout.
        let sync_over = *sync_done.borrow_and_update() || sync_done.has_changed().is_err();
        if workers.is_empty() && sync_over {
            ctx.write().set_initial_sync(false);
            workers = start_workers(&ctx);
            state.set_ready("cascade", true);
        }
        if served.crd_scan_due.is_some_and(|at| at <= Instant::now()) {
            served.crd_scan_due = record_crd_served(&ctx, &served.kinds).await;
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = served.kinds.check_due(&ctx.client, &tx) => {}
        }
        let crd_scan_due = served.crd_scan_due;
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep_until(served.kinds.next_due()), if served.kinds.any_pending() => {}
            _ = tokio::time::sleep_until(crd_scan_due.unwrap_or_else(Instant::now)), if crd_scan_due.is_some() => {}
            changed = discovery.changed() => if changed.is_err() { break },
            _ = sync_done.changed(), if workers.is_empty() => {}
        }
    }
    ctx.delete_q.shutdown();
    ctx.orphan_q.shutdown();
    drop(served);
    for w in workers {
        let _ = w.await;
    }
    writer.abort();
    tracing::info!("cascade collector stopped");
}

/// What the collector's loop keeps of what discovery serves, between wake-ups.
struct Following {
    watches: WatchSet,
    kinds: ServedKinds,
    last: Option<Arc<DiscoveryReport>>,
    /// When to learn which served kinds are CRD-backed (after each new report; retried on error).
    crd_scan_due: Option<Instant>,
}

impl Following {
    /// The latest discovery report: the graph learns what is served and the watches follow it.
    /// The loop also wakes for timers: only a new report changes what is served.
    fn follow(&mut self, ctx: &Ctx, report: Arc<DiscoveryReport>) {
        {
            let mut g = ctx.write();
            g.kinds
                .set_resolved(report.resources.iter().map(|r| ResolvedKind {
                    resource: r.resource.clone(),
                    namespaced: r.namespaced,
                }));
        }
        let started = self.watches.reconcile(&report.resources, |r| {
            ctx.write()
                .kinds
                .intern(&r.resource.api_version, &r.resource.kind)
        });
        if !self.last.as_ref().is_some_and(|l| Arc::ptr_eq(l, &report)) {
            learn_served(ctx, &report, &mut self.kinds);
            self.crd_scan_due = Some(Instant::now());
            self.last = Some(report);
        }
        if !started.is_empty() {
            tracing::info!(
                new = started.len(),
                total = self.watches.len(),
                "watching resources"
            );
        }
    }
}

/// A new discovery report: which kinds are served (and which groups failed), and whatever
/// waited for a kind is looked at again (a new CRD, a group back from failure).
fn learn_served(ctx: &Ctx, report: &DiscoveryReport, kinds: &mut ServedKinds) {
    let failed: HashSet<&str> = report
        .failed
        .iter()
        .map(|f| gone_kinds::group_of(&f.group_version))
        .collect();
    let history = &ctx.kind_history;
    kinds.update(
        &report.resources,
        &failed,
        |gk| {
            history
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .was_crd_served(gk)
        },
        |r| {
            ctx.write()
                .kinds
                .intern(&r.resource.api_version, &r.resource.kind)
        },
    );
    ctx.requeue_unresolved();
}

/// Waits (in a task) until the watches listed, or the sync timeout passed, then says so on
/// `done`: the graph is complete enough to classify.
fn wait_for_sync(
    ctx: &Arc<Ctx>,
    watches: &WatchSet,
    done: Option<watch::Sender<bool>>,
) -> tokio::task::JoinHandle<()> {
    let (ctx, synced, keys) = (ctx.clone(), watches.synced.clone(), watches.keys());
    tokio::spawn(async move {
        let unsynced = synced.wait(&keys, ctx.config.sync_timeout).await;
        if unsynced.is_empty() {
            tracing::info!(resources = keys.len(), "graph synced; starting workers");
        } else {
            tracing::warn!(
                ?unsynced,
                "some resources did not list in time; starting workers anyway"
            );
        }
        if let Some(done) = done {
            let _ = done.send(true);
        }
    })
}

/// The drivers of both queues: `workers` for attempt-to-delete, a quarter as many (at least
/// one) for attempt-to-orphan.
fn start_workers(ctx: &Arc<Ctx>) -> Vec<tokio::task::JoinHandle<()>> {
    let n = ctx.config.workers.max(1);
    let delete = (0..n).map(|_| tokio::spawn(driver::run(ctx.clone(), Queue::Delete)));
    let orphan = (0..n.div_ceil(4)).map(|_| tokio::spawn(driver::run(ctx.clone(), Queue::Orphan)));
    delete.chain(orphan).collect()
}

/// Records which of the kinds discovery serves are served by a CRD (the only kinds that can be
/// found gone, see `gone_kinds`). Returns when to try again: never after success, in 5 s after an error.
async fn record_crd_served(ctx: &Ctx, kinds: &ServedKinds) -> Option<Instant> {
    match tokio::time::timeout(Duration::from_secs(10), gone_kinds::crd_groups(&ctx.client)).await {
        Ok(Ok(groups)) => {
            ctx.kind_history
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .record_crd_served(kinds.served.keys(), &groups);
            None
        }
        failed => {
            let error = match failed {
                Ok(Err(e)) => e.to_string(),
                _ => "timed out".to_string(),
            };
            tracing::warn!(%error, "cannot list APIServices to learn which kinds CRDs serve; retrying");
            Some(Instant::now() + Duration::from_secs(5))
        }
    }
}

/// Kinds discovery stopped serving, until the API server confirms they are gone (see `gone_kinds`) or
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

impl Recheck {
    /// The next check, after the current delay; the delay doubles up to [`RECHECK_MAX`].
    fn postpone(&mut self, now: Instant) {
        self.next = now + self.delay;
        self.delay = (self.delay * 2).min(RECHECK_MAX);
    }
}

/// First re-check after this, doubling up to [`RECHECK_MAX`]: a terminating CRD is usually gone
/// within seconds; an aggregated API server that is down may take long, and costs two lists a
/// minute meanwhile.
const RECHECK_FIRST: Duration = Duration::from_secs(2);
const RECHECK_MAX: Duration = Duration::from_secs(60);

impl ServedKinds {
    /// A new discovery report. Kinds of a group whose discovery `failed` stay served (unknown is
    /// not gone); only kinds `crd_served` are candidates (an aggregated API's are not).
    fn update(
        &mut self,
        resources: &[crate::engine::discovery::DeletableResource],
        failed: &HashSet<&str>,
        crd_served: impl Fn(&(String, String)) -> bool,
        mut intern: impl FnMut(&crate::engine::discovery::DeletableResource) -> KindId,
    ) {
        let mut now: HashMap<(String, String), KindId> = resources
            .iter()
            .map(|r| {
                let gk = (r.resource.group.clone(), r.resource.kind.clone());
                (gk, intern(r))
            })
            .collect();
        for (gk, kind) in self.served.drain() {
            if now.contains_key(&gk) {
                continue;
            }
            if failed.contains(gk.0.as_str()) {
                now.insert(gk, kind);
            } else if crd_served(&gk) {
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
            let answer = tokio::time::timeout(
                Duration::from_secs(10),
                gone_kinds::check(client, group, kind),
            )
            .await;
            match answer {
                Ok(Ok(gone_kinds::KindPresence::Gone)) => {
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
                        Ok(Ok(gone_kinds::KindPresence::MayExist(why))) => why.to_string(),
                        Ok(Err(e)) => e.to_string(),
                        _ => "the check timed out".to_string(),
                    };
                    if let Some(r) = self.unserved.get_mut(&gk) {
                        tracing::debug!(group, kind, %why, "kind not served, but may still exist");
                        r.postpone(Instant::now());
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
    fn a_crd_kind_that_stops_being_served_is_rechecked_until_served_again() {
        let mut k = ServedKinds::default();
        let mut next_id = 0u16;
        let mut intern = |_: &DeletableResource| {
            next_id += 1;
            next_id
        };
        let none = HashSet::new();
        let all_crd = |_: &(String, String)| true;
        k.update(
            &[res("a.dev", "Widget"), res("a.dev", "Gadget")],
            &none,
            all_crd,
            &mut intern,
        );
        assert!(!k.any_pending(), "nothing unserved yet");
        k.update(&[res("a.dev", "Gadget")], &none, all_crd, &mut intern);
        assert!(k.any_pending());
        assert!(k.unserved.contains_key(&("a.dev".into(), "Widget".into())));
        assert!(k.next_due() <= Instant::now(), "checked at once");
        // Each "may still exist" backs off: 2 s, 4 s, ... capped at a minute.
        let t = Instant::now();
        let r = k.unserved.values_mut().next().unwrap();
        r.postpone(t);
        assert_eq!(r.next, t + RECHECK_FIRST);
        for _ in 0..10 {
            r.postpone(t);
        }
        assert_eq!(r.next, t + RECHECK_MAX);
        assert_eq!(k.next_due(), t + RECHECK_MAX);
        // Served again (a CRD re-created, a group back from a failed discovery): forgotten.
        k.update(
            &[res("a.dev", "Gadget"), res("a.dev", "Widget")],
            &none,
            all_crd,
            &mut intern,
        );
        assert!(!k.any_pending());
        // A kind never served is never a candidate: an owner of it is "unknown", kept.
        k.update(&[res("a.dev", "Gadget")], &none, all_crd, &mut intern);
        assert_eq!(k.unserved.len(), 1);
    }

    #[test]
    fn kinds_of_a_failed_group_or_not_served_by_a_crd_are_not_candidates() {
        let mut k = ServedKinds::default();
        let mut intern = |_: &DeletableResource| 1;
        let none = HashSet::new();
        let only_widgets = |gk: &(String, String)| gk.1 == "Widget";
        k.update(
            &[res("a.dev", "Widget"), res("m.dev", "PodMetrics")],
            &none,
            only_widgets,
            &mut intern,
        );
        // The group's discovery failed: unknown, not gone; still counted as served.
        let failed: HashSet<&str> = ["a.dev"].into();
        k.update(&[], &failed, only_widgets, &mut intern);
        assert!(!k.unserved.contains_key(&("a.dev".into(), "Widget".into())));
        assert!(k.served.contains_key(&("a.dev".into(), "Widget".into())));
        assert!(
            !k.unserved
                .contains_key(&("m.dev".into(), "PodMetrics".into())),
            "an aggregated API's kind is never found gone"
        );
        // The group discovers again without the kind: now it is a candidate.
        k.update(&[], &none, only_widgets, &mut intern);
        assert!(k.unserved.contains_key(&("a.dev".into(), "Widget".into())));
    }
}
