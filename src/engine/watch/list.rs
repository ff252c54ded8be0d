//! One list of a resource's metadata, decoded object by object while the body arrives.
//!
//! Why not kube-runtime's watcher list: it pages through etcd (`limit=500` + continue tokens), and
//! each page is decoded whole into full `ObjectMeta`s (managedFields and all) before the first
//! object reaches the graph. With 100,000 objects that was 201 round trips and 4.6 s of API-server
//! time, where kube-controller-manager's informers make one `resourceVersion=0` list that the API
//! server answers from its watch cache (it ignores `limit` there, so the answer is one body).
//! Here the list is that same single request, and the body is decoded as a stream: each item is
//! reduced to the few fields the graph keeps and sent on at once, so neither the body nor the
//! decoded list is ever held whole, whatever the cluster's size.

use super::{WatchEvent, convert, convert_blocking, proto, response};
use crate::engine::graph::kinds::KindId;
use crate::engine::graph::uid::Uid;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Client;
use kube::api::ListParams;
use kube::core::Request;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;
use tokio::sync::mpsc;
use tokio_util::compat::FuturesAsyncReadCompatExt;

/// Which state of the resource a list asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListFrom {
    /// `resourceVersion=0`: whatever the API server's watch cache holds, in one answer. Only for a
    /// resource this process has never listed: nothing of its kind is in the graph yet, so a
    /// stale answer (a lagging API server of an HA control plane) can only leave objects out
    /// until the watch brings them, never make the graph forget an object that exists.
    Any,
    /// At least as new as this resourceVersion (the last one the watch saw): a relist after the
    /// watch expired. Still one answer from the watch cache, and never older than what the graph
    /// holds, so the objects it lacks really are gone.
    NotOlderThan(String),
    /// The newest state, read from etcd: the fallback when a list of the other kinds failed.
    Latest,
}

impl ListFrom {
    fn params(&self) -> ListParams {
        match self {
            ListFrom::Any => ListParams::default().at("0"),
            ListFrom::NotOlderThan(rv) => ListParams::default().at(rv),
            ListFrom::Latest => ListParams::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("listing {url}: {source}")]
    Request {
        url: String,
        #[source]
        source: kube::Error,
    },
    #[error("listing {url}: building the request: {source}")]
    Build {
        url: String,
        #[source]
        source: kube::core::request::Error,
    },
    #[error("decoding the list of {url}: {message}")]
    Decode { url: String, message: String },
    #[error("the list of {url} has no metadata.resourceVersion to watch from")]
    NoVersion { url: String },
    /// The graph writer is gone: the collector is shutting down.
    #[error("the graph writer stopped")]
    Closed,
}

impl ListError {
    /// The API server answered 404: the resource is not served (its CRD is gone).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ListError::Request { source, .. } if crate::engine::client::not_found(source))
    }
}

/// What a finished list tells the watch.
#[derive(Debug)]
pub struct Listed {
    /// The list's resourceVersion, where the watch starts.
    pub resource_version: String,
    /// The uids of the objects listed (for the resync that follows).
    pub seen: HashSet<Uid>,
}

/// Lists `url` (a resource's collection path) and sends every object to `tx` as an
/// [`WatchEvent::Apply`] (or [`WatchEvent::Invalid`]) as it is decoded. Protobuf is asked for
/// first ([`proto::LIST_ACCEPT`]); the answer's Content-Type picks the decoder.
pub async fn list(
    client: &Client,
    url: &str,
    from: &ListFrom,
    kind: KindId,
    tx: &mpsc::Sender<WatchEvent>,
) -> Result<Listed, ListError> {
    let request = Request::new(url)
        .list_metadata(&from.params())
        .map_err(|source| ListError::Build {
            url: url.to_string(),
            source,
        })?;
    let response = response::send(client, request, proto::LIST_ACCEPT)
        .await
        .map_err(|source| ListError::Request {
            url: url.to_string(),
            source,
        })?;
    let protobuf = proto::is_protobuf(response.headers());
    tracing::debug!(protobuf, "list answered");
    let body = response::body_reader(response);
    if protobuf {
        return decode_protobuf(body, kind, tx, url).await;
    }
    // serde_json reads synchronously: the decoder runs on a blocking thread that pulls the body
    // from this runtime as it needs it.
    let reader = std::io::BufReader::with_capacity(
        64 * 1024,
        tokio_util::io::SyncIoBridge::new(Box::pin(body.compat())),
    );
    let (tx, url_owned) = (tx.clone(), url.to_string());
    tokio::task::spawn_blocking(move || decode(reader, kind, &tx, &url_owned))
        .await
        .map_err(|e| ListError::Decode {
            url: url.to_string(),
            message: format!("the decoder stopped: {e}"),
        })?
}

