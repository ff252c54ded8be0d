//! The archive: a copy of every object sweeper deletes, written *before* the DELETE, so a
//! mistaken collection can be rolled forward again (`sweeper restore`).
//!
//! What the Kubernetes garbage collector design rejected for lack of time ("recovering from
//! abnormal cascading deletion"), built on its own guidelines:
//! - **complete object, written first.** Each deleted object is kept whole minus server-set
//!   metadata ([`strip`]), with who deleted it, why and when ([`ArchiveEntry`]). The record is created
//!   *pending* before the DELETE; once the deletes of its batch are answered it is *settled*: an
//!   entry whose DELETE did not delete (precondition failed, already gone, error) is removed, and
//!   the record is marked complete. A crash between the two leaves a pending record, which the
//!   next process settles from the world ([`store::Archiver::reconcile_pending`]): an entry whose
//!   object still exists is removed (it will be archived again when it is deleted), one whose
//!   object is gone stays. So there is exactly one entry per deleted object, and none for an
//!   object that was not deleted.
//! - **same authorization as the original.** A namespaced object's record is a ConfigMap in its
//!   own namespace; a Secret's record is itself a Secret there (only who may read Secrets in that
//!   namespace may read it); a cluster-scoped object's record lives in sweeper's namespace.
//!   Tenant teardowns keep every record in sweeper's namespace: the tenant's namespaces are
//!   being deleted with everything in them.
//! - **state in the cluster, components stateless.** Records are plain ConfigMaps / Secrets
//!   labelled [`LABEL_ARCHIVE`]; `sweeper archive list` and `sweeper restore` read them as the
//!   caller, and expired ones are deleted by [`store::Archiver::expire`].

pub mod batch;
pub mod hub;
pub mod record_kind;
pub mod restore;
pub mod store;
pub mod then_act;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Every record carries this label (value `"true"`).
pub const LABEL_ARCHIVE: &str = "sweeper.dev/archive";
/// `pending` until the deletes of the record's batch are answered, then `complete`.
pub const LABEL_STATE: &str = "sweeper.dev/archive-state";
/// The collector that wrote the record: `cascade` or `tenant`.
pub const LABEL_COLLECTOR: &str = "sweeper.dev/archive-collector";
/// The process that wrote the record (random per process): a start settles only the pending
/// records of *other* processes, so it may run beside this process's own writes.
pub const LABEL_WRITER: &str = "sweeper.dev/archive-writer";
/// Tenant teardowns: the tenant id, so `restore --tenant` finds its records by label.
pub const LABEL_TENANT: &str = "sweeper.dev/archive-tenant";
/// When the record may be deleted (RFC 3339).
pub const ANNOTATION_EXPIRES: &str = "sweeper.dev/archive-expires";
/// Records whose expiry falls in one bucket carry its end (unix seconds): see [`expiry_bucket`].
pub const LABEL_EXPIRY_BUCKET: &str = "sweeper.dev/archive-expiry-bucket";
/// The Secret type of a Secret's record.
pub const SECRET_TYPE: &str = "sweeper.dev/archive";

pub const PENDING: &str = "pending";
pub const COMPLETE: &str = "complete";

/// Which deleted objects are archived (`--archive`).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum ArchiveMode {
    /// Every object sweeper deletes (the default: see the README's measured cost).
    #[default]
    All,
    /// Nothing: deletes are not preceded by a record.
    None,
    /// Only objects whose labels match.
    Selector(crate::engine::selector::LabelFilter),
}

impl std::str::FromStr for ArchiveMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "all" => Ok(ArchiveMode::All),
            "none" => Ok(ArchiveMode::None),
            other => match other.strip_prefix("selector=") {
                Some(sel) if !sel.trim().is_empty() => crate::engine::selector::parse(sel)
                    .map(ArchiveMode::Selector)
                    .map_err(|e| format!("--archive selector={sel}: {e}")),
                _ => Err(format!(
                    "--archive: {other:?} is not all, none or selector=<label selector>"
                )),
            },
        }
    }
}

impl ArchiveMode {
    pub fn is_on(&self) -> bool {
        !matches!(self, ArchiveMode::None)
    }

    /// Whether an object with these labels is archived.
    pub fn selects(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        match self {
            ArchiveMode::All => true,
            ArchiveMode::None => false,
            ArchiveMode::Selector(f) => f.matches(labels),
        }
    }
}

