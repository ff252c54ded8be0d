//! Writing, settling, reconciling and expiring records.
//!
//! Reads are batched: the objects of one batch that share a resource and namespace are read with
//! one paginated list when that costs fewer calls than a GET each (the first page's
//! `remainingItemCount` tells), and what a list returned beyond the batch is kept briefly
//! ([`Cache`]) for the next batch of the same cascade, so a 1,000-dependent cascade costs a couple
//! of list pages, not 1,000 GETs. One record holds a batch's objects of one namespace (up to
//! [`RECORD_BYTES`]): one create per batch instead of one per object.

use super::record_kind::{self, RecordKind};
use super::{
    ANNOTATION_EXPIRES, COMPLETE, Entry, LABEL_ARCHIVE, LABEL_COLLECTOR, LABEL_STATE, LABEL_TENANT,
    LABEL_WRITER, PENDING, RECORD_BYTES, Reason, Settings, strip,
};
use crate::engine::events::Publisher;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams,
    PostParams,
};
use kube::runtime::events::EventType;
use kube::{Client, ResourceExt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const PAGE: u32 = 500;

/// Something to archive before it is deleted.
#[derive(Clone, Debug)]
pub struct Item {
    pub resource: ApiResource,
    pub namespaced: bool,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    /// The resourceVersion the decision to delete was made on (cascade): the archived copy must
    /// be exactly that version, and the DELETE carries it as precondition. None: whatever is read.
    pub expect_rv: Option<String>,
    pub reason: Reason,
    /// Already read (a tenant CRD's custom resources, from their list).
    pub object: Option<Value>,
    /// Keep the record in sweeper's namespace whatever the object's (tenant teardowns).
    pub in_sweeper_namespace: bool,
}

impl Item {
    fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.resource.api_version.clone()),
            kind: Some(self.resource.kind.clone()),
            namespace: self.namespace.clone(),
            name: Some(self.name.clone()),
            uid: Some(self.uid.clone()),
            ..Default::default()
        }
    }

    fn is_secret(&self) -> bool {
        self.resource.group.is_empty() && self.resource.kind == "Secret"
    }
}

/// What became of one item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prepared {
    /// Archived in a pending record: delete it (with `resource_version` as precondition), then
    /// [`Archiver::settle`] the ticket.
    Recorded(Ticket),
    /// Delete it without a record: not selected by `--archive`, or over the size cap (an Event
    /// said so).
    Unrecorded,
    /// Not as the decision saw it (changed since, or gone): do not delete now; look again.
    Changed,
    /// The archive could not be read or written: do not delete now; retry. `paused`: the
    /// collector's pause refused the record's write (not a failure: wait for resume).
    Failed { message: String, paused: bool },
}

