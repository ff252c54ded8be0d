//! Writing, settling, recovering and expiring records: the types and the [`Archiver`] here, one
//! file per lifecycle (`write`, `settle`, `recover`, `expire`).
//!
//! Reads are batched: the objects of one batch that share a resource and namespace are read with
//! one paginated list when that costs fewer calls than a GET each (the first page's
//! `remainingItemCount` tells), and what a list returned beyond the batch is kept briefly
//! ([`Cache`]) for the next batch of the same cascade, so a 1,000-dependent cascade costs a couple
//! of list pages, not 1,000 GETs. One record holds a batch's objects of one namespace (up to
//! [`RECORD_BYTES`]): one create per batch instead of one per object.

use super::record_kind::{self, RecordKind};
use super::{
    ANNOTATION_EXPIRES, ArchiveEntry, COMPLETE, DeletionReason, LABEL_ARCHIVE, LABEL_COLLECTOR,
    LABEL_STATE, LABEL_TENANT, LABEL_WRITER, PENDING, RECORD_BYTES, Settings, strip,
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

mod expire;
mod recover;
mod settle;
mod write;

pub use recover::Resolver;

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
    pub reason: DeletionReason,
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
    /// The archive could not be read or written: do not delete now; retry. When
    /// [`ArchiveFailure::paused`], the collector's pause refused the record's write (not a
    /// failure: wait for resume).
    Failed(ArchiveFailure),
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
    /// The kinds of record it expires (see [`Archiver::expiring_only`]).
    record_kinds: &'static [RecordKind],
    /// The namespace whose records this archiver expires; None: every namespace.
    expiry_scope: Option<String>,
}

impl std::fmt::Debug for Archiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archiver")
            .field("collector", &self.collector)
            .field("settings", &self.settings)
            .finish()
    }
}

/// What the archive could not do, naming the record or the object.
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
    /// The object to archive could not be read, so there is nothing to record.
    #[error("cannot read {object} to archive it: {source}")]
    Read {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot read CRD {name}: {source}")]
    Crd {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// A CRD's custom resources (which the API server deletes with it) could not be listed.
    #[error("cannot list the custom resources of CRD {crd}: {source}")]
    CustomResources {
        crd: String,
        #[source]
        source: kube::Error,
    },
    /// Recovery could not tell whether an archived object still exists.
    #[error("cannot tell whether {object} still exists: {source}")]
    Exists {
        object: String,
        #[source]
        source: kube::Error,
    },
    /// The batching task stopped (the process is shutting down).
    #[error("the archive is shutting down")]
    ShuttingDown,
}

impl ArchiveError {
    fn api_error(&self) -> Option<&kube::Error> {
        match self {
            ArchiveError::Record { source, .. }
            | ArchiveError::List(source)
            | ArchiveError::Read { source, .. }
            | ArchiveError::Crd { source, .. }
            | ArchiveError::CustomResources { source, .. }
            | ArchiveError::Exists { source, .. } => Some(source),
            ArchiveError::ShuttingDown => None,
        }
    }

    /// Whether the namespace refused the record (being deleted, or over quota).
    fn refused_by_namespace(&self) -> bool {
        matches!(self, ArchiveError::Record { source: kube::Error::Api(s), .. } if s.code == 403 || s.code == 422)
            && !self.paused()
    }

    /// Whether the collector's pause refused the write (see engine::pause).
    pub fn paused(&self) -> bool {
        self.api_error()
            .is_some_and(crate::engine::client::refused_by_pause)
    }
}

/// An [`ArchiveError`] shared by every object of the batch it failed (one failed record write
/// fails all its entries), so it can be cloned into each object's answer.
#[derive(Clone, Debug, thiserror::Error)]
#[error(transparent)]
pub struct ArchiveFailure(std::sync::Arc<ArchiveError>);

impl ArchiveFailure {
    pub fn error(&self) -> &ArchiveError {
        &self.0
    }

    /// Whether the collector's pause refused the write: not a failure, wait for resume.
    pub fn paused(&self) -> bool {
        self.0.paused()
    }
}

impl From<ArchiveError> for ArchiveFailure {
    fn from(e: ArchiveError) -> Self {
        ArchiveFailure(std::sync::Arc::new(e))
    }
}

/// Two failures are equal when they say the same (tests compare answers).
impl PartialEq for ArchiveFailure {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl Eq for ArchiveFailure {}

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
            record_kinds: &record_kind::BOTH,
            expiry_scope: None,
        }
    }

    /// An archiver that only expires records of `kinds`: a collector whose records are all of
    /// one kind lists only that one (and needs RBAC for only that one).
    pub fn expiring_only(mut self, kinds: &'static [RecordKind]) -> Self {
        self.record_kinds = kinds;
        self
    }

    /// An archiver that expires only the records of `namespace`: the external collector's audit
    /// records all live in sweeper's namespace, so alone it needs no cluster-wide ConfigMap list.
    pub fn expiring_in(mut self, namespace: impl Into<String>) -> Self {
        self.expiry_scope = Some(namespace.into());
        self
    }

    fn labels(&self) -> ArchiveLabels {
        ArchiveLabels {
            collector: self.collector.into(),
        }
    }

    fn call(&self) {
        self.metrics.calls.get_or_create(&self.labels()).inc();
    }
}

fn record_ref(m: &ObjectMeta, kind: RecordKind) -> RecordRef {
    RecordRef {
        namespace: m.namespace.clone().unwrap_or_default(),
        name: m.name.clone().unwrap_or_default(),
        kind,
    }
}

fn rand_u16() -> u16 {
    rand::random::<u16>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_cut_by_size() {
        let big = "x".repeat(RECORD_BYTES / 2 + 1);
        let c = write::chunks(vec![
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
