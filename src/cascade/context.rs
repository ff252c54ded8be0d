//! What the cascade collector's tasks share.

use super::absent_owners::AbsentOwners;
use super::metrics::CascadeMetrics;
use crate::engine::events::Publisher;
use crate::engine::graph::uid::Uid;
use crate::engine::graph::{Graph, Work};
use crate::engine::queue::WorkQueue;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::EventType;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

#[derive(Clone, Debug)]
pub struct CascadeConfig {
    /// Workers per queue (kube-controller-manager's --concurrent-gc-syncs defaults to 20).
    pub workers: usize,
    /// Report what would be deleted; delete and patch nothing.
    pub dry_run: bool,
    /// How long workers wait for the first list of every resource before starting anyway.
    pub sync_timeout: Duration,
    /// The collector's fence (lease and pause): its client's writes pass it; workers whose
    /// write a pause refused park until it opens.
    pub fence: crate::engine::leader::Fence,
    /// Test-only fault injection (none in production): read once by `run`, handed down here.
    pub failpoints: crate::engine::failpoint::Failpoints,
}

impl Default for CascadeConfig {
    fn default() -> Self {
        CascadeConfig {
            workers: 20,
            dry_run: false,
            sync_timeout: Duration::from_secs(60),
            fence: crate::engine::leader::Fence::open(),
            failpoints: crate::engine::failpoint::Failpoints::none(),
        }
    }
}

pub struct Ctx {
    pub client: Client,
    pub config: CascadeConfig,
    pub graph: RwLock<Graph>,
    pub absent: AbsentOwners,
    pub delete_q: Arc<WorkQueue<Uid>>,
    pub orphan_q: Arc<WorkQueue<Uid>>,
    /// Workers tell the writer about virtual owners verified absent.
    pub absent_tx: mpsc::UnboundedSender<Uid>,
    pub metrics: CascadeMetrics,
    pub events: Publisher,
    /// Owners deleted in the background under `sweeper.dev/cascade-complete`: when first seen,
    /// and how many dependents they had then (for the completion Event).
    pub cascades: Mutex<HashMap<Uid, (Instant, usize)>>,
    /// Warning reasons already reported per object, so a retried problem is reported once.
    /// Forgotten when the object goes, and bounded (see [`REPORTED_CAP`]): a long-running
    /// collector must not grow with every object that ever had a problem.
    reported: Mutex<HashMap<Uid, Vec<&'static str>>>,
    /// The archive (None with `--archive=none`): every delete is recorded first.
    pub archive: Option<crate::archive::batch::Batcher>,
    /// Objects this process archived and deleted in the foreground: their finalizer release later
    /// must not archive them a second time. Bounded like `reported`.
    pub archived_foreground: Mutex<std::collections::HashSet<Uid>>,
    /// Objects waiting for a kind discovery does not serve (theirs or an owner's): requeued at
    /// once when discovery changes, instead of at the end of a backoff that may reach minutes.
    /// Bounded (see [`UNRESOLVED_CAP`]); forgotten when the object goes.
    unresolved: Mutex<std::collections::HashSet<Uid>>,
    /// The kinds a CRD served since start, and recent "is it gone" answers (see `gone_kinds`): an
    /// owner of a kind never served by a CRD here is "unknown", kept and retried, like upstream's
    /// collector does, since nothing shows it cannot come back.
    pub kind_history: Mutex<super::gone_kinds::KindHistory>,
}

/// At most this many objects wait for a kind; past it they are left to their backoff alone.
const UNRESOLVED_CAP: usize = 65_536;

/// At most this many objects remembered as reported; past it the memory is dropped, which costs
/// at most one repeated Warning per still-failing object.
const REPORTED_CAP: usize = 65_536;

impl Ctx {
    pub fn new(
        client: Client,
        config: CascadeConfig,
        metrics: CascadeMetrics,
        absent_tx: mpsc::UnboundedSender<Uid>,
        archive: Option<crate::archive::batch::Batcher>,
    ) -> Self {
        Ctx {
            archive,
            archived_foreground: Mutex::new(std::collections::HashSet::new()),
            unresolved: Mutex::new(std::collections::HashSet::new()),
            kind_history: Mutex::new(Default::default()),
            events: Publisher::new(client.clone(), "sweeper-cascade", "GarbageCollect"),
            client,
            config,
            graph: RwLock::new(Graph::new()),
            absent: AbsentOwners::new(16_384),
            delete_q: WorkQueue::new(Duration::from_millis(5), Duration::from_secs(300)),
            orphan_q: WorkQueue::new(Duration::from_millis(5), Duration::from_secs(300)),
            absent_tx,
            metrics,
            cascades: Mutex::new(HashMap::new()),
            reported: Mutex::new(HashMap::new()),
        }
    }

    /// Drops what is remembered about an object that is gone (its uid never comes back).
    pub fn forget(&self, uid: &Uid) {
        self.reported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(uid);
        self.cascades
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(uid);
        self.unresolved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(uid);
    }

    /// `uid` waits for a kind discovery does not serve (its own or an owner's).
    pub fn wait_for_kind(&self, uid: Uid) {
        let mut waiting = self.unresolved.lock().unwrap_or_else(|p| p.into_inner());
        if waiting.len() < UNRESOLVED_CAP {
            waiting.insert(uid);
        }
    }

    /// Requeues every object that waited for a kind (call when discovery changed).
    pub fn requeue_unresolved(&self) {
        let waiting: Vec<Uid> = self
            .unresolved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for uid in waiting {
            self.delete_q.add(uid);
        }
    }

    pub fn read(&self) -> RwLockReadGuard<'_, Graph> {
        self.graph.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, Graph> {
        self.graph.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn route(&self, work: Vec<Work>) {
        for w in work {
            match w {
                Work::AttemptToDelete(u) => self.delete_q.add(u),
                Work::AttemptToOrphan(u) => self.orphan_q.add(u),
            }
        }
    }

    /// Publishes an Event on `reference`, once per (object, reason) for Warnings.
    pub async fn event(
        &self,
        uid: Uid,
        reference: ObjectReference,
        type_: EventType,
        reason: &'static str,
        note: String,
    ) {
        if type_ == EventType::Warning {
            let mut seen = self.reported.lock().unwrap_or_else(|p| p.into_inner());
            if !first_report(&mut seen, uid, reason, REPORTED_CAP) {
                return;
            }
        }
        self.events.emit(&reference, type_, reason, note).await;
    }
}

/// Records `(uid, reason)`; true the first time. Past `cap` objects the memory starts over.
fn first_report(
    seen: &mut HashMap<Uid, Vec<&'static str>>,
    uid: Uid,
    reason: &'static str,
    cap: usize,
) -> bool {
    if seen.get(&uid).is_some_and(|r| r.contains(&reason)) {
        return false;
    }
    if seen.len() >= cap && !seen.contains_key(&uid) {
        seen.clear();
    }
    seen.entry(uid).or_default().push(reason);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_problem_is_reported_once_and_memory_stays_bounded() {
        let mut seen = HashMap::new();
        let a = Uid::hash_of("a");
        assert!(first_report(&mut seen, a, "X", 4));
        assert!(!first_report(&mut seen, a, "X", 4));
        assert!(first_report(&mut seen, a, "Y", 4));
        for i in 0..100 {
            first_report(&mut seen, Uid::hash_of(&i.to_string()), "X", 4);
            assert!(seen.len() <= 4);
        }
    }
}
