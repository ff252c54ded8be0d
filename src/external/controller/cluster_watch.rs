//! Watches Cluster API's Clusters so that a cluster's objects are reconciled the moment its
//! `spec.paused` changes (an unpause resumes a waiting teardown at once, not at the next
//! requeue), or the Cluster goes. Only changes are passed on: the controllers' own watches already
//! reconcile every object at start.
//!
//! Cluster API may be installed after sweeper starts, or not at all: the resource is looked up
//! again every minute until it is served. The watch has client-go's backoff.

use crate::external::core::capi;
use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// A Cluster whose pause changed: its namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterChange {
    pub namespace: String,
    pub name: String,
}

/// The Clusters' pause as last seen, and which changes to pass on.
#[derive(Default)]
pub struct PauseMemory {
    paused: HashMap<(String, String), bool>,
}

/// One [`PauseMemory`], shared by the watch (which writes it) and the controllers (which read it
/// for `sweeper status`; never to decide a deletion, which reads the Cluster itself).
#[derive(Clone, Default)]
pub struct Pauses(Arc<Mutex<PauseMemory>>);

impl Pauses {
    /// Whether the watch last saw Cluster `namespace/name` paused; `None` when it has not seen it.
    pub fn get(&self, namespace: &str, name: &str) -> Option<bool> {
        self.lock()
            .paused
            .get(&(namespace.to_string(), name.to_string()))
            .copied()
    }

    /// As the watch would record it (tests).
    #[cfg(test)]
    pub fn set(&self, namespace: &str, name: &str, paused: bool) {
        self.lock().seen(namespace, name, paused, true);
    }

    fn lock(&self) -> MutexGuard<'_, PauseMemory> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl PauseMemory {
    /// A Cluster was seen; `initial`: during a (re)list. Returns whether its objects must be
    /// looked at again: its pause changed since last seen (a relist compares too, so a change
    /// during a watch gap counts), or it is new outside a list.
    pub fn seen(&mut self, namespace: &str, name: &str, paused: bool, initial: bool) -> bool {
        let previous = self
            .paused
            .insert((namespace.to_string(), name.to_string()), paused);
        match previous {
            Some(p) => p != paused,
            None => !initial,
        }
    }

    /// A Cluster was deleted: its objects wait no longer if it was paused.
    pub fn gone(&mut self, namespace: &str, name: &str) -> bool {
        self.paused
            .remove(&(namespace.to_string(), name.to_string()))
            .unwrap_or(false)
    }
}

/// Runs until `shutdown`, sending each change on `changes`. `scope`: the namespaces watched, one
/// watch each (empty: one watch of every namespace).
pub async fn run(
    client: Client,
    scope: Vec<String>,
    changes: broadcast::Sender<ClusterChange>,
    memory: Pauses,
    shutdown: CancellationToken,
) {
    let ar = loop {
        match capi::cluster_resources(&client).await {
            Ok(found) if !found.is_empty() => break found[0].clone(),
            Ok(_) => {
                tracing::debug!("Cluster API's Cluster is not served; looking again in a minute")
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot discover Cluster API's Cluster; looking again in a minute")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
        }
    };
    tracing::info!(version = %ar.version, "watching Cluster API's Clusters for pause changes");
    let apis: Vec<Api<DynamicObject>> = if scope.is_empty() {
        vec![Api::all_with(client, &ar)]
    } else {
        scope
            .iter()
            .map(|ns| Api::namespaced_with(client.clone(), ns, &ar))
            .collect()
    };
    // Each watch's own list start and end are ignored below, so merging them loses nothing.
    let mut events = futures::stream::select_all(apis.into_iter().map(|api| {
        watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed()
    }));
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            e = events.next() => e,
        };
        let changed = match event {
            None => return,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "Cluster watch failing; retrying with backoff");
                continue;
            }
            Some(Ok(watcher::Event::Apply(c))) => seen(&memory, c, false),
            Some(Ok(watcher::Event::InitApply(c))) => seen(&memory, c, true),
            Some(Ok(watcher::Event::Delete(c))) => {
                let gone = memory.lock().gone(&ns(&c), &c.name_any());
                gone.then_some(c)
            }
            Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => None,
        };
        if let Some(c) = changed {
            tracing::info!(cluster = %format!("{}/{}", ns(&c), c.name_any()), paused = capi::is_paused(&c.data), "Cluster pause changed: reconciling its objects");
            // No receiver (the controllers stopped) is not an error worth a line.
            let _ = changes.send(ClusterChange {
                namespace: ns(&c),
                name: c.name_any(),
            });
        }
    }
}

/// Records Cluster `c`'s pause (`initial`: seen in a list); `c` when its objects must be looked at.
fn seen(memory: &Pauses, c: DynamicObject, initial: bool) -> Option<DynamicObject> {
    let changed = memory
        .lock()
        .seen(&ns(&c), &c.name_any(), capi::is_paused(&c.data), initial);
    changed.then_some(c)
}

fn ns(c: &DynamicObject) -> String {
    c.namespace().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pause_changes_and_new_clusters_outside_a_list_are_passed_on() {
        let mut m = PauseMemory::default();
        assert!(
            !m.seen("ns", "a", true, true),
            "first list: the controllers see it anyway"
        );
        assert!(
            !m.seen("ns", "a", true, false),
            "a status update changes nothing"
        );
        assert!(m.seen("ns", "a", false, false), "unpaused");
        assert!(
            m.seen("ns", "a", true, true),
            "paused again, seen at a relist"
        );
        assert!(m.seen("ns", "b", false, false), "new outside a list");
        assert!(
            m.gone("ns", "a"),
            "a paused Cluster deleted: its objects wait no longer"
        );
        assert!(!m.gone("ns", "b"), "an unpaused one held nothing");
        assert!(!m.gone("ns", "zzz"));
    }
}
