//! Kubernetes' protobuf encoding of metadata lists and watch events, as client-go's metadata
//! client asks for it, decoded with kube-rs's generated types (`k8s-pb`) and `prost`.
//!
//! Why: the API server spends about three times as long encoding a metadata list in JSON as in
//! protobuf (issue 36: 3.46 s of servers' CPU for sweeper's start-up lists against 1.10 s for
//! kube-controller-manager's, which asks for protobuf), and pays it again for every watch event.
//!
//! The shapes, as a 1.20 API server sends them (captured in `testdata/`):
//! - a list or a single object: the magic `k8s\0`, then a `runtime.Unknown` whose `raw` holds the
//!   object (`PartialObjectMetadataList`, `PartialObjectMetadata`, `Status`);
//! - a watch: frames of a 4-byte big-endian length, each a bare `metav1.WatchEvent` whose
//!   `object.raw` is such an envelope again.
//!
//! Errors of a list (a 403 and a 504 were checked) come back as JSON even to a protobuf Accept (the
//! `Status` kind matches only the header's last `application/json`); an `ERROR` event inside a
//! protobuf watch is a protobuf `Status`. Both are handled. Custom resources' metadata is served in
//! protobuf too (checked against 1.20: a CR's `PartialObjectMetadataList` and its watch answer
//! `application/vnd.kubernetes.protobuf`); the JSON fallback is kept, per response, for servers
//! that answer JSON.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use kube::core::Status;
use kube::core::response::{StatusCause, StatusDetails, StatusSummary};
use prost::Message;