/// The archive's settings (`--archive`, `--archive-ttl`, `--archive-max-object-bytes`).
#[derive(Clone, Debug)]
pub struct Settings {
    pub mode: ArchiveMode,
    pub ttl: std::time::Duration,
    /// An object larger than this (as JSON) is deleted without a record, and an Event says so.
    pub max_object_bytes: usize,
    /// Sweeper's namespace: records of cluster-scoped objects and of tenant teardowns.
    pub namespace: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: ArchiveMode::All,
            ttl: std::time::Duration::from_secs(72 * 3600),
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            namespace: "sweeper-system".into(),
        }
    }
}

/// 512 KiB: a record is a ConfigMap or Secret, which the API server caps at 1 MiB in all.
pub const DEFAULT_MAX_OBJECT_BYTES: usize = 512 * 1024;
/// A record's data is cut at this size: several objects share one record up to it.
pub const RECORD_BYTES: usize = 900 * 1024;

/// When a record written at `now` expires (`--archive-ttl`); a ttl past the calendar's end
/// means never.
/// The expiry bucket of a record: the time its bucket ends (unix seconds), as the label value
/// the expiry deletes by. Buckets are `ttl / 10` long (at least a second, at most an hour) and a
/// record's bucket ends at or after its own expiry, so a record is never deleted early and at most
/// a tenth of its ttl (an hour) late; one `deletecollection` per namespace and bucket removes them.
pub fn expiry_bucket(expires: k8s_openapi::jiff::Timestamp, ttl: std::time::Duration) -> String {
    let width = (ttl.as_secs() / 10).clamp(1, 3600) as i64;
    let at = expires.as_second();
    let end = at
        .checked_add(width - 1)
        .map_or(i64::MAX, |x| x.div_euclid(width).saturating_mul(width));
    end.to_string()
}

pub fn expires_after(
    now: k8s_openapi::jiff::Timestamp,
    ttl: std::time::Duration,
) -> k8s_openapi::jiff::Timestamp {
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    now.checked_add(SignedDuration::try_from(ttl).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX)
}

/// Why sweeper deleted an object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionReason {
    /// Cascade: the owner whose absence made the object garbage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<OwnerRef>,
    /// Tenant teardown: the tenant id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Tenant teardown: the custom resource went with this CRD (name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_crd: Option<String>,
    /// Cascade: an owner deleted by its user in the foreground (or with `cascade-complete`),
    /// which sweeper let go by releasing these finalizers once its dependents were gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for DeletionReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.owner, &self.tenant, &self.with_crd, &self.released) {
            (Some(o), ..) => write!(f, "owner {} {} ({}) gone", o.kind, o.name, o.uid),
            (None, Some(t), Some(crd), _) => write!(f, "tenant {t} deleted (with CRD {crd})"),
            (None, Some(t), None, _) => write!(f, "tenant {t} deleted"),
            (None, None, _, Some(fin)) => {
                write!(f, "deleted by its user; sweeper released {fin}")
            }
            (None, None, _, None) => write!(f, "deleted by sweeper"),
        }
    }
}

/// One archived object: the object and what is known about its deletion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveEntry {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// The deleted object's uid (its dependents' ownerReferences name it).
    pub uid: String,
    /// The resourceVersion that was deleted (the DELETE's precondition where sweeper had one).
    pub resource_version: String,
    /// `sweeper-cascade` or `sweeper-tenant`.
    pub deleted_by: String,
    pub reason: DeletionReason,
    /// When the record was written (RFC 3339), just before the DELETE.
    pub archived_at: String,
    /// The object without server-set metadata.
    pub object: Value,
}

impl ArchiveEntry {
    /// `Kind ns/name` or `Kind name`.
    pub fn label(&self) -> String {
        crate::engine::meta::object_label(&self.kind, self.namespace.as_deref(), &self.name)
    }