/// Decodes a protobuf `PartialObjectMetadataList` from `body` item by item
/// ([`proto::list::ListReader`]), sending each on as it comes.
pub(super) async fn decode_protobuf(
    body: impl futures::AsyncRead + Unpin,
    kind: KindId,
    tx: &mpsc::Sender<WatchEvent>,
    url: &str,
) -> Result<Listed, ListError> {
    let decode_error = |e: proto::ProtoError| ListError::Decode {
        url: url.to_string(),
        message: e.to_string(),
    };
    let mut reader = proto::list::ListReader::new(body);
    let mut seen = HashSet::new();
    while let Some(meta) = reader.next().await.map_err(decode_error)? {
        let Some(lite) = convert(kind, &meta, tx).await else {
            continue;
        };
        seen.insert(lite.uid);
        if tx
            .send(WatchEvent::Apply { kind, meta: lite })
            .await
            .is_err()
        {
            return Err(ListError::Closed);
        }
    }
    match reader.resource_version() {
        Some(v) if !v.is_empty() => Ok(Listed {
            resource_version: v.to_string(),
            seen,
        }),
        _ => Err(ListError::NoVersion {
            url: url.to_string(),
        }),
    }
}

/// Decodes a `PartialObjectMetadataList` from `reader`, sending each item on as it comes.
pub(super) fn decode(
    reader: impl std::io::Read,
    kind: KindId,
    tx: &mpsc::Sender<WatchEvent>,
    url: &str,
) -> Result<Listed, ListError> {
    let mut seen = HashSet::new();
    let mut closed = false;
    let mut sink = |item: ListedItem| -> bool {
        let meta = ObjectMeta::from(item.metadata);
        match convert_blocking(kind, &meta, tx) {
            Ok(Some(lite)) => {
                seen.insert(lite.uid);
                if tx
                    .blocking_send(WatchEvent::Apply { kind, meta: lite })
                    .is_err()
                {
                    closed = true;
                }
            }
            Ok(None) => {}
            Err(()) => closed = true,
        }
        !closed
    };
    let mut de = serde_json::Deserializer::from_reader(reader);
    let version = ListSeed { sink: &mut sink }.deserialize(&mut de);
    if closed {
        return Err(ListError::Closed);
    }
    let version = version
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| ListError::Decode {
            url: url.to_string(),
            message: e.to_string(),
        })?;
    match version {
        Some(resource_version) if !resource_version.is_empty() => Ok(Listed {
            resource_version,
            seen,
        }),
        _ => Err(ListError::NoVersion {
            url: url.to_string(),
        }),
    }
}

/// An item of the list, with only the metadata the graph reads: everything else (managedFields,
/// labels, annotations) is skipped by the parser without being built.
#[derive(Deserialize)]
struct ListedItem {
    #[serde(default)]
    metadata: ListedMeta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListedMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    owner_references: Option<Vec<OwnerReference>>,
}

impl From<ListedMeta> for ObjectMeta {
    fn from(m: ListedMeta) -> Self {
        ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            owner_references: m.owner_references,
            ..ObjectMeta::default()
        }
    }
}

/// The list object: `metadata.resourceVersion` is returned, every element of `items` goes to the
/// sink, which answers false to stop.
struct ListSeed<'a, F: FnMut(ListedItem) -> bool> {
    sink: &'a mut F,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    resource_version: Option<String>,
}

impl<'de, F: FnMut(ListedItem) -> bool> DeserializeSeed<'de> for ListSeed<'_, F> {
    type Value = Option<String>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, F: FnMut(ListedItem) -> bool> Visitor<'de> for ListSeed<'_, F> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut version = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "metadata" => version = map.next_value::<ListMeta>()?.resource_version,
                "items" => map.next_value_seed(ItemsSeed {
                    sink: &mut *self.sink,
                })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(version)
    }
}

struct ItemsSeed<'a, F: FnMut(ListedItem) -> bool> {
    sink: &'a mut F,
}

