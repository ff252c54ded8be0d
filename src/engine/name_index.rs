//! A name-ordered index of cluster-scoped objects, kept current by metadata-only watches.
//!
//! It answers "every object of this kind whose name starts with `<prefix>`" from memory, with no
//! list call: the tenant collector asks it for `<id>-…` and no longer needs a tenant label to find
//! a tenant's objects cheaply (KubeZoo labels none of them). Cluster-scoped objects are few next to
//! namespaced ones (hundreds to thousands), so an entry is a name, a uid and the finalizers.
//!
//! A kind whose watch has not listed yet, or keeps failing, answers [`NotIndexed`]: the caller
//! then lists that kind itself, so the index only ever makes a teardown cheaper, never less
//! complete. The set of watches follows discovery, like the cascade collector's. Each kind is
//! one streaming list where the server serves them ([`streaming`]: one request, not a list and a
//! watch), else kube's list-then-watch.
//!
//! Freshness: each kind records the highest resourceVersion its watch has delivered. A watch
//! delivers a kind's events in resourceVersion order, so a kind that has seen revision `R` holds
//! every change made to it up to `R`. [`NameIndex::fresh_prefix`] answers only for kinds that
//! have reached a given revision: that is how the tenant collector proves, without listing a kind,
//! that the index saw everything the kind held when a teardown began.
//!
//! An idle kind delivers no events, so its objects alone would never prove it current, and every
//! idle kind would be listed again at the end of every teardown (issue #52: 33 lists, 1.7 s of a
//! 20/s budget after a restart). The set's *epoch* proves it instead: a revision read with quorum
//! before the set's first watch starts. Every list a watch makes is a quorum read
//! (`ListSemantic::MostRecent`) sent after the epoch was read, so a kind that has finished any
//! list has delivered the epoch or a later revision, events or not.

mod streaming;

use crate::engine::discovery::DeletableResource;
use crate::engine::watch::resource_key;
use futures::StreamExt;
use kube::api::{DynamicObject, ObjectMeta, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, ListSemantic};
use kube::{Api, Client};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use tokio::task::JoinHandle;

/// One indexed object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedObject {
    pub uid: String,
    pub deleting: bool,
    pub finalizers: Vec<String>,
}

/// Why a kind cannot be answered from the index.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum NotIndexed {
    #[error("{0} is not watched (yet)")]
    NotWatched(String),
    #[error("{0} has not been listed yet")]
    Listing(String),
    #[error("the watch of {resource} is failing: {reason}")]
    Failing { resource: String, reason: String },
    #[error("the watch of {resource} has not reached revision {since} yet (at {seen:?})")]
    Behind {
        resource: String,
        since: u64,
        seen: Option<u64>,
    },
}

#[derive(Debug, Default)]
struct Kind {
    objects: BTreeMap<String, IndexedObject>,
    /// None while the first list is running; Some(None) once synced and healthy;
    /// Some(Some(reason)) while the watch fails (the last good view is kept meanwhile).
    synced: Option<Option<String>>,
    /// The highest resourceVersion delivered (None until one parses as etcd's revision number:
    /// such a kind is never called fresh, so it is listed).
    seen: Option<u64>,
}

impl Kind {
    fn saw(&mut self, m: &ObjectMeta) {
        if let Some(rv) = m.resource_version.as_deref().and_then(|v| v.parse().ok()) {
            self.seen = Some(self.seen.map_or(rv, |s: u64| s.max(rv)));
        }
    }
}

/// The shared index: cheap to clone, read by any task.
#[derive(Clone, Default)]
pub struct NameIndex {
    kinds: Arc<RwLock<HashMap<String, Kind>>>,
}

impl NameIndex {
    /// Every object of `r` whose name starts with `prefix` (all of them for `""`), by name.
    pub fn with_prefix(
        &self,
        r: &DeletableResource,
        prefix: &str,
    ) -> Result<Vec<(String, IndexedObject)>, NotIndexed> {
        self.answer(r, prefix, None)
    }

    /// Like [`Self::with_prefix`], but only from a kind whose watch has delivered revision
    /// `since` or later: the answer then includes everything the kind held at `since`.
    pub fn fresh_prefix(
        &self,
        r: &DeletableResource,
        prefix: &str,
        since: u64,
    ) -> Result<Vec<(String, IndexedObject)>, NotIndexed> {
        self.answer(r, prefix, Some(since))
    }

