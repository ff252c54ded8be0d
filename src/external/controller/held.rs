//! The clusters sweeper leaves alone under Cluster API's contract (paused, marked for move,
//! externally managed, Cluster unreadable), for `sweeper status` and
//! `sweeper_external_clusters_held{state}`. An entry lives while the object does and its state
//! holds: it goes when the object is acted on again or leaves the watch.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: String,
}

/// One held object as `sweeper status` shows it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HeldStatus {
    /// `Kind ns/name`.
    pub object: String,
    /// `paused`, `marked for move`, `externally managed` or `cluster unreadable`.
    pub state: String,
    /// Why, in a sentence (the marker and the object that carries it).
    pub detail: String,
}

#[derive(Clone, Default)]
pub struct Held {
    entries: Arc<Mutex<BTreeMap<String, (&'static str, String)>>>,
    /// `sweeper_external_clusters_held{state}`.
    pub gauge: Family<StateLabels, Gauge>,
}

impl Held {
    /// `object` is held in `state`.
    pub fn hold(&self, object: &str, state: &'static str, detail: String) {
        let previous = self
            .lock()
            .insert(object.to_string(), (state, detail))
            .map(|(s, _)| s);
        if previous != Some(state) {
            self.count(state, 1);
            if let Some(p) = previous {
                self.count(p, -1);
            }
        }
    }

    /// `object` is acted on again, or gone.
    pub fn release(&self, object: &str) {
        if let Some((state, _)) = self.lock().remove(object) {
            self.count(state, -1);
        }
    }

    pub fn list(&self) -> Vec<HeldStatus> {
        self.lock()
            .iter()
            .map(|(object, (state, detail))| HeldStatus {
                object: object.clone(),
                state: (*state).to_string(),
                detail: detail.clone(),
            })
            .collect()
    }

    fn count(&self, state: &str, by: i64) {
        self.gauge
            .get_or_create(&StateLabels {
                state: state.to_string(),
            })
            .inc_by(by);
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, (&'static str, String)>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gauge(h: &Held, state: &str) -> i64 {
        h.gauge
            .get_or_create(&StateLabels {
                state: state.into(),
            })
            .get()
    }

    #[test]
    fn a_state_change_moves_the_count_and_release_forgets() {
        let h = Held::default();
        h.hold("AWSCluster ns/a", "paused", "Cluster ns/a is paused".into());
        h.hold("AWSCluster ns/a", "paused", "again".into());
        assert_eq!(gauge(&h, "paused"), 1, "the same state counts once");
        h.hold("AWSCluster ns/a", "marked for move", "moving".into());
        assert_eq!((gauge(&h, "paused"), gauge(&h, "marked for move")), (0, 1));
        assert_eq!(h.list()[0].detail, "moving");
        h.release("AWSCluster ns/a");
        h.release("AWSCluster ns/a");
        assert_eq!(gauge(&h, "marked for move"), 0);
        assert!(h.list().is_empty());
    }
}