impl<'de, F: FnMut(ListedItem) -> bool> DeserializeSeed<'de> for ItemsSeed<'_, F> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, F: FnMut(ListedItem) -> bool> Visitor<'de> for ItemsSeed<'_, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of objects")
    }

    /// `"items": null` is what an empty list can say.
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<ListedItem>()? {
            if !(self.sink)(item) {
                return Err(de::Error::custom("the graph writer stopped"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::graph::kinds::Kinds;

    fn kind() -> KindId {
        Kinds::default().intern("v1", "ConfigMap")
    }

    fn item(name: &str, uid: &str, owner: Option<&str>) -> serde_json::Value {
        let mut meta = serde_json::json!({
            "name": name, "namespace": "ns", "uid": uid, "resourceVersion": "7",
            "labels": {"a": "b"},
            "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:data": {".": {}, "f:k": {}}}}],
        });
        if let Some(o) = owner {
            meta["ownerReferences"] = serde_json::json!([{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "own", "uid": o,
                "blockOwnerDeletion": true,
            }]);
        }
        serde_json::json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta})
    }

    fn run(body: &serde_json::Value) -> (Result<Listed, ListError>, Vec<WatchEvent>) {
        let (tx, mut rx) = mpsc::channel(64);
        let text = serde_json::to_vec(body).unwrap();
        let listed = decode(&text[..], kind(), &tx, "/api/v1/configmaps");
        let mut got = Vec::new();
        while let Ok(ev) = rx.try_recv() {
            got.push(ev);
        }
        (listed, got)
    }

    const U1: &str = "11111111-1111-1111-1111-111111111111";
    const U2: &str = "22222222-2222-2222-2222-222222222222";

    #[test]
    fn every_item_is_sent_with_its_owner_and_the_list_version_returned() {
        let body = serde_json::json!({
            "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": "42"},
            "items": [item("a", U1, None), item("b", U2, Some(U1))],
        });
        let (listed, events) = run(&body);
        let listed = listed.unwrap();
        assert_eq!(listed.resource_version, "42");
        assert_eq!(listed.seen.len(), 2);
        let names: Vec<(String, usize)> = events
            .iter()
            .map(|e| match e {
                WatchEvent::Apply { meta, .. } => (meta.name.clone(), meta.owners.len()),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(names, vec![("a".into(), 0), ("b".into(), 1)]);
        let WatchEvent::Apply { meta, .. } = &events[1] else {
            unreachable!()
        };
        assert!(meta.owners[0].block_owner_deletion);
        assert_eq!(meta.resource_version, 7);
    }

    #[test]
    fn the_version_may_come_after_the_items_and_items_may_be_null() {
        let body = serde_json::json!({"items": null, "metadata": {"resourceVersion": "9"}});
        let (listed, events) = run(&body);
        assert_eq!(listed.unwrap().resource_version, "9");
        assert!(events.is_empty());
    }

    #[test]
    fn an_item_without_a_uid_is_skipped_and_a_bad_owner_reference_reported() {
        let mut bad_owner = item("c", U2, Some(U1));
        bad_owner["metadata"]["ownerReferences"][0]["name"] = "".into();
        let body = serde_json::json!({
            "metadata": {"resourceVersion": "3"},
            "items": [{"metadata": {"name": "no-uid"}}, bad_owner],
        });
        let (listed, events) = run(&body);
        assert_eq!(listed.unwrap().seen.len(), 1);
        assert!(
            matches!(&events[0], WatchEvent::Invalid { name, .. } if name == "c"),
            "{events:?}"
        );
        assert!(matches!(&events[1], WatchEvent::Apply { meta, .. } if meta.owners.is_empty()));
    }

    #[test]
    fn a_truncated_body_is_an_error_not_a_short_list() {
        let body = serde_json::json!({
            "metadata": {"resourceVersion": "42"},
            "items": [item("a", U1, None), item("b", U2, None)],
        });
        let text = serde_json::to_string(&body).unwrap();
        let cut = &text.as_bytes()[..text.len() - 40];
        let (tx, _rx) = mpsc::channel(16);
        let err = decode(cut, kind(), &tx, "/api/v1/configmaps").unwrap_err();
        assert!(matches!(err, ListError::Decode { .. }), "{err}");
    }

    #[test]
    fn a_list_without_a_version_cannot_be_watched_from() {
        let body = serde_json::json!({"items": [item("a", U1, None)]});
        let (listed, _) = run(&body);
        assert!(matches!(listed, Err(ListError::NoVersion { .. })));
    }

    #[tokio::test]
    async fn a_protobuf_list_sends_every_item_and_returns_its_version() {
        // A body a 1.20 API server sent (watch/testdata/capture.sh): owner, dependent, held.
        let body: &[u8] = include_bytes!("testdata/list.pb");
        let (tx, mut rx) = mpsc::channel(64);
        let listed = decode_protobuf(body, kind(), &tx, "/api/v1/configmaps")
            .await
            .unwrap();
        assert_eq!(listed.seen.len(), 3);
        assert!(listed.resource_version.parse::<u64>().is_ok());
        let mut names = Vec::new();
        while let Ok(ev) = rx.try_recv() {
            let WatchEvent::Apply { meta, .. } = ev else {
                panic!("unexpected {ev:?}")
            };
            if meta.name == "dependent" {
                assert!(meta.owners[0].controller && meta.owners[0].block_owner_deletion);
            }
            names.push(meta.name);
        }
        names.sort();
        assert_eq!(names, ["dependent", "held", "owner"]);
        // A stopped writer ends it, as it ends a JSON list.
        drop(rx);
        let err = decode_protobuf(body, kind(), &tx, "/api/v1/configmaps")
            .await
            .unwrap_err();
        assert!(matches!(err, ListError::Closed), "{err}");
    }

    #[test]
    fn a_stopped_writer_ends_the_list() {
        let body = serde_json::json!({
            "metadata": {"resourceVersion": "42"},
            "items": [item("a", U1, None), item("b", U2, None)],
        });
        let (tx, rx) = mpsc::channel(16);
        drop(rx);
        let text = serde_json::to_vec(&body).unwrap();
        let err = decode(&text[..], kind(), &tx, "/api/v1/configmaps").unwrap_err();
        assert!(matches!(err, ListError::Closed), "{err}");
    }
}
