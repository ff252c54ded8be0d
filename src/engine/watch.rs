//! Metadata-only watches, one per deletable resource, all feeding ONE channel read by the graph
//! writer. Objects are reduced to [`MetaLite`] in the watch task, so full metadata never
//! accumulates anywhere. Each resource is listed in one request answered from the API server's
//! watch cache and decoded as it streams in ([`list`]), then watched from the list's version. The set of watches follows discovery: new resources (a new CRD) get a
//! watch, vanished ones lose theirs.

use crate::engine::discovery::{DeletableResource, RefreshNow};
use crate::engine::graph::kinds::KindId;
use crate::engine::graph::node::MetaLite;
use crate::engine::graph::uid::Uid;
use crate::engine::meta::{self, MetaError};
use futures::{StreamExt, TryStreamExt};
use kube::api::{DynamicObject, WatchParams};
use kube::{Api, Client};
use list::{ListError, ListFrom};
use proto::MetaEvent;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

mod list;
mod proto;
mod response;
mod stream;

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
    /// Asked for when a resource's list or watch answers 404: discovery then drops it at once.
    refresh_discovery: RefreshNow,
    /// Resources (group/plural) watched earlier in this process (stopped when discovery lost them, or served under another version): their first
    /// list after a restart reads the newest state, since the graph may still hold their objects
    /// and a stale cache's answer would make it forget some that exist.
    watched_before: HashSet<String>,
}

impl WatchSet {
    pub fn new(
        client: Client,
        tx: mpsc::Sender<WatchEvent>,
        refresh_discovery: RefreshNow,
    ) -> Self {
        WatchSet {
            client,
            tx,
            refresh_discovery,
            running: HashMap::new(),
            synced: SyncState::new(),
            watched_before: HashSet::new(),
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
            // By group and resource, not version: a resync drops nodes by group and kind, so a
            // CRD's new version must not list from a stale cache either.
            let group_resource = format!("{}/{}", r.resource.group, r.resource.plural);
            let from = if self.watched_before.insert(group_resource) {
                ListFrom::Any
            } else {
                ListFrom::Latest
            };
            let span = tracing::info_span!("watch", resource = %key);
            let task = watch_resource(
                self.client.clone(),
                r.clone(),
                kind,
                self.tx.clone(),
                self.synced.clone(),
                self.refresh_discovery.clone(),
                from,
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

/// Lists `r` (streamed object by object, see [`list`]), then watches it from the list's
/// resourceVersion; lists again when the watch's version expired. Every failure is retried with
/// backoff (client-go's 800 ms to 30 s with jitter): a forbidden or failing resource never stops
/// the others.
async fn watch_resource(
    client: Client,
    r: DeletableResource,
    kind: KindId,
    tx: mpsc::Sender<WatchEvent>,
    synced: SyncState,
    refresh_discovery: RefreshNow,
    mut from: ListFrom,
) {
    let key = resource_key(&r);
    let url = Api::<DynamicObject>::all_with(client.clone(), &r.resource)
        .resource_url()
        .to_string();
    let mut backoff = Backoff::default();
    'list: loop {
        let listed = match list::list(&client, &url, &from, kind, &tx).await {
            Ok(listed) => listed,
            Err(ListError::Closed) => return,
            Err(error) => {
                tracing::warn!(%error, "list failed; retrying with backoff");
                if error.is_not_found() {
                    refresh_discovery.request();
                }
                // A relist that failed at a resourceVersion (an API server behind the others)
                // asks for the newest state next; a first list keeps asking its cache.
                if matches!(from, ListFrom::NotOlderThan(_)) {
                    from = ListFrom::Latest;
                }
                backoff.wait().await;
                continue;
            }
        };
        synced.mark(&key);
        let mut version = listed.resource_version;
        let resynced = WatchEvent::Resynced {
            kind,
            seen: listed.seen,
        };
        if tx.send(resynced).await.is_err() {
            return;
        }
        backoff.reset();
        loop {
            let failure = match follow(&client, &url, kind, &tx, &mut version, &mut backoff).await {
                WatchEnd::WriterGone => return, // shutting down
                WatchEnd::Ended(failure) => failure,
            };
            match failure {
                Some(error) if is_expired(&error) => {
                    from = ListFrom::NotOlderThan(version);
                    continue 'list;
                }
                Some(error) => {
                    tracing::warn!(%error, "watch failed; retrying with backoff");
                    if crate::engine::client::not_found(&error) {
                        refresh_discovery.request();
                    }
                    backoff.wait().await;
                }
                // The server ended the watch (its timeout): resume from the last version seen.
                None => {}
            }
        }
    }
}

/// How one watch request ended.
enum WatchEnd {
    /// The graph's writer is gone: shutting down.
    WriterGone,
    /// The stream ended: by the server's timeout (None), or with the error that broke it.
    Ended(Option<kube::Error>),
}

/// One watch request from `version`, each event sent to the writer as it comes; `version`
/// follows every object and bookmark seen, so the next watch resumes where this one ended.
async fn follow(
    client: &Client,
    url: &str,
    kind: KindId,
    tx: &mpsc::Sender<WatchEvent>,
    version: &mut String,
    backoff: &mut Backoff,
) -> WatchEnd {
    let params = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
    let start = version.clone();
    // A watch that fails to start fails like one that breaks: as the stream's first item.
    let events = futures::stream::once(stream::watch(client, url, &params, &start)).try_flatten();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let (obj, delete) = match event {
            Ok(MetaEvent::Added(obj) | MetaEvent::Modified(obj)) => (obj, false),
            Ok(MetaEvent::Deleted(obj)) => (obj, true),
            Ok(MetaEvent::Bookmark(rv)) => {
                *version = rv;
                continue;
            }
            Ok(MetaEvent::Error(status)) => return WatchEnd::Ended(Some(kube::Error::Api(status))),
            Err(error) => return WatchEnd::Ended(Some(error)),
        };
        if let Some(rv) = obj.resource_version.as_ref() {
            version.clone_from(rv);
        }
        let Some(meta) = convert(kind, &obj, tx).await else {
            continue;
        };
        let msg = if delete {
            WatchEvent::Delete { kind, meta }
        } else {
            WatchEvent::Apply { kind, meta }
        };
        if tx.send(msg).await.is_err() {
            return WatchEnd::WriterGone;
        }
        backoff.reset();
    }
    WatchEnd::Ended(None)
}

/// The server's watch timeout; the client's own read timeout (295 s) is longer.
const WATCH_TIMEOUT_SECS: u32 = 290;

/// 410 Gone: the resourceVersion is older than what the server keeps; only a list helps.
fn is_expired(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 410)
}

/// client-go's watch backoff: 800 ms doubling to 30 s, with jitter, reset by progress.
#[derive(Default)]
struct Backoff {
    delays: Option<backon::ExponentialBackoff>,
}

impl Backoff {
    async fn wait(&mut self) {
        let delays = self.delays.get_or_insert_with(|| {
            backon::BackoffBuilder::build(
                backon::ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(800))
                    .with_max_delay(Duration::from_secs(30))
                    .with_jitter()
                    .without_max_times(),
            )
        });
        tokio::time::sleep(delays.next().unwrap_or(Duration::from_secs(30))).await;
    }

