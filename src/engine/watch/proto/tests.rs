//! Decoder tests on bodies a kube-apiserver 1.20 sent (captured by `testdata/capture.sh`).

use super::list::ListReader;
use super::*;
use crate::engine::watch::response::error_status;
use crate::engine::watch::stream::protobuf_events;
use futures::StreamExt;

/// `configmaps?resourceVersion=0` of a namespace holding `owner`, `dependent` (controller and
/// blocking reference to owner) and `held` (deleted, kept by a finalizer).
const LIST: &[u8] = include_bytes!("../testdata/list.pb");
/// A watch from that list's version: `added` added, labelled, deleted, then bookmarks.
const WATCH: &[u8] = include_bytes!("../testdata/watch.pb");
/// A watch of Events from version 1 after etcd was compacted: one ERROR event.
const WATCH_GONE: &[u8] = include_bytes!("../testdata/watch-gone.pb");
/// The 504 a NotOlderThan list gets for a version the server has not reached (JSON, whatever
/// the Accept).
const LIST_ERROR: &[u8] = include_bytes!("../testdata/list-error.json");

async fn read_list(body: &[u8]) -> (Vec<ObjectMeta>, Result<(), ProtoError>, Option<String>) {
    let mut reader = ListReader::new(body);
    let mut items = Vec::new();
    let end = loop {
        match reader.next().await {
            Ok(Some(meta)) => items.push(meta),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    (items, end, reader.resource_version().map(str::to_string))
}

fn by_name<'a>(items: &'a [ObjectMeta], name: &str) -> &'a ObjectMeta {
    items
        .iter()
        .find(|m| m.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("{name} not in the list"))
}

#[tokio::test]
async fn a_captured_list_gives_every_item_with_what_the_graph_reads() {
    let (items, end, version) = read_list(LIST).await;
    end.unwrap();
    let version: u64 = version.expect("the list's version").parse().unwrap();
    assert_eq!(items.len(), 3, "{items:?}");
    let owner = by_name(&items, "owner");
    let dependent = by_name(&items, "dependent");
    let held = by_name(&items, "held");
    assert_eq!(owner.namespace.as_deref(), Some("sweeper-fixture"));
    assert!(owner.owner_references.is_none() && owner.deletion_timestamp.is_none());
    let refs = dependent.owner_references.as_ref().expect("an owner");
    assert_eq!(refs.len(), 1);
    assert_eq!(
        (refs[0].api_version.as_str(), refs[0].kind.as_str()),
        ("v1", "ConfigMap")
    );
    assert_eq!(refs[0].name, "owner");
    assert_eq!(Some(&refs[0].uid), owner.uid.as_ref());
    assert_eq!(refs[0].controller, Some(true));
    assert_eq!(refs[0].block_owner_deletion, Some(true));
    assert!(held.deletion_timestamp.is_some());
    assert_eq!(
        held.finalizers.as_deref(),
        Some(&["sweeper.dev/fixture".to_string()][..])
    );
    for m in &items {
        let rv: u64 = m.resource_version.as_deref().unwrap().parse().unwrap();
        assert!(rv <= version, "{m:?}");
        assert!(m.uid.as_deref().is_some_and(|u| u.len() == 36));
        // What the graph never reads is not kept.
        assert!(m.labels.is_none() && m.annotations.is_none() && m.managed_fields.is_none());
    }
}

#[tokio::test]
async fn a_list_cut_anywhere_inside_is_an_error_never_a_short_list() {
    // The body ends with the envelope's empty contentEncoding and contentType (4 bytes): cut
    // there the list itself is whole.
    let list_end = LIST.len() - 4;
    assert_eq!(&LIST[list_end..], &[0x1a, 0x00, 0x22, 0x00]);
    for cut in 0..list_end {
        let (_, end, _) = read_list(&LIST[..cut]).await;
        assert!(
            matches!(end, Err(ProtoError::Truncated)),
            "cut at {cut}: {end:?}"
        );
    }
    let (items, end, _) = read_list(&LIST[..list_end]).await;
    assert!(end.is_ok() && items.len() == 3);
}