    /// Whether `r` is indexed, healthy and has delivered revision `since` (see `fresh_prefix`).
    pub fn is_fresh(&self, r: &DeletableResource, since: u64) -> bool {
        let key = resource_key(r);
        let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
        answerable(&kinds, key, Some(since)).is_ok()
    }

    /// The entry of `name` in `r`, if the kind is indexed and holds it.
    pub fn get(&self, r: &DeletableResource, name: &str) -> Option<IndexedObject> {
        let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
        kinds.get(&resource_key(r))?.objects.get(name).cloned()
    }

    fn answer(
        &self,
        r: &DeletableResource,
        prefix: &str,
        since: Option<u64>,
    ) -> Result<Vec<(String, IndexedObject)>, NotIndexed> {
        let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
        let kind = answerable(&kinds, resource_key(r), since)?;
        Ok(kind
            .objects
            .range(prefix.to_string()..)
            .take_while(|(name, _)| name.starts_with(prefix))
            .map(|(n, e)| (n.clone(), e.clone()))
            .collect())
    }

    /// Objects indexed, over every kind (for /status and the benchmark).
    pub fn len(&self) -> usize {
        let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
        kinds.values().map(|k| k.objects.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn update(&self, key: &str, f: impl FnOnce(&mut Kind)) {
        let mut kinds = self.kinds.write().unwrap_or_else(|p| p.into_inner());
        f(kinds.entry(key.to_string()).or_default());
    }

    // The four changes a watch makes, one for each thing it is told; both watch loops (kube's
    // list-then-watch below, the streaming one in streaming.rs) call these, so they keep one
    // meaning. Each object and its revision change under one lock: a reader that sees the
    // revision sees the change.

    /// A complete view of `key` as of `seen`: the kind is synced and healthy.
    fn replaced(&self, key: &str, objects: BTreeMap<String, IndexedObject>, seen: Option<u64>) {
        self.update(key, |k| {
            k.objects = objects;
            k.synced = Some(None);
            k.seen = seen;
        });
    }

    /// An object added or changed.
    fn applied(&self, key: &str, m: &ObjectMeta) {
        if let Some((name, e)) = entry(m) {
            self.update(key, |k| {
                k.objects.insert(name, e);
                k.saw(m);
            });
        }
    }

    /// An object deleted.
    fn removed(&self, key: &str, m: &ObjectMeta) {
        if let Some(name) = &m.name {
            self.update(key, |k| {
                k.objects.remove(name);
                k.saw(m);
            });
        }
    }

    /// The watch failed: a kind that was synced is not answered until it is again (its last
    /// view is kept meanwhile); one still listing stays listing.
    fn failing(&self, key: &str, reason: String) {
        self.update(key, |k| {
            if k.synced.is_some() {
                k.synced = Some(Some(reason));
            }
        });
    }

    fn forget(&self, key: &str) {
        self.kinds
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

/// etcd's current revision, read with quorum: a one-item list of namespaces (cheap at any size;
/// a list's resourceVersion is the store's revision at the read). None when the server's
/// resourceVersions are not numbers or the read fails: then nothing is called fresh.
pub async fn current_revision(client: &Client) -> Option<u64> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(client.clone());
    match api
        .list_metadata(&kube::api::ListParams::default().limit(1))
        .await
    {
        Ok(list) => list.metadata.resource_version?.parse().ok(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the store's revision; every kind will be listed");
            None
        }
    }
}

/// The kind under `key`, if the index may answer for it: watched, listed, its watch healthy, and
/// (with `since`) delivered up to that revision. The one rule behind every answer.
fn answerable(
    kinds: &HashMap<String, Kind>,
    key: String,
    since: Option<u64>,
) -> Result<&Kind, NotIndexed> {
    let Some(kind) = kinds.get(&key) else {
        return Err(NotIndexed::NotWatched(key));
    };
    match &kind.synced {
        None => return Err(NotIndexed::Listing(key)),
        Some(Some(reason)) => {
            return Err(NotIndexed::Failing {
                resource: key,
                reason: reason.clone(),
            });
        }
        Some(None) => {}
    }
    if let Some(since) = since
        && kind.seen.is_none_or(|seen| seen < since)
    {
        return Err(NotIndexed::Behind {
            resource: key,
            since,
            seen: kind.seen,
        });
    }
    Ok(kind)
}

/// The revision a finished list proves its kind has delivered: its newest object's, or the
/// watches' epoch when that is later (an idle kind's objects are all older than the epoch, yet the
/// list, sent after the epoch was read, holds the kind as of a newer revision).
fn listed_revision(newest_object: Option<u64>, epoch: Option<u64>) -> Option<u64> {
    newest_object.max(epoch)
}

fn entry(m: &ObjectMeta) -> Option<(String, IndexedObject)> {
    Some((
        m.name.clone()?,
        IndexedObject {
            uid: m.uid.clone().unwrap_or_default(),
            deleting: m.deletion_timestamp.is_some(),
            finalizers: m.finalizers.clone().unwrap_or_default(),
        },
    ))
}

/// The watches feeding a [`NameIndex`]: one per cluster-scoped deletable resource.
pub struct IndexWatches {
    client: Client,
    index: NameIndex,
    running: HashMap<String, JoinHandle<()>>,
    /// Read by the first watch, before any watch sends a request (module docs).
    setup: Arc<tokio::sync::OnceCell<Setup>>,
}

/// What every watch of a set needs before its first request.
#[derive(Clone, Copy, Debug)]
struct Setup {
    /// A quorum revision: every list the set's watches make is newer.
    epoch: Option<u64>,
    /// Whether the server's version serves streaming lists (one request a kind, not two).
    streaming: bool,
}

impl Setup {
    /// Two requests, once per set.
    async fn read(client: &Client) -> Self {
        let epoch = current_revision(client).await;
        let streaming = match client.apiserver_version().await {
            Ok(v) => streaming::serves_streaming_lists(&v.major, &v.minor),
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the server's version; the index lists, then watches");
                false
            }
        };
        Setup { epoch, streaming }
    }
}

impl IndexWatches {
    /// No request yet: the first watch reads the set's [`Setup`]. The kinds a reconcile starts
    /// show as listing at once, so a pass that asks meanwhile waits for them rather than listing
    /// them itself (first_lists).
    pub fn new(client: Client, index: NameIndex) -> Self {
        IndexWatches {
            client,
            index,
            running: HashMap::new(),
            setup: Arc::default(),
        }
    }

    /// Starts watches for newly discovered cluster-scoped resources and stops (and forgets) those
    /// no longer served.
    pub fn reconcile(&mut self, resources: &[DeletableResource]) {
        let wanted: HashMap<String, &DeletableResource> = resources
            .iter()
            .filter(|r| !r.namespaced)
            .map(|r| (resource_key(r), r))
            .collect();
        self.running.retain(|key, task| {
            let keep = wanted.contains_key(key);
            if !keep {
                task.abort();
                self.index.forget(key);
            }
            keep
        });
        for (key, r) in wanted {
            if self.running.contains_key(&key) {
                continue;
            }
            self.index.update(&key, |_| {});
            let task = watch(
                self.client.clone(),
                r.clone(),
                key.clone(),
                self.index.clone(),
                self.setup.clone(),
            );
            let span = tracing::info_span!("index_watch", resource = %key);
            self.running.insert(
                key,
                tokio::spawn(tracing::Instrument::instrument(task, span)),
            );
        }
    }
}

impl Drop for IndexWatches {
    fn drop(&mut self) {
        self.running.values().for_each(|t| t.abort());
    }
}

async fn watch(
    client: Client,
    r: DeletableResource,
    key: String,
    index: NameIndex,
    setup: Arc<tokio::sync::OnceCell<Setup>>,
) {
    let Setup { epoch, streaming } = *setup.get_or_init(|| Setup::read(&client)).await;
    if streaming {
        let refused =
            streaming::run(Api::all_with(client.clone(), &r.resource), &key, &index).await;
        tracing::info!(error = %refused, "the index lists, then watches this kind");
    }
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &r.resource);
    // MostRecent: a quorum list, newer than the epoch (module docs). kube's default, said here
    // because the freshness proof rests on it.
    let config = watcher::Config::default()
        .page_size(500)
        .list_semantic(ListSemantic::MostRecent);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    // A relist builds a fresh view beside the current one, which keeps answering until the new
    // one is complete.
    let mut relist: BTreeMap<String, IndexedObject> = BTreeMap::new();
    // A relist's revision is not exposed by the watcher: its newest object's stands in for it
    // (lower or equal, so freshness is never overstated).
    let mut relist_seen = Kind::default();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => {
                relist.clear();
                relist_seen = Kind::default();
            }
            Ok(Event::InitApply(o)) => {
                relist_seen.saw(&o.metadata);
                relist.extend(entry(&o.metadata));
            }
            Ok(Event::InitDone) => {
                let fresh = std::mem::take(&mut relist);
                index.replaced(&key, fresh, listed_revision(relist_seen.seen, epoch));
            }
            Ok(Event::Apply(o)) => index.applied(&key, &o.metadata),
            Ok(Event::Delete(o)) => index.removed(&key, &o.metadata),
            Err(e) => {
                tracing::debug!(error = %e, "index watch failed; retrying with backoff");
                index.failing(&key, e.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::discovery::ApiResource;

    fn roles() -> DeletableResource {
        DeletableResource {
            resource: ApiResource {
                group: "rbac.authorization.k8s.io".into(),
                version: "v1".into(),
                api_version: "rbac.authorization.k8s.io/v1".into(),
                kind: "ClusterRole".into(),
                plural: "clusterroles".into(),
            },
            namespaced: false,
        }
    }

    fn e(uid: &str) -> IndexedObject {
        IndexedObject {
            uid: uid.into(),
            deleting: false,
            finalizers: vec![],
        }
    }

    #[test]
    fn prefix_queries_answer_from_memory_only_once_listed() {
        let index = NameIndex::default();
        let r = roles();
        assert!(matches!(
            index.with_prefix(&r, "abc123-"),
            Err(NotIndexed::NotWatched(_))
        ));
        index.update(&resource_key(&r), |_| {});
        assert!(matches!(
            index.with_prefix(&r, "abc123-"),
            Err(NotIndexed::Listing(_))
        ));
        index.update(&resource_key(&r), |k| {
            for n in [
                "abc12-x",
                "abc123-a",
                "abc123-b",
                "abc123x-c",
                "abc124-d",
                "system-abc123-e",
            ] {
                k.objects.insert(n.into(), e(n));
            }
            k.synced = Some(None);
        });
        let names: Vec<String> = index
            .with_prefix(&r, "abc123-")
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, vec!["abc123-a", "abc123-b"]);
        assert_eq!(index.with_prefix(&r, "").unwrap().len(), 6);
    }

    fn at(name: &str, rv: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_kind_is_fresh_only_once_its_watch_has_reached_the_revision() {
        let index = NameIndex::default();
        let r = roles();
        index.update(&resource_key(&r), |k| {
            k.objects.insert("abc123-a".into(), e("u"));
            k.synced = Some(None);
            k.saw(&at("abc123-a", "100"));
            k.saw(&at("zz", "90")); // older events never lower it
        });
        assert_eq!(index.fresh_prefix(&r, "abc123-", 100).unwrap().len(), 1);
        assert!(index.is_fresh(&r, 100) && !index.is_fresh(&r, 101));
        assert!(matches!(
            index.fresh_prefix(&r, "abc123-", 101),
            Err(NotIndexed::Behind {
                since: 101,
                seen: Some(100),
                ..
            })
        ));
        // An unparsable resourceVersion proves nothing: the kind stays where it was.
        index.update(&resource_key(&r), |k| k.saw(&at("x", "opaque-42")));
        assert!(index.fresh_prefix(&r, "abc123-", 101).is_err());
        assert_eq!(index.get(&r, "abc123-a"), Some(e("u")));
        // A kind that never saw a parsable revision is never fresh.
        let other = NameIndex::default();
        other.update(&resource_key(&r), |k| k.synced = Some(None));
        assert!(matches!(
            other.fresh_prefix(&r, "", 1),
            Err(NotIndexed::Behind { seen: None, .. })
        ));
    }

    #[test]
    fn a_finished_list_proves_the_later_of_its_newest_object_and_the_epoch() {
        // (newest object's revision, epoch) -> what the kind has delivered
        let table = [
            (Some(100), Some(250), Some(250)), // an idle kind: the epoch proves more
            (Some(300), Some(250), Some(300)), // a busy kind: its own events do
            (None, Some(250), Some(250)),      // an empty kind is current as of the epoch
            (Some(100), None, Some(100)),      // no epoch (unreadable): objects only
            (None, None, None),                // nothing proves anything: listed
        ];
        for (newest, epoch, want) in table {
            assert_eq!(listed_revision(newest, epoch), want, "{newest:?} {epoch:?}");
        }
    }

    #[test]
    fn a_failing_watch_is_not_answered_from_a_stale_view() {
        let index = NameIndex::default();
        let r = roles();
        index.update(&resource_key(&r), |k| {
            k.objects.insert("abc123-a".into(), e("u"));
            k.synced = Some(Some("403 forbidden".into()));
        });
        assert!(matches!(
            index.with_prefix(&r, "abc123-"),
            Err(NotIndexed::Failing { .. })
        ));
        index.forget(&resource_key(&r));
        assert!(index.is_empty());
    }
}
