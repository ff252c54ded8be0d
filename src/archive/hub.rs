//! The archive's part in `sweeper run`: the archivers the collectors ask for while they are built,
//! and all of the archive's background work, started in one place once this replica leads.
//!
//! Before this, each archiving collector settled pending records in its own start-up code and
//! `run` started the settle and expiry loops: three places that had to agree.

use super::Settings;
use super::record_kind::RecordKind;
use super::store::{ArchiveMetrics, Archiver};
use crate::engine::leader::Fence;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often settles that failed (refused while paused, a lost answer) are retried: soon, not
/// only before the next batch, which may never come.
const SETTLE_RETRY: Duration = Duration::from_secs(5);

/// The archive in `sweeper run`: hands each collector its [`Archiver`] (the writer and settler of
/// its records) and runs all of the archive's background work. One per process.
pub struct ArchiveHub {
    settings: Settings,
    metrics: ArchiveMetrics,
    /// Archivers of collectors that archive what they delete, with their collector's fence.
    archiving: Mutex<Vec<(Arc<Archiver>, Fence)>>,
    /// An archiver that only expires (the external collector's audit records), used when no
    /// collector archives, with its collector's fence.
    expiry_only: Mutex<Option<(Arc<Archiver>, Fence)>>,
}

impl ArchiveHub {
    pub fn new(settings: Settings, metrics: ArchiveMetrics) -> Self {
        ArchiveHub {
            settings,
            metrics,
            archiving: Mutex::new(Vec::new()),
            expiry_only: Mutex::new(None),
        }
    }

    /// The archiver of a collector that archives what it deletes, on the collector's own client
    /// (its rate limit and pause); None when archiving is off (`--archive=none`).
    pub fn archiver(
        &self,
        client: &kube::Client,
        fence: &Fence,
        collector: &'static str,
    ) -> Option<Arc<Archiver>> {
        self.settings.mode.is_on().then(|| {
            let a = Arc::new(self.make(client, collector));
            lock(&self.archiving).push((a.clone(), fence.clone()));
            a
        })
    }

    /// A collector that writes records it never archives into (the external collector's audit
    /// records) needs them expired even when no collector archives: then its own archiver runs
    /// the expiry, over the record `kinds` it writes only, in sweeper's namespace only (where it
    /// writes them). An archiving collector's expiry covers every namespace, sweeper's included.
    pub fn expire_records_of(
        &self,
        client: &kube::Client,
        fence: &Fence,
        collector: &'static str,
        kinds: &'static [RecordKind],
    ) {
        let mut slot = lock(&self.expiry_only);
        if slot.is_none() {
            *slot = Some((
                Arc::new(
                    self.make(client, collector)
                        .expiring_only(kinds)
                        .expiring_in(self.settings.namespace.clone()),
                ),
                fence.clone(),
            ));
        }
    }

    fn make(&self, client: &kube::Client, collector: &'static str) -> Archiver {
        Archiver::new(
            client.clone(),
            self.settings.clone(),
            collector,
            self.metrics.clone(),
        )
    }

    /// Starts the archive's background work:
    /// - per archiving collector, the records other processes left pending are settled once the
    ///   collector may write (so each deleted object keeps exactly one entry), and failed settles
    ///   are retried every [`SETTLE_RETRY`];
    /// - one expiry loop, on the first archiver (waiting out its collector's pause, and the first
    ///   read of the pause switch), every ttl/10 (at most every 5 minutes) and as soon as the
    ///   next record falls due.
    pub fn start(&self, shutdown: &CancellationToken) -> Vec<JoinHandle<()>> {
        let archiving = lock(&self.archiving).clone();
        let mut tasks = Vec::new();
        for (archiver, fence) in &archiving {
            let (a, fence, stop) = (archiver.clone(), fence.clone(), shutdown.clone());
            // Until shutdown only: a collector paused for good must not hold up the stop.
            tasks.push(tokio::spawn(async move {
                let settle = async {
                    fence.resumed().await;
                    let started = std::time::Instant::now();
                    match a.reconcile_pending().await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(records = n, ms = started.elapsed().as_millis() as u64, "settled pending archive records"),
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot settle pending archive records; they stay pending")
                        }
                    }
                };
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = settle => {}
                }
            }));
            tasks.push(tokio::spawn(
                archiver.clone().settle_loop(SETTLE_RETRY, shutdown.clone()),
            ));
        }
        let expirer = archiving
            .first()
            .cloned()
            .or_else(|| lock(&self.expiry_only).clone());
        if let Some((a, fence)) = expirer {
            let every =
                (self.settings.ttl / 10).clamp(Duration::from_secs(1), Duration::from_secs(300));
            tasks.push(tokio::spawn(a.expire_loop(every, fence, shutdown.clone())));
        }
        tasks
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