#[tokio::test]
async fn a_json_body_is_not_read_as_protobuf() {
    let (_, end, _) = read_list(LIST_ERROR).await;
    assert!(matches!(end, Err(ProtoError::NoMagic)), "{end:?}");
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        "application/json".parse().unwrap(),
    );
    assert!(!is_protobuf(&headers));
    for protobuf in [
        "application/vnd.kubernetes.protobuf",
        "application/vnd.kubernetes.protobuf;stream=watch",
    ] {
        headers.insert(http::header::CONTENT_TYPE, protobuf.parse().unwrap());
        assert!(is_protobuf(&headers));
    }
}

async fn events(body: &'static [u8]) -> Vec<Result<MetaEvent, kube::Error>> {
    protobuf_events(body).collect().await
}

#[tokio::test]
async fn a_captured_watch_gives_its_events_then_the_bookmark() {
    let events = events(WATCH).await;
    let mut kinds = Vec::new();
    let mut last_rv = 0u64;
    for event in &events {
        let (kind, rv) = match event {
            Ok(MetaEvent::Added(m)) => ("ADDED", m.resource_version.clone()),
            Ok(MetaEvent::Modified(m)) => ("MODIFIED", m.resource_version.clone()),
            Ok(MetaEvent::Deleted(m)) => ("DELETED", m.resource_version.clone()),
            Ok(MetaEvent::Bookmark(rv)) => ("BOOKMARK", Some(rv.clone())),
            other => panic!("unexpected {other:?}"),
        };
        if let Ok(MetaEvent::Added(m) | MetaEvent::Modified(m) | MetaEvent::Deleted(m)) = event {
            assert_eq!(m.name.as_deref(), Some("added"));
        }
        let rv: u64 = rv.expect("a resourceVersion").parse().unwrap();
        assert!(rv >= last_rv, "versions only grow: {rv} after {last_rv}");
        last_rv = rv;
        kinds.push(kind);
    }
    assert_eq!(&kinds[..3], ["ADDED", "MODIFIED", "DELETED"]);
    assert!(kinds[3..].iter().all(|k| *k == "BOOKMARK") && kinds.len() > 3);
}

#[tokio::test]
async fn an_error_event_is_the_servers_status_so_a_410_relists() {
    let events = events(WATCH_GONE).await;
    let [Ok(MetaEvent::Error(status))] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(status.code, 410);
    assert_eq!(status.reason, "Expired");
    assert_eq!(status.status, Some(StatusSummary::Failure));
    assert!(status.message.contains("too old"), "{}", status.message);
}

#[tokio::test]
async fn a_truncated_frame_is_an_error_not_an_event() {
    // The first frame whole, the second cut after its length prefix and a few bytes.
    let first = u32::from_be_bytes(WATCH[..4].try_into().unwrap()) as usize + 4;
    let cut: &'static [u8] = &WATCH[..first + 10];
    let events = events(cut).await;
    assert!(matches!(events[0], Ok(MetaEvent::Added(_))), "{events:?}");
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        matches!(&events[1], Err(kube::Error::ReadEvents(_))),
        "{events:?}"
    );
    // A frame whose bytes are all there but are not a watch event is an error too.
    let mut garbled = WATCH[..first].to_vec();
    garbled[first - 20..].fill(0xff);
    let garbled: &'static [u8] = Box::leak(garbled.into_boxed_slice());
    let events = self::events(garbled).await;
    assert!(
        matches!(&events[..], [Err(kube::Error::ReadEvents(_))]),
        "{events:?}"
    );
}

#[test]
fn a_list_error_is_the_servers_status_whatever_the_accept() {
    let status = error_status(504, false, LIST_ERROR);
    assert_eq!(status.code, 504);
    assert_eq!(status.reason, "Timeout");
    // A body that is no Status keeps the HTTP code.
    let status = error_status(503, false, b"upstream connect error");
    assert_eq!(status.code, 503);
    assert!(status.message.contains("upstream connect error"));
    // A protobuf Status, as an ERROR event carries one.
    let frame = &WATCH_GONE[4..];
    let event = pb::WatchEvent::decode(frame).unwrap();
    let raw = event.object.unwrap().raw.unwrap();
    let status = error_status(410, true, &raw);
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
}
