//! Metadata-only watches, one per deletable resource, all feeding ONE channel read by the graph
//! writer. Objects are reduced to [`MetaLite`] in the watch task, so full metadata never
//! accumulates anywhere. The set of watches follows discovery: new resources (a new CRD) get a
//! watch, vanished ones lose theirs.

use crate::engine::discovery::DeletableResource;
use crate::engine::graph::kinds::KindId;
use crate::engine::graph::node::MetaLite;
use crate::engine::graph::uid::Uid;
use crate::engine::meta::{self, MetaError};
use futures::StreamExt;
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

#[derive(Debug)]
pub enum WatchEvent {
    Apply {
        kind: KindId,
        meta: MetaLite,
    },
    Delete {
        kind: KindId,
        meta: MetaLite,
    },
    /// A (re)list finished: observed objects of `kind` not in `seen` are gone.
    Resynced {
        kind: KindId,
        seen: HashSet<Uid>,
    },
    /// An object whose metadata can't be used as given (reported, never fatal).
    Invalid {
        kind: KindId,
        namespace: Option<String>,
        name: String,
        error: MetaError,
    },
}

/// Counts resources whose first list has completed; workers wait for all of them.
#[derive(Clone)]
pub struct SyncState {
    tx: Arc<watch::Sender<HashSet<String>>>,
}

impl SyncState {
    fn new() -> Self {
        SyncState {
            tx: Arc::new(watch::channel(HashSet::new()).0),
        }
    }

    fn mark(&self, key: &str) {
        self.tx.send_modify(|s| {
            s.insert(key.to_string());
        });
    }

    /// A resource no longer served (its CRD was deleted, its group went away) has nothing left to
    /// list: it counts as synced, so a waiter that expected it is not held until the timeout.
    fn no_longer_served(&self, key: &str) {
        self.mark(key);
    }

    /// Waits until every key in `expected` has synced, or `timeout` passes (a resource whose
    /// list is forbidden must not hold the collector back forever). Returns the unsynced keys.
    pub async fn wait(&self, expected: &[String], timeout: Duration) -> Vec<String> {
        let mut rx = self.tx.subscribe();
        let done = |s: &HashSet<String>| expected.iter().all(|k| s.contains(k));
        let _ = tokio::time::timeout(timeout, rx.wait_for(done)).await;
        let s = rx.borrow();
        expected
            .iter()
            .filter(|k| !s.contains(*k))
            .cloned()
            .collect()
    }
}

pub fn resource_key(r: &DeletableResource) -> String {
    format!(
        "{}/{}/{}",
        r.resource.group, r.resource.version, r.resource.plural
    )
}

pub struct WatchSet {
    client: Client,
    tx: mpsc::Sender<WatchEvent>,
    running: HashMap<String, JoinHandle<()>>,
    pub synced: SyncState,
    page_size: u32,
}

impl WatchSet {
    pub fn new(client: Client, tx: mpsc::Sender<WatchEvent>, page_size: u32) -> Self {
        WatchSet {
            client,
            tx,
            running: HashMap::new(),
            synced: SyncState::new(),
            page_size,
        }
    }

    /// Starts watches for new resources and stops those no longer discovered. `kind_of` interns
    /// the resource's kind in the graph. Returns the keys of the newly started watches.
    pub fn reconcile(
        &mut self,
        resources: &[DeletableResource],
        mut kind_of: impl FnMut(&DeletableResource) -> KindId,
    ) -> Vec<String> {
        let wanted: HashMap<String, &DeletableResource> =
            resources.iter().map(|r| (resource_key(r), r)).collect();
        self.running.retain(|key, handle| {
            let keep = wanted.contains_key(key);
            if !keep {
                tracing::info!(resource = %key, "resource no longer served; stopping its watch");
                handle.abort();
                self.synced.no_longer_served(key);
            }
            keep
        });
        let mut started = Vec::new();
        for (key, r) in wanted {
            if self.running.contains_key(&key) {
                continue;
            }
            let kind = kind_of(r);
            let span = tracing::info_span!("watch", resource = %key);
            let task = watch_resource(
                self.client.clone(),
                r.clone(),
                kind,
                key.clone(),
                self.tx.clone(),
                self.synced.clone(),
                self.page_size,
            );
            self.running.insert(
                key.clone(),
                tokio::spawn(tracing::Instrument::instrument(task, span)),
            );
            started.push(key);
        }
        started
    }

    pub fn keys(&self) -> Vec<String> {
        self.running.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.running.len()
    }

    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }
}

impl Drop for WatchSet {
    fn drop(&mut self) {
        for h in self.running.values() {
            h.abort();
        }
    }
}

async fn watch_resource(
    client: Client,
    r: DeletableResource,
    kind: KindId,
    key: String,
    tx: mpsc::Sender<WatchEvent>,
    synced: SyncState,
    page_size: u32,
) {
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &r.resource);
    let config = watcher::Config::default().page_size(page_size);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut seen: HashSet<Uid> = HashSet::new();
    while let Some(event) = stream.next().await {
        let msg = match event {
            Ok(Event::Init) => {
                seen.clear();
                continue;
            }
            Ok(Event::InitApply(obj)) => match convert(kind, &obj.metadata, &tx).await {
                Some(meta) => {
                    seen.insert(meta.uid);
                    WatchEvent::Apply { kind, meta }
                }
                None => continue,
            },
            Ok(Event::InitDone) => {
                synced.mark(&key);
                WatchEvent::Resynced {
                    kind,
                    seen: std::mem::take(&mut seen),
                }
            }
            Ok(Event::Apply(obj)) => match convert(kind, &obj.metadata, &tx).await {
                Some(meta) => WatchEvent::Apply { kind, meta },
                None => continue,
            },
            Ok(Event::Delete(obj)) => match convert(kind, &obj.metadata, &tx).await {
                Some(meta) => WatchEvent::Delete { kind, meta },
                None => continue,
            },
            Err(e) => {
                // The backoff retries; a forbidden or failing resource never stops the others.
                tracing::warn!(error = %e, "watch failed; retrying with backoff");
                continue;
            }
        };
        if tx.send(msg).await.is_err() {
            return; // writer gone: shutting down
        }
    }
}

async fn convert(
    kind: KindId,
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    tx: &mpsc::Sender<WatchEvent>,
) -> Option<MetaLite> {
    match meta::lite(m) {
        Ok((lite, problems)) => {
            for error in problems {
                let _ = tx
                    .send(WatchEvent::Invalid {
                        kind,
                        namespace: lite.namespace.clone(),
                        name: lite.name.clone(),
                        error,
                    })
                    .await;
            }
            Some(lite)
        }
        Err(error) => {
            tracing::warn!(%error, "object ignored");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_resource_that_stops_being_served_does_not_hold_the_sync_wait() {
        let s = SyncState::new();
        let waiter = {
            let s = s.clone();
            tokio::spawn(async move {
                s.wait(
                    &["a".to_string(), "b".to_string()],
                    Duration::from_secs(3600),
                )
                .await
            })
        };
        s.mark("a");
        s.no_longer_served("b");
        let unsynced = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the wait ends without its timeout")
            .unwrap();
        assert!(unsynced.is_empty(), "{unsynced:?}");
    }
}