    fn reset(&mut self) {
        self.delays = None;
    }
}

/// The graph's form of `m`, and an [`WatchEvent::Invalid`] per owner reference it had to drop;
/// `None` (logged) when the object itself is unusable.
fn reduce(
    kind: KindId,
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (Option<MetaLite>, Vec<WatchEvent>) {
    match meta::lite(m) {
        Ok((lite, problems)) => {
            let invalid = problems
                .into_iter()
                .map(|error| WatchEvent::Invalid {
                    kind,
                    namespace: lite.namespace.clone(),
                    name: lite.name.clone(),
                    error,
                })
                .collect();
            (Some(lite), invalid)
        }
        Err(error) => {
            tracing::warn!(%error, "object ignored");
            (None, Vec::new())
        }
    }
}

async fn convert(
    kind: KindId,
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    tx: &mpsc::Sender<WatchEvent>,
) -> Option<MetaLite> {
    let (lite, invalid) = reduce(kind, m);
    for ev in invalid {
        let _ = tx.send(ev).await;
    }
    lite
}

/// [`convert`] for the list's decoder thread. `Err` when the writer is gone.
fn convert_blocking(
    kind: KindId,
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    tx: &mpsc::Sender<WatchEvent>,
) -> Result<Option<MetaLite>, ()> {
    let (lite, invalid) = reduce(kind, m);
    for ev in invalid {
        tx.blocking_send(ev).map_err(|_| ())?;
    }
    Ok(lite)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MockApi;
    use http::Method;
    use serde_json::json;

    fn configmap(name: &str, uid: &str, rv: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv}})
    }

    /// A watch whose version expired (410 Gone in the stream) lists again, at least as new as the
    /// last version it saw, and the resync that follows lets the graph forget what went meanwhile:
    /// the relist path, end to end, against a scripted API server.
    #[tokio::test]
    async fn an_expired_watch_relists_from_its_last_version_and_resyncs() {
        let (client, server) = MockApi::new();
        let path = "/api/v1/configmaps";
        let a = "00000000-0000-0000-0000-00000000000a";
        let b = "00000000-0000-0000-0000-00000000000b";
        server.expect(Method::GET, path).respond(
            200,
            json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "10"},
                   "items": [configmap("a", a, "9")]}),
        );
        // The watch's version has expired.
        server.expect(Method::GET, path).respond(
            200,
            json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
                   "status": "Failure", "reason": "Expired", "code": 410,
                   "message": "too old resource version: 10 (50)"}}),
        );
        // The relist: `a` is gone, `b` is new.
        server.expect(Method::GET, path).respond(
            200,
            json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "60"},
                   "items": [configmap("b", b, "55")]}),
        );
        // Then the next watch fails, and backs off: the test has what it needs by then.
        server
            .expect(Method::GET, path)
            .repeatedly()
            .respond_status(500, "Unavailable");
        let resource = DeletableResource {
            resource: kube::discovery::ApiResource {
                group: String::new(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
            },
            namespaced: true,
        };
        let (tx, mut rx) = mpsc::channel(16);
        let task = tokio::spawn(watch_resource(
            client,
            resource,
            7,
            tx,
            SyncState::new(),
            RefreshNow::default(),
            ListFrom::Any,
        ));
        let mut got = Vec::new();
        while got.len() < 4 {
            let ev = tokio::time::timeout(Duration::from_secs(5), rx.recv())
                .await
                .expect("events within 5 s")
                .expect("the watch runs");
            got.push(ev);
        }
        task.abort();
        let uid = |u: &str| crate::engine::graph::uid::Uid::parse_uuid(u).unwrap();
        assert!(matches!(&got[0], WatchEvent::Apply { kind: 7, meta } if meta.name == "a"));
        assert!(
            matches!(&got[1], WatchEvent::Resynced { kind: 7, seen } if seen.len() == 1 && seen.contains(&uid(a)))
        );
        assert!(matches!(&got[2], WatchEvent::Apply { kind: 7, meta } if meta.name == "b"));
        assert!(
            matches!(&got[3], WatchEvent::Resynced { kind: 7, seen } if seen.len() == 1 && seen.contains(&uid(b))),
            "the resync after the relist names only what exists now: {:?}",
            got[3]
        );
        let calls = server.calls();
        let q = |i: usize, k: &str| calls[i].query_param(k);
        assert_eq!(
            q(0, "resourceVersion").as_deref(),
            Some("0"),
            "first list: the cache"
        );
        assert_eq!(q(1, "watch").as_deref(), Some("true"));
        assert_eq!(q(1, "resourceVersion").as_deref(), Some("10"));
        assert_eq!(q(2, "watch"), None, "a list, not a watch");
        // A list at a non-zero version with no resourceVersionMatch is "not older than" it.
        assert_eq!(
            (
                q(2, "resourceVersion").as_deref(),
                q(2, "resourceVersionMatch").as_deref()
            ),
            (Some("10"), None),
            "the relist is at least as new as the last version seen"
        );
    }

    /// A list that answers 404 (the CRD went after discovery saw it) asks discovery to refresh,
    /// which drops the watch; a list failing otherwise (500) does not ask.
    #[tokio::test]
    async fn a_list_answering_not_found_asks_discovery_to_refresh() {
        for (code, asks) in [(404, true), (500, false)] {
            let (client, server) = MockApi::new();
            server
                .expect(Method::GET, "/api/v1/configmaps")
                .repeatedly()
                .respond_status(code, "no");
            let (tx, _rx) = mpsc::channel(16);
            let refresh = RefreshNow::default();
            let resource = DeletableResource {
                resource: kube::discovery::ApiResource::erase::<
                    k8s_openapi::api::core::v1::ConfigMap,
                >(&()),
                namespaced: true,
            };
            let task = tokio::spawn(watch_resource(
                client,
                resource,
                7,
                tx,
                SyncState::new(),
                refresh.clone(),
                ListFrom::Any,
            ));
            // The first list fails at once; the backoff's first wait is 800 ms or more.
            let asked = tokio::time::timeout(Duration::from_millis(600), refresh.0.notified())
                .await
                .is_ok();
            task.abort();
            assert_eq!(asked, asks, "a list answering {code}");
        }
    }

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