impl Prepared {
    fn failed(message: impl Into<String>) -> Self {
        Prepared::Failed {
            message: message.into(),
            paused: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordRef {
    pub namespace: String,
    pub name: String,
    pub kind: RecordKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub record: RecordRef,
    pub uid: String,
    /// The archived resourceVersion.
    pub resource_version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ArchiveLabels {
    pub collector: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SkipLabels {
    pub collector: String,
    /// `not_selected` or `too_large`.
    pub reason: String,
}

/// `sweeper_archive_*`.
#[derive(Clone, Default)]
pub struct ArchiveMetrics {
    pub objects: Family<ArchiveLabels, Counter>,
    pub records: Family<ArchiveLabels, Counter>,
    pub calls: Family<ArchiveLabels, Counter>,
    pub skipped: Family<SkipLabels, Counter>,
    pub false_entries_removed: Family<ArchiveLabels, Counter>,
    pub expired: Counter,
    /// Records (archive and audit) stored cluster-wide after the last expiry pass.
    pub stored: Gauge,
    pub gc_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
}

impl ArchiveMetrics {
    pub fn register(&self, r: &mut prometheus_client::registry::Registry) {
        r.register(
            "archive_objects",
            "Objects archived before their delete, by collector",
            self.objects.clone(),
        );
        r.register(
            "archive_records",
            "Archive records written, by collector",
            self.records.clone(),
        );
        r.register(
            "archive_api_calls",
            "API calls the archive made (reads, record writes, settles), by collector",
            self.calls.clone(),
        );
        r.register(
            "archive_skipped",
            "Deleted objects not archived, by collector and reason (not_selected, too_large)",
            self.skipped.clone(),
        );
        r.register(
            "archive_false_entries_removed",
            "Entries removed because their DELETE did not delete (precondition failed, already gone)",
            self.false_entries_removed.clone(),
        );
        r.register(
            "archive_records_expired",
            "Archive records deleted after --archive-ttl",
            self.expired.clone(),
        );
        r.register(
            "archive_stored_records",
            "Archive and audit records stored cluster-wide, counted by the last expiry pass",
            self.stored.clone(),
        );
        r.register(
            "archive_gc_seconds",
            "How long the last expiry pass over the archive took",
            self.gc_seconds.clone(),
        );
    }
}

/// Objects a list returned beyond its batch, for the next batch: `uid -> (rv, object)`. Entries
/// live [`CACHE_TTL`] and are used once; at most [`CACHE_CAP`] are kept.
#[derive(Default)]
struct Cache {
    objects: HashMap<String, (String, Value, Instant)>,
}

const CACHE_TTL: Duration = Duration::from_secs(30);
/// A few MiB at typical object sizes: enough for the next batches of a large cascade, bounded
/// so the archive never holds a namespace's worth of objects.
const CACHE_CAP: usize = 4_000;

impl Cache {
    fn take(&mut self, uid: &str, rv: &str) -> Option<Value> {
        let (cached_rv, _, at) = self.objects.get(uid)?;
        if cached_rv != rv || at.elapsed() > CACHE_TTL {
            self.objects.remove(uid);
            return None;
        }
        self.objects.remove(uid).map(|(_, v, _)| v)
    }

    fn put(&mut self, uid: String, rv: String, v: Value) {
        if self.objects.len() >= CACHE_CAP {
            self.objects
                .retain(|_, (_, _, at)| at.elapsed() <= CACHE_TTL);
            if self.objects.len() >= CACHE_CAP {
                return;
            }
        }
        self.objects.insert(uid, (rv, v, Instant::now()));
    }
}

/// Per record: how many tickets are still to be settled, and the uids whose DELETE did not delete.
#[derive(Default)]
struct Open {
    outstanding: usize,
    remove: Vec<String>,
}

/// One collector's archive writer.
pub struct Archiver {
    client: Client,
    pub settings: Settings,
    collector: &'static str,
    metrics: ArchiveMetrics,
    events: Publisher,
    cache: Mutex<Cache>,
    open: Mutex<HashMap<RecordRef, Open>>,
    /// Settles that failed (e.g. refused while paused), retried before the next batch.
    unsettled: Mutex<Vec<(RecordRef, Vec<String>)>>,
    /// This process's writer id (see [`LABEL_WRITER`]).
    writer: String,
}

impl std::fmt::Debug for Archiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archiver")
            .field("collector", &self.collector)
            .field("settings", &self.settings)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("archive record {namespace}/{name}: {source}")]
    Record {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("listing archive records: {0}")]
    List(#[source] kube::Error),
}

impl ArchiveError {
    /// Whether the namespace refused the record (being deleted, or over quota).
    fn refused_by_namespace(&self) -> bool {
        matches!(self, ArchiveError::Record { source: kube::Error::Api(s), .. } if s.code == 403 || s.code == 422)
            && !self.paused()
    }

    /// Whether the collector's pause refused the write (see engine::pause).
    pub fn paused(&self) -> bool {
        let (ArchiveError::Record { source, .. } | ArchiveError::List(source)) = self;
        matches!(
            crate::engine::client::refusal(source),
            Some(crate::engine::leader::Refusal::Paused(_))
        )
    }
}

impl Archiver {
    pub fn new(
        client: Client,
        settings: Settings,
        collector: &'static str,
        metrics: ArchiveMetrics,
    ) -> Self {
        Archiver {
            events: Publisher::new(client.clone(), &format!("sweeper-{collector}"), "Archive"),
            client,
            settings,
            collector,
            metrics,
            cache: Mutex::new(Cache::default()),
            open: Mutex::new(HashMap::new()),
            unsettled: Mutex::new(Vec::new()),
            writer: format!("{:04x}{:04x}", rand_u16(), std::process::id() & 0xffff),
        }
    }

    fn labels(&self) -> ArchiveLabels {
        ArchiveLabels {
            collector: self.collector.into(),
        }
    }

    fn call(&self) {
        self.metrics.calls.get_or_create(&self.labels()).inc();
    }

    /// Reads the items that were not read yet, writes pending records for those to archive, and
    /// says per item (same order) what to do.
    pub async fn record(&self, items: Vec<Item>) -> Vec<Prepared> {
        if !self.settings.mode.is_on() {
            return items.iter().map(|_| Prepared::Unrecorded).collect();
        }
        self.retry_unsettled().await;
        let objects = self.read(&items).await;
        let mut out: Vec<Option<Prepared>> = vec![None; items.len()];
        // (namespace, secret) -> [(item index, entry json)]
        let mut groups: BTreeMap<(String, RecordKind), Vec<(usize, String)>> = BTreeMap::new();
        // The resourceVersion archived for each item (its ticket's DELETE precondition).
        let mut archived_rv: Vec<String> = vec![String::new(); items.len()];
        let now = Timestamp::now().to_string();
        for (i, (item, read)) in items.iter().zip(objects).enumerate() {
            let object = match read {
                Err(e) => {
                    out[i] = Some(Prepared::failed(e));
                    continue;
                }
                Ok(None) => {
                    out[i] = Some(Prepared::Changed);
                    continue;
                }
                Ok(Some(o)) => o,
            };
            let uid = object["metadata"]["uid"].as_str().unwrap_or_default();
            let rv = object["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if uid != item.uid || item.expect_rv.as_ref().is_some_and(|e| *e != rv) {
                out[i] = Some(Prepared::Changed);
                continue;
            }
            let labels: BTreeMap<String, String> =
                serde_json::from_value(object["metadata"]["labels"].clone()).unwrap_or_default();
            if !self.settings.mode.selects(&labels) {
                self.skip("not_selected");
                out[i] = Some(Prepared::Unrecorded);
                continue;
            }
            archived_rv[i] = rv.clone();
            let entry = Entry {
                api_version: item.resource.api_version.clone(),
                kind: item.resource.kind.clone(),
                namespace: item.namespace.clone(),
                name: item.name.clone(),
                uid: item.uid.clone(),
                resource_version: rv,
                deleted_by: format!("sweeper-{}", self.collector),
                reason: item.reason.clone(),
                archived_at: now.clone(),
                object: strip(object),
            };
            let json = serde_json::to_string(&entry).unwrap_or_default();
            if json.len() > self.settings.max_object_bytes {
                self.skip("too_large");
                let note = format!(
                    "not archived: {} bytes is over the archive's cap of {} bytes (--archive-max-object-bytes); deleted without a record",
                    json.len(),
                    self.settings.max_object_bytes
                );
                tracing::warn!(object = %entry.label(), "{note}");
                self.events
                    .emit(&item.reference(), EventType::Warning, "NotArchived", note)
                    .await;
                out[i] = Some(Prepared::Unrecorded);
                continue;
            }
            let namespace = match (&item.namespace, item.in_sweeper_namespace) {
                (Some(ns), false) => ns.clone(),
                _ => self.settings.namespace.clone(),
            };
            groups
                .entry((namespace, RecordKind::of(item.is_secret())))
                .or_default()
                .push((i, json));
        }
        for ((namespace, kind), entries) in groups {
            for chunk in chunks(entries) {
                let tenant = chunk
                    .first()
                    .and_then(|(i, _)| items[*i].reason.tenant.clone());
                let data: BTreeMap<String, String> = chunk
                    .iter()
                    .map(|(i, json)| (Entry::key(&items[*i].uid), json.clone()))
                    .collect();
                let mut written = self
                    .create(&namespace, kind, tenant.clone(), data.clone())
                    .await;
                // A namespace being deleted (403) or out of quota (403/422) takes no record; the
                // object must still go (a foreground owner there would hold its namespace open):
                // its record goes to sweeper's namespace.
                if let Err(e) = &written
                    && e.refused_by_namespace()
                    && namespace != self.settings.namespace
                {
                    tracing::info!(namespace = %namespace, error = %e, "record refused in the object's namespace; writing it in sweeper's");
                    written = self
                        .create(&self.settings.namespace, kind, tenant, data)
                        .await;
                }
                match written {
                    Ok(record) => {
                        self.metrics.records.get_or_create(&self.labels()).inc();
                        self.metrics
                            .objects
                            .get_or_create(&self.labels())
                            .inc_by(chunk.len() as u64);
                        self.open
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .entry(record.clone())
                            .or_default()
                            .outstanding += chunk.len();
                        for (i, _) in &chunk {
                            out[*i] = Some(Prepared::Recorded(Ticket {
                                record: record.clone(),
                                uid: items[*i].uid.clone(),
                                resource_version: std::mem::take(&mut archived_rv[*i]),
                            }));
                        }
                    }
                    Err(e) => {
                        let paused = e.paused();
                        if !paused {
                            tracing::warn!(error = %e, "cannot write an archive record; the objects are not deleted now");
                        }
                        for (i, _) in &chunk {
                            out[*i] = Some(Prepared::Failed {
                                message: e.to_string(),
                                paused,
                            });
                        }
                    }
                }
            }
        }
        out.into_iter()
            .map(|p| p.unwrap_or_else(|| Prepared::failed("not handled")))
            .collect()
    }

    fn skip(&self, reason: &str) {
        self.metrics
            .skipped
            .get_or_create(&SkipLabels {
                collector: self.collector.into(),
                reason: reason.into(),
            })
            .inc();
    }

    /// The one way to act on recorded objects: runs `act` (the DELETE, or the finalizer release,
    /// that `tickets`' entries were written for), then settles every ticket by whether it took
    /// effect, so an entry stays only for an object that went. `took_effect` decides from the
    /// result; when the answer was lost it asks the API server, and when even that fails it
    /// must say true (a record is never lost for an object that may be gone).
    pub async fn guarded<T, E>(
        archive: Option<&Archiver>,
        tickets: &[Ticket],
        act: impl Future<Output = Result<T, E>>,
        took_effect: impl AsyncFnOnce(&Result<T, E>) -> bool,
    ) -> Result<T, E> {
        let result = act.await;
        if let Some(archive) = archive
            && !tickets.is_empty()
        {
            let done = took_effect(&result).await;
            for t in tickets {
                archive.settle(t, done).await;
            }
        }
        result
    }

    /// Reports a recorded item's DELETE: `deleted` false (precondition failed, already gone,
    /// error) removes its entry. When every entry of the record is reported, the record is
    /// settled in one write (complete, false entries removed; deleted if none is left).
    pub async fn settle(&self, ticket: &Ticket, deleted: bool) {
        let ready = {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            let Some(o) = open.get_mut(&ticket.record) else {
                return;
            };
            if !deleted {
                o.remove.push(ticket.uid.clone());
            }
            o.outstanding = o.outstanding.saturating_sub(1);
            if o.outstanding == 0 {
                open.remove(&ticket.record)
            } else {
                None
            }
        };
        if let Some(o) = ready
            && let Err(e) = self.finish(&ticket.record, &o.remove).await
        {
            // Retried before the next batch; failing that, the next start settles it.
            if !e.paused() {
                tracing::warn!(error = %e, "cannot settle an archive record; retrying before the next batch");
            }
            self.unsettled
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((ticket.record.clone(), o.remove));
        }
    }

    /// Retries the failed settles every `every` until `shutdown`.
    pub async fn settle_loop(
        self: std::sync::Arc<Self>,
        every: Duration,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            self.retry_unsettled().await;
        }
    }

    async fn retry_unsettled(&self) {
        let todo = std::mem::take(&mut *self.unsettled.lock().unwrap_or_else(|p| p.into_inner()));
        for (record, remove) in todo {
            if self.finish(&record, &remove).await.is_err() {
                self.unsettled
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((record, remove));
            }
        }
    }

    /// Marks `record` complete without the entries of `remove`; deletes it when none is left.
    async fn finish(&self, record: &RecordRef, remove: &[String]) -> Result<(), ArchiveError> {
        let err = |source| ArchiveError::Record {
            namespace: record.namespace.clone(),
            name: record.name.clone(),
            source,
        };
        if !remove.is_empty() {
            self.metrics
                .false_entries_removed
                .get_or_create(&self.labels())
                .inc_by(remove.len() as u64);
        }
        let data: BTreeMap<String, Option<String>> =
            remove.iter().map(|u| (Entry::key(u), None)).collect();
        let patch = serde_json::json!({
            "metadata": {"labels": {LABEL_STATE: COMPLETE}},
            "data": data,
        });
        self.call();
        let left = record
            .kind
            .api(&self.client, Some(&record.namespace))
            .patch(&record.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|o| RecordKind::keys(&o).len());
        let left = match left {
            Ok(n) => n,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(err(e)),
        };
        if left == 0 {
            self.delete_record(record).await.map_err(err)?;
        }
        Ok(())
    }

    /// Deletes every record of `namespace` in the ended expiry `bucket` in one call.
    async fn delete_bucket(
        &self,
        namespace: &str,
        kind: RecordKind,
        bucket: &str,
    ) -> Result<(), kube::Error> {
        self.call();
        let lp = ListParams::default().labels(&format!(
            "{LABEL_ARCHIVE}=true,{}={bucket}",
            super::LABEL_EXPIRY_BUCKET
        ));
        kind.api(&self.client, Some(namespace))
            .delete_collection(&DeleteParams::default(), &lp)
            .await
            .map(|_| ())
    }

    async fn delete_record(&self, record: &RecordRef) -> Result<(), kube::Error> {
        self.call();
        let r = record
            .kind
            .api(&self.client, Some(&record.namespace))
            .delete(&record.name, &DeleteParams::default())
            .await
            .map(|_| ());
        match r {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            other => other,
        }
    }

    async fn create(
        &self,
        namespace: &str,
        kind: RecordKind,
        tenant: Option<String>,
        data: BTreeMap<String, String>,
    ) -> Result<RecordRef, ArchiveError> {
        let name = format!(
            "sweeper-archive-{}-{}-{:04x}",
            self.collector,
            Timestamp::now().as_millisecond(),
            rand_u16()
        );
        let mut labels = BTreeMap::from([
            (LABEL_ARCHIVE.to_string(), "true".to_string()),
            (LABEL_STATE.to_string(), PENDING.to_string()),
            (LABEL_COLLECTOR.to_string(), self.collector.to_string()),
            (LABEL_WRITER.to_string(), self.writer.clone()),
        ]);
        if let Some(t) = tenant {
            labels.insert(LABEL_TENANT.into(), t);
        }
        let expires = super::expires_after(Timestamp::now(), self.settings.ttl);
        labels.insert(
            super::LABEL_EXPIRY_BUCKET.into(),
            super::expiry_bucket(expires, self.settings.ttl),
        );
        let metadata = ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                ANNOTATION_EXPIRES.to_string(),
                expires.to_string(),
            )])),
            ..Default::default()
        };
        let err = |source| ArchiveError::Record {
            namespace: namespace.into(),
            name: name.clone(),
            source,
        };
        self.call();
        kind.api(&self.client, Some(namespace))
            .create(&PostParams::default(), &kind.object(metadata, data))
            .await
            .map_err(err)?;
        Ok(RecordRef {
            namespace: namespace.into(),
            name,
            kind,
        })
    }

    /// The full objects of `items` (None: not found), reading what is not given or cached.
    async fn read(&self, items: &[Item]) -> Vec<Result<Option<Value>, String>> {
        let mut out: Vec<Option<Result<Option<Value>, String>>> = vec![None; items.len()];
        // (api resource key, namespace) -> indexes still to read
        let mut groups: BTreeMap<(String, Option<String>), Vec<usize>> = BTreeMap::new();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            for (i, item) in items.iter().enumerate() {
                if let Some(o) = &item.object {
                    out[i] = Some(Ok(Some(o.clone())));
                } else if let Some(o) = item
                    .expect_rv
                    .as_deref()
                    .and_then(|rv| cache.take(&item.uid, rv))
                {
                    out[i] = Some(Ok(Some(o)));
                } else {
                    let key = format!("{}/{}", item.resource.api_version, item.resource.plural);
                    let ns = item.namespace.clone().filter(|_| item.namespaced);
                    groups.entry((key, ns)).or_default().push(i);
                }
            }
        }
        for ((_, ns), idx) in groups {
            let first = &items[idx[0]];
            let api: Api<DynamicObject> = match &ns {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &first.resource),
                None => Api::all_with(self.client.clone(), &first.resource),
            };
            let results = self.read_group(&api, items, &idx).await;
            for (i, r) in idx.into_iter().zip(results) {
                out[i] = Some(r);
            }
        }
        out.into_iter().map(|o| o.unwrap_or(Ok(None))).collect()
    }

    /// Reads the `idx` items of one resource and namespace: a GET each, or a list when its pages
    /// cost fewer calls than the GETs left.
    async fn read_group(
        &self,
        api: &Api<DynamicObject>,
        items: &[Item],
        idx: &[usize],
    ) -> Vec<Result<Option<Value>, String>> {
        let mut found: HashMap<String, Value> = HashMap::new();
        let wanted: HashMap<&str, usize> =
            idx.iter().map(|i| (items[*i].uid.as_str(), *i)).collect();
        if idx.len() > 1 {
            let mut lp = ListParams::default().limit(PAGE);
            loop {
                self.call();
                let page = match api.list(&lp).await {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::debug!(error = %e, "archive list failed; reading one by one");
                        break;
                    }
                };
                let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
                let remaining = page.metadata.remaining_item_count;
                {
                    let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                    for o in page.items {
                        let uid = o.uid().unwrap_or_default();
                        let v = serde_json::to_value(&o).unwrap_or(Value::Null);
                        if wanted.contains_key(uid.as_str()) {
                            found.insert(uid, v);
                        } else {
                            let rv = o.resource_version().unwrap_or_default();
                            cache.put(uid, rv, v);
                        }
                    }
                }
                let missing = wanted.len() - found.len();
                let Some(token) = next else { break };
                if missing == 0 {
                    break;
                }
                // Go on only while the pages left cost no more than a GET per missing object.
                let pages_left = remaining
                    .map(|r| (r.max(0) as u64).div_ceil(u64::from(PAGE)))
                    .unwrap_or(u64::MAX);
                if pages_left > missing as u64 {
                    break;
                }
                lp = lp.continue_token(&token);
            }
        }
        let mut out = Vec::with_capacity(idx.len());
        for i in idx {
            let item = &items[*i];
            if let Some(v) = found.remove(&item.uid) {
                out.push(Ok(Some(v)));
                continue;
            }
            self.call();
            match api.get_opt(&item.name).await {
                Ok(Some(o)) => out.push(Ok(Some(serde_json::to_value(&o).unwrap_or(Value::Null)))),
                Ok(None) => out.push(Ok(None)),
                Err(e) => out.push(Err(format!(
                    "cannot read {} {} to archive it: {e}",
                    item.resource.kind, item.name
                ))),
            }
        }
        out
    }

    /// Settles the records other processes left pending (they stopped between a record and its
    /// deletes): an entry whose object still exists (and is not being deleted) is removed, one
    /// whose object is gone stays; a record whose objects cannot be checked stays pending. This
    /// process's own records are not touched, so it may run while the collector works.
    pub async fn reconcile_pending(&self) -> Result<usize, ArchiveError> {
        let selector = format!(
            "{LABEL_ARCHIVE}=true,{LABEL_STATE}={PENDING},{LABEL_COLLECTOR}={},{LABEL_WRITER}!={}",
            self.collector, self.writer
        );
        let lp = ListParams::default().labels(&selector);
        let mut records: Vec<(RecordRef, Vec<Entry>)> = Vec::new();
        for kind in record_kind::BOTH {
            self.call();
            let list = kind
                .api(&self.client, None)
                .list(&lp)
                .await
                .map_err(ArchiveError::List)?;
            records.extend(
                list.items
                    .iter()
                    .map(|o| (record_ref(&o.metadata, kind), kind.entries(o))),
            );
        }
        let mut resolver = Resolver::default();
        // Each CRD asked about once per pass: a tenant CRD's custom resources share it.
        let mut crds_going: HashMap<String, bool> = HashMap::new();
        let mut settled = 0;
        'records: for (record, entries) in records {
            let at = format!("{}/{}", record.namespace, record.name);
            let mut remove = Vec::new();
            let mut gone = Vec::new();
            for e in &entries {
                // A custom resource archived with its CRD went (or is going) with it once the
                // CRD's DELETE took effect, even while it still shows, not yet reached by the
                // API server's cleanup: its entry is true.
                let with_crd = match &e.reason.with_crd {
                    Some(crd) => match crds_going.get(crd) {
                        Some(&going) => Ok(going),
                        None => crd_going(&self.client, crd).await.inspect(|&going| {
                            crds_going.insert(crd.clone(), going);
                        }),
                    },
                    None => Ok(false),
                };
                let exists = match with_crd {
                    Ok(true) => Ok(false),
                    Ok(false) => resolver.exists(&self.client, e).await,
                    Err(err) => Err(err),
                };
                match exists {
                    Ok(true) => remove.push(e.uid.clone()),
                    Ok(false) => gone.push(e.uid.clone()),
                    // Cannot tell: the record stays pending for the next start to settle.
                    Err(err) => {
                        tracing::warn!(record = %at, object = %e.label(), error = %err, "cannot tell whether an archived object still exists; its record stays pending");
                        continue 'records;
                    }
                }
            }
            // A gone object that another record also holds was archived again and deleted by a
            // running process (which writes its record before its DELETE): that record is the
            // one that stays. Read only now, after the objects were seen gone, so such a record
            // is already there.
            if !gone.is_empty() {
                match self.uids_in_records(&record.namespace, record.kind).await {
                    Ok(others) => remove.extend(gone.into_iter().filter(|uid| {
                        others
                            .iter()
                            .any(|(name, u)| u == uid && *name != record.name)
                    })),
                    Err(e) => {
                        tracing::warn!(record = %at, error = %e, "cannot read the other archive records; this one stays pending");
                        continue 'records;
                    }
                }
            }
            match self.finish(&record, &remove).await {
                Ok(()) => {
                    settled += 1;
                    tracing::info!(record = %at, entries = entries.len(), removed = remove.len(), "settled an archive record a previous process left pending");
                }
                Err(e) => {
                    tracing::warn!(record = %at, error = %e, "cannot settle a pending archive record; it stays pending")
                }
            }
        }
        Ok(settled)
    }

    /// `(record name, uid)` of every entry of this collector's records in `namespace`.
    async fn uids_in_records(
        &self,
        namespace: &str,
        kind: RecordKind,
    ) -> Result<Vec<(String, String)>, ArchiveError> {
        let lp = ListParams::default().labels(&format!(
            "{LABEL_ARCHIVE}=true,{LABEL_COLLECTOR}={}",
            self.collector
        ));
        self.call();
        let records = kind
            .api(&self.client, Some(namespace))
            .list(&lp)
            .await
            .map_err(ArchiveError::List)?;
        Ok(records
            .items
            .iter()
            .flat_map(|o| {
                RecordKind::keys(o)
                    .into_iter()
                    .filter_map(|k| k.strip_suffix(".json").map(String::from))
                    .map(|u| (o.name_any(), u))
            })
            .collect())
    }

    /// Deletes every record whose time is up; returns how many.
    pub async fn expire(&self) -> Result<usize, ArchiveError> {
        self.expire_pass().await.map(|(gone, _)| gone)
    }

    /// [`Archiver::expire`], also returning when the next record falls due (unix seconds), so
    /// the loop can wake then rather than up to a whole interval later.
    async fn expire_pass(&self) -> Result<(usize, Option<i64>), ArchiveError> {
        let started = Instant::now();
        let now = Timestamp::now();
        let lp = ListParams::default().labels(&format!("{LABEL_ARCHIVE}=true"));
        let expires_at = |m: &ObjectMeta| {
            m.annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_EXPIRES))
                .and_then(|t| t.parse::<Timestamp>().ok())
        };
        let mut gone = 0;
        // The external collector's own archiver only ever sees its audit records, which are
        // ConfigMaps: it lists no Secrets, so an external-only install needs no Secret access
        // outside CAPA's namespace (deploy/manifests/external-only).
        let kinds: &[RecordKind] = if self.collector == "external" {
            &[RecordKind::ConfigMap]
        } else {
            &record_kind::BOTH
        };
        let mut listed: Vec<(ObjectMeta, RecordKind)> = Vec::new();
        for kind in kinds {
            self.call();
            let list = kind
                .api(&self.client, None)
                .list_metadata(&lp)
                .await
                .map_err(ArchiveError::List)?;
            listed.extend(list.items.into_iter().map(|m| (m.metadata, *kind)));
        }
        // Records that carry an expiry bucket go with one deletecollection per namespace and
        // ended bucket (every record in it has expired); older records without the label, one
        // DELETE each.
        let mut buckets: BTreeMap<(String, RecordKind, String), usize> = BTreeMap::new();
        let mut singles: Vec<RecordRef> = Vec::new();
        let now_s = now.as_second();
        let mut next_due: Option<i64> = None;
        let mut later = |t: i64| next_due = Some(next_due.map_or(t, |n| n.min(t)));
        for (m, kind) in &listed {
            let kind = *kind;
            let bucket = m
                .labels
                .as_ref()
                .and_then(|l| l.get(super::LABEL_EXPIRY_BUCKET))
                .and_then(|b| b.parse::<i64>().ok().map(|end| (b.clone(), end)));
            match bucket {
                Some((b, end)) if end <= now_s => {
                    let ns = m.namespace.clone().unwrap_or_default();
                    *buckets.entry((ns, kind, b)).or_default() += 1;
                }
                Some((_, end)) => later(end),
                None => match expires_at(m) {
                    Some(t) if t <= now => singles.push(record_ref(m, kind)),
                    Some(t) => later(t.as_second()),
                    None => {}
                },
            }
        }
        for ((namespace, kind, bucket), n) in buckets {
            match self.delete_bucket(&namespace, kind, &bucket).await {
                Ok(()) => gone += n,
                Err(e) => {
                    tracing::warn!(namespace = %namespace, bucket = %bucket, error = %e, "cannot delete an expired archive bucket; retrying next pass")
                }
            }
        }
        for r in singles {
            match self.delete_record(&r).await {
                Ok(()) => gone += 1,
                Err(e) => {
                    tracing::warn!(record = %format!("{}/{}", r.namespace, r.name), error = %e, "cannot delete an expired archive record; retrying next pass")
                }
            }
        }
        self.metrics.expired.inc_by(gone as u64);
        let listed = listed.len();
        self.metrics
            .stored
            .set(i64::try_from(listed.saturating_sub(gone)).unwrap_or(i64::MAX));
        self.metrics.gc_seconds.set(started.elapsed().as_secs_f64());
        if gone > 0 {
            tracing::info!(
                records = gone,
                seconds = started.elapsed().as_secs_f64(),
                "expired archive records deleted"
            );
        }
        Ok((gone, next_due))
    }

    /// Runs [`Archiver::expire`] now and every `every` until `shutdown`, and as soon as the next
    /// record falls due when that is sooner.
    pub async fn expire_loop(
        self: std::sync::Arc<Self>,
        every: Duration,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        loop {
            let wait = match self.expire_pass().await {
                Ok((_, Some(due))) => {
                    let now = Timestamp::now().as_millisecond();
                    // A little past the second it falls due in, so the pass sees it due.
                    let until = due.saturating_mul(1000).saturating_add(50);
                    Duration::from_millis(u64::try_from(until - now).unwrap_or(0)).min(every)
                }
                Ok((_, None)) => every,
                Err(e) => {
                    tracing::warn!(error = %e, "archive expiry pass failed; retrying next pass");
                    every
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// Whether the CRD `name` is gone or being deleted.
async fn crd_going(client: &Client, name: &str) -> Result<bool, String> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    match Api::<CustomResourceDefinition>::all(client.clone())
        .get_metadata_opt(name)
        .await
    {
        Ok(Some(m)) => Ok(m.metadata.deletion_timestamp.is_some()),
        Ok(None) => Ok(true),
        Err(e) => Err(format!("cannot read CRD {name}: {e}")),
    }
}

fn record_ref(m: &ObjectMeta, kind: RecordKind) -> RecordRef {
    RecordRef {
        namespace: m.namespace.clone().unwrap_or_default(),
        name: m.name.clone().unwrap_or_default(),
        kind,
    }
}

/// Splits a group's entries into records of at most [`RECORD_BYTES`].
fn chunks(entries: Vec<(usize, String)>) -> Vec<Vec<(usize, String)>> {
    let mut out: Vec<Vec<(usize, String)>> = Vec::new();
    let mut size = 0;
    for e in entries {
        if out.is_empty() || size + e.1.len() > RECORD_BYTES {
            out.push(Vec::new());
            size = 0;
        }
        size += e.1.len();
        if let Some(last) = out.last_mut() {
            last.push(e);
        }
    }
    out
}

fn rand_u16() -> u16 {
    rand::random::<u16>()
}

/// Maps an entry's apiVersion and kind to its resource, with discovery (cached per kind).
#[derive(Default)]
pub struct Resolver {
    known: HashMap<(String, String), Option<(ApiResource, bool)>>,
}

impl Resolver {
    pub async fn resolve(
        &mut self,
        client: &Client,
        api_version: &str,
        kind: &str,
    ) -> Option<(ApiResource, bool)> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(k) = self.known.get(&key) {
            return k.clone();
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let found = kube::discovery::pinned_kind(client, &gvk)
            .await
            .ok()
            .map(|(ar, caps)| (ar, caps.scope == kube::discovery::Scope::Namespaced));
        // Only a resolved kind is remembered: a failed discovery call must not read as "not
        // served" for the rest of the run.
        if found.is_some() {
            self.known.insert(key, found.clone());
        }
        found
    }

    /// Whether the entry's object exists now with its uid and is not being deleted (Err: cannot
    /// tell). An object held by finalizers after a DELETE counts as deleted.
    pub async fn exists(&mut self, client: &Client, e: &Entry) -> Result<bool, String> {
        let Some((ar, namespaced)) = self.resolve(client, &e.api_version, &e.kind).await else {
            // The kind is not served any more: nothing of it exists.
            return Ok(false);
        };
        let api: Api<DynamicObject> = match (&e.namespace, namespaced) {
            (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &ar),
            _ => Api::all_with(client.clone(), &ar),
        };
        match api.get_opt(&e.name).await {
            Ok(Some(o)) => Ok(o.uid().as_deref() == Some(e.uid.as_str())
                && o.metadata.deletion_timestamp.is_none()),
            Ok(None) => Ok(false),
            Err(err) => Err(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_cut_by_size() {
        let big = "x".repeat(RECORD_BYTES / 2 + 1);
        let c = chunks(vec![
            (0, big.clone()),
            (1, big.clone()),
            (2, "small".into()),
        ]);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].len(), 1);
        assert_eq!(c[1].iter().map(|e| e.0).collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn the_cache_answers_once_and_only_for_the_same_version() {
        let mut c = Cache::default();
        c.put("u".into(), "5".into(), Value::Bool(true));
        assert_eq!(c.take("u", "6"), None, "another version is a miss");
        c.put("u".into(), "5".into(), Value::Bool(true));
        assert_eq!(c.take("u", "5"), Some(Value::Bool(true)));
        assert_eq!(c.take("u", "5"), None, "used once");
    }
}

#[cfg(test)]
mod api_tests;
