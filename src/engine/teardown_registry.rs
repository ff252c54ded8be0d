//! Teardowns in progress, with their phase: one registry the tenant and external collectors
//! write and `sweeper status` reads (it also replaces the start-time maps each collector kept).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Clone, Default)]
pub struct TeardownRegistry {
    inner: Arc<Mutex<BTreeMap<(&'static str, String), Entry>>>,
}

struct Entry {
    started: Instant,
    phase: String,
    detail: String,
    passes: u64,
}

/// One teardown as `sweeper status` shows it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TeardownStatus {
    /// `tenant` or `external`.
    pub collector: String,
    /// The object being torn down (`Tenant/<name>`, `AWSCluster/<ns>/<name>`, ...).
    pub object: String,
    pub phase: String,
    pub detail: String,
    /// Passes run so far (each pass re-derives what is left from the world).
    pub passes: u64,
    pub running_seconds: f64,
}

impl TeardownRegistry {
    /// Records the start of a teardown (idempotent: a later pass keeps the first start time).
    /// Returns when it started and whether this call started it.
    pub fn begin(&self, collector: &'static str, object: &str) -> (Instant, bool) {
        self.begin_since(collector, object, Duration::ZERO)
    }

    /// As [`Self::begin`], for a teardown that began `ago` before now: the object's deletion, so
    /// a replica that takes over after a failover reports the teardown's real age (the
    /// `SweeperTeardownStuck` alert would otherwise start counting again at every failover).
    pub fn begin_since(
        &self,
        collector: &'static str,
        object: &str,
        ago: Duration,
    ) -> (Instant, bool) {
        let mut map = self.lock();
        let key = (collector, object.to_string());
        let fresh = !map.contains_key(&key);
        let e = map.entry(key).or_insert_with(|| Entry {
            started: Instant::now().checked_sub(ago).unwrap_or_else(Instant::now),
            phase: "starting".into(),
            detail: String::new(),
            passes: 0,
        });
        (e.started, fresh)
    }

    /// Sets the phase after a pass (counts the pass).
    pub fn update(&self, collector: &'static str, object: &str, phase: String, detail: String) {
        if let Some(e) = self.lock().get_mut(&(collector, object.to_string())) {
            e.phase = phase;
            e.detail = detail;
            e.passes += 1;
        }
    }

    /// Ends a teardown; returns how long it ran, if it was in progress.
    pub fn finish(&self, collector: &'static str, object: &str) -> Option<Duration> {
        self.lock()
            .remove(&(collector, object.to_string()))
            .map(|e| e.started.elapsed())
    }

    /// How long `collector`'s oldest teardown in progress has run (zero with none): what the
    /// `SweeperTeardownStuck` alert watches, per teardown, so a steady stream of short teardowns
    /// never looks stuck.
    pub fn oldest(&self, collector: &str) -> Duration {
        self.lock()
            .iter()
            .filter(|((c, _), _)| *c == collector)
            .map(|(_, e)| e.started.elapsed())
            .max()
            .unwrap_or_default()
    }

    pub fn list(&self) -> Vec<TeardownStatus> {
        self.lock()
            .iter()
            .map(|((collector, object), e)| TeardownStatus {
                collector: (*collector).to_string(),
                object: object.clone(),
                phase: e.phase.clone(),
                detail: e.detail.clone(),
                passes: e.passes,
                running_seconds: e.started.elapsed().as_secs_f64(),
            })
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<(&'static str, String), Entry>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_teardown_begun_since_its_deletion_reports_its_whole_age() {
        let t = TeardownRegistry::default();
        t.begin_since("external", "AWSCluster ns/a", Duration::from_secs(3600));
        assert!(t.oldest("external") >= Duration::from_secs(3600));
        assert!(t.list()[0].running_seconds >= 3600.0);
        // A later begin keeps the first start.
        t.begin_since("external", "AWSCluster ns/a", Duration::ZERO);
        assert!(t.oldest("external") >= Duration::from_secs(3600));
    }

    #[test]
    fn begin_is_idempotent_and_finish_removes() {
        let t = TeardownRegistry::default();
        let (at, fresh) = t.begin("tenant", "Tenant a");
        assert!(fresh);
        let (again, fresh) = t.begin("tenant", "Tenant a");
        assert!(!fresh);
        assert_eq!(at, again);
        t.update("tenant", "Tenant a", "deleting".into(), "3 left".into());
        let l = t.list();
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].phase.as_str(), l[0].passes), ("deleting", 1));
        assert!(t.finish("tenant", "Tenant a").is_some());
        assert!(t.finish("tenant", "Tenant a").is_none());
        assert!(t.list().is_empty());
    }

    #[test]
    fn the_oldest_teardown_is_per_collector_and_a_finished_one_leaves_it() {
        let t = TeardownRegistry::default();
        assert_eq!(t.oldest("external"), Duration::ZERO);
        t.begin("external", "AWSCluster ns/old");
        std::thread::sleep(Duration::from_millis(30));
        t.begin("external", "AWSCluster ns/new");
        t.begin("tenant", "Tenant t");
        let old = t.oldest("external");
        assert!(old >= Duration::from_millis(30), "{old:?}");
        assert!(t.oldest("tenant") < old);
        t.finish("external", "AWSCluster ns/old");
        assert!(t.oldest("external") < Duration::from_millis(30));
        assert_eq!(t.oldest("cascade"), Duration::ZERO);
    }
}