/// What client-go's metadata client sends for a list: protobuf first, JSON as the fallback, and a
/// bare `application/json` last, which is what a `Status` (an error) is answered in.
pub const LIST_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// The same for a watch, whose objects are single `PartialObjectMetadata`s.
pub const WATCH_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// The four bytes before every protobuf-encoded object.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// The largest protobuf message accepted for one object or one watch frame. etcd stores at most
/// 1.5 MiB per object; anything far beyond is a broken stream, not an object to buffer.
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error("no protobuf envelope (the k8s\\0 prefix is missing)")]
    NoMagic,
    #[error("decoding {what}: {source}")]
    Decode {
        what: &'static str,
        #[source]
        source: prost::DecodeError,
    },
    #[error("expected {expected}, the server sent {got}")]
    Kind { expected: &'static str, got: String },
    #[error("a message of {0} bytes, more than any object")]
    TooLarge(u64),
    #[error("the body ends inside a message")]
    Truncated,
    #[error("unexpected protobuf wire type {0} in a list")]
    WireType(u64),
    #[error("unknown watch event type {0:?}")]
    EventType(String),
    #[error("a JSON object inside a protobuf watch: {0}")]
    Json(#[from] serde_json::Error),
    #[error("reading the body: {0}")]
    Io(#[from] std::io::Error),
}

/// True when the response's Content-Type is Kubernetes protobuf (a list's, or a watch's
/// `;stream=watch`); anything else is read as JSON.
pub fn is_protobuf(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/vnd.kubernetes.protobuf"))
}

/// The `runtime.Unknown` behind the magic prefix.
pub fn envelope(bytes: &[u8]) -> Result<Unknown, ProtoError> {
    let body = bytes.strip_prefix(MAGIC).ok_or(ProtoError::NoMagic)?;
    Unknown::decode(body).map_err(|source| ProtoError::Decode {
        what: "the runtime.Unknown envelope",
        source,
    })
}

/// The envelope's kind (empty when the server left typeMeta out).
pub fn kind_of(unknown: &Unknown) -> &str {
    unknown
        .type_meta
        .as_ref()
        .and_then(|t| t.kind.as_deref())
        .unwrap_or("")
}

/// A `Status` sent in protobuf (an envelope whose kind is `Status`).
pub fn status_from_envelope(bytes: &[u8]) -> Result<Status, ProtoError> {
    let unknown = envelope(bytes)?;
    match kind_of(&unknown) {
        "Status" | "" => {}
        other => {
            return Err(ProtoError::Kind {
                expected: "Status",
                got: other.to_string(),
            });
        }
    }
    let status =
        pb::Status::decode(unknown.raw.as_deref().unwrap_or_default()).map_err(|source| {
            ProtoError::Decode {
                what: "a Status",
                source,
            }
        })?;
    Ok(status_of(status))
}

/// kube's form of a protobuf `Status`, so a 410 inside a protobuf watch is the same
/// `kube::Error::Api` as one inside a JSON watch.
pub fn status_of(s: pb::Status) -> Status {
    let details = s.details.map(|d| StatusDetails {
        name: d.name.unwrap_or_default(),
        group: d.group.unwrap_or_default(),
        kind: d.kind.unwrap_or_default(),
        uid: d.uid.unwrap_or_default(),
        causes: d
            .causes
            .into_iter()
            .map(|c| StatusCause {
                reason: c.reason.unwrap_or_default(),
                message: c.message.unwrap_or_default(),
                field: c.field.unwrap_or_default(),
            })
            .collect(),
        retry_after_seconds: d
            .retry_after_seconds
            .and_then(|s| u32::try_from(s).ok())
            .unwrap_or(0),
    });
    Status {
        status: match s.status.as_deref() {
            Some("Success") => Some(StatusSummary::Success),
            Some("Failure") => Some(StatusSummary::Failure),
            _ => None,
        },
        code: s.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(0),
        message: s.message.unwrap_or_default(),
        reason: s.reason.unwrap_or_default(),
        metadata: None,
        details,
    }
}

/// The metadata fields the graph reads, in k8s-openapi's form (what [`crate::engine::meta::lite`]
/// takes); labels, annotations and managedFields are dropped here.
pub fn object_meta(m: pb::ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        deletion_timestamp: m.deletion_timestamp.map(time),
        finalizers: (!m.finalizers.is_empty()).then_some(m.finalizers),
        owner_references: (!m.owner_references.is_empty())
            .then(|| m.owner_references.into_iter().map(owner_ref).collect()),
        ..ObjectMeta::default()
    }
}

fn time(t: pb::Time) -> Time {
    let ts = k8s_openapi::jiff::Timestamp::new(t.seconds.unwrap_or(0), t.nanos.unwrap_or(0))
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    Time(ts)
}

fn owner_ref(r: pb::OwnerReference) -> OwnerReference {
    OwnerReference {
        api_version: r.api_version.unwrap_or_default(),
        kind: r.kind.unwrap_or_default(),
        name: r.name.unwrap_or_default(),
        uid: r.uid.unwrap_or_default(),
        controller: r.controller,
        block_owner_deletion: r.block_owner_deletion,
    }
}

/// One event of a metadata watch, whichever encoding it came in.
#[derive(Debug)]
pub enum MetaEvent {
    Added(ObjectMeta),
    Modified(ObjectMeta),
    Deleted(ObjectMeta),
    /// A bookmark: only the resourceVersion to resume from.
    Bookmark(String),
    /// An `ERROR` event (410 Gone when the watch's version has expired).
    Error(Box<Status>),
}

/// Decodes one frame of a protobuf watch stream (the length prefix already removed).
pub fn watch_event(frame: &[u8]) -> Result<MetaEvent, ProtoError> {
    // The frame is a bare WatchEvent; accept an envelope around it too.
    let event = match frame.strip_prefix(MAGIC) {
        Some(_) => {
            let unknown = envelope(frame)?;
            pb::WatchEvent::decode(unknown.raw.as_deref().unwrap_or_default())
        }
        None => pb::WatchEvent::decode(frame),
    }
    .map_err(|source| ProtoError::Decode {
        what: "a watch event",
        source,
    })?;
    let kind = event.r#type.unwrap_or_default();
    let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
    if kind == "ERROR" {
        return if raw.starts_with(MAGIC) {
            status_from_envelope(&raw).map(|s| MetaEvent::Error(Box::new(s)))
        } else {
            Ok(MetaEvent::Error(Box::new(serde_json::from_slice(&raw)?)))
        };
    }
    let unknown = envelope(&raw)?;
    match kind_of(&unknown) {
        "PartialObjectMetadata" | "" => {}
        other => {
            return Err(ProtoError::Kind {
                expected: "PartialObjectMetadata",
                got: other.to_string(),
            });
        }
    }
    let object = pb::PartialObjectMetadata::decode(unknown.raw.as_deref().unwrap_or_default())
        .map_err(|source| ProtoError::Decode {
            what: "a PartialObjectMetadata",
            source,
        })?;
    let meta = object.metadata.unwrap_or_default();
    Ok(match kind.as_str() {
        "ADDED" => MetaEvent::Added(object_meta(meta)),
        "MODIFIED" => MetaEvent::Modified(object_meta(meta)),
        "DELETED" => MetaEvent::Deleted(object_meta(meta)),
        "BOOKMARK" => MetaEvent::Bookmark(meta.resource_version.unwrap_or_default()),
        _ => return Err(ProtoError::EventType(kind)),
    })
}

pub mod list;

#[cfg(test)]
mod tests;