    /// The uids of the object's owners, from its archived ownerReferences.
    pub fn owner_uids(&self) -> Vec<String> {
        self.object["metadata"]["ownerReferences"]
            .as_array()
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| r["uid"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The data key of this entry in its record: the uid is unique and a valid key.
    pub fn key(uid: &str) -> String {
        format!("{uid}.json")
    }
}

/// A ConfigMap record's entries, and the keys whose value is not an entry (a hand edit, a
/// record of another version): said, never silently dropped.
pub fn read_configmap(
    c: &k8s_openapi::api::core::v1::ConfigMap,
) -> (Vec<ArchiveEntry>, Vec<String>) {
    let mut entries = Vec::new();
    let mut bad = Vec::new();
    for (k, v) in c.data.iter().flatten() {
        match serde_json::from_str(v) {
            Ok(e) => entries.push(e),
            Err(_) => bad.push(k.clone()),
        }
    }
    (entries, bad)
}

/// As [`read_configmap`], for a Secret record.
pub fn read_secret(s: &k8s_openapi::api::core::v1::Secret) -> (Vec<ArchiveEntry>, Vec<String>) {
    let mut entries = Vec::new();
    let mut bad = Vec::new();
    for (k, v) in s.data.iter().flatten() {
        match serde_json::from_slice(&v.0) {
            Ok(e) => entries.push(e),
            Err(_) => bad.push(k.clone()),
        }
    }
    (entries, bad)
}

/// Metadata the API server sets, which a create would refuse or ignore.
const SERVER_SET: &[&str] = &[
    "uid",
    "resourceVersion",
    "managedFields",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
];

/// The object as archived: server-set metadata removed, everything else (spec, data, labels,
/// annotations, ownerReferences, finalizers, status) kept.
pub fn strip(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in SERVER_SET {
            meta.remove(*k);
        }
    }
    object
}

#[cfg(test)]
mod bucket_tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;
    use std::time::Duration;

    #[test]
    fn a_bucket_ends_at_or_after_the_expiry_and_at_most_a_tenth_of_the_ttl_later() {
        let ttl = Duration::from_secs(72 * 3600);
        for at in [0_i64, 1, 3599, 3600, 3601, 1_795_612_276] {
            let t = Timestamp::from_second(at).unwrap();
            let end: i64 = expiry_bucket(t, ttl).parse().unwrap();
            assert!(end >= at && end - at < 3600, "{at} -> {end}");
            assert_eq!(end % 3600, 0);
        }
        let short = Duration::from_secs(30);
        let t = Timestamp::from_second(1001).unwrap();
        assert_eq!(
            expiry_bucket(t, short),
            "1002",
            "3 s buckets for a 30 s ttl"
        );
        assert_eq!(
            expiry_bucket(t, Duration::ZERO),
            "1001",
            "at least a second"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strip_removes_server_set_fields_and_keeps_the_rest() {
        let o = strip(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "n", "uid": "u", "resourceVersion": "5",
                "managedFields": [{}], "creationTimestamp": "t", "deletionTimestamp": "t",
                "labels": {"x": "y"}, "ownerReferences": [{"uid": "o"}], "finalizers": ["f"]},
            "data": {"k": "v"},
        }));
        assert_eq!(
            o,
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "n", "labels": {"x": "y"},
                    "ownerReferences": [{"uid": "o"}], "finalizers": ["f"]},
                "data": {"k": "v"},
            })
        );
    }

    #[test]
    fn modes_parse_and_select() {
        assert_eq!("all".parse::<ArchiveMode>().unwrap(), ArchiveMode::All);
        assert_eq!("none".parse::<ArchiveMode>().unwrap(), ArchiveMode::None);
        let m: ArchiveMode = "selector=tier=prod".parse().unwrap();
        let mut labels = std::collections::BTreeMap::new();
        assert!(!m.selects(&labels));
        labels.insert("tier".to_string(), "prod".to_string());
        assert!(m.selects(&labels));
        assert!(
            "some"
                .parse::<ArchiveMode>()
                .unwrap_err()
                .contains("--archive")
        );
        assert!("selector=".parse::<ArchiveMode>().is_err());
    }

    #[test]
    fn reason_reads_as_a_sentence() {
        let r = DeletionReason {
            owner: Some(OwnerRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: "web".into(),
                uid: "u1".into(),
            }),
            ..Default::default()
        };
        assert_eq!(r.to_string(), "owner Deployment web (u1) gone");
        let t = DeletionReason {
            tenant: Some("abc123".into()),
            ..Default::default()
        };
        assert_eq!(t.to_string(), "tenant abc123 deleted");
    }
}
