//! One metadata watch request and its events, in protobuf when the server answers protobuf
//! (length-prefixed frames, [`proto::watch_event`]) and in JSON lines otherwise.

use super::proto::{self, MetaEvent};
use super::response;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use kube::Client;
use kube::api::{DynamicObject, PartialObjectMeta, WatchParams};
use tokio::io::AsyncRead;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec, LinesCodec, LinesCodecError};
use tokio_util::io::StreamReader;

/// Watches `url` (a resource's collection path) from `version`.
pub async fn watch(
    client: &Client,
    url: &str,
    params: &WatchParams,
    version: &str,
) -> Result<BoxStream<'static, Result<MetaEvent, kube::Error>>, kube::Error> {
    let mut request = kube::core::Request::new(url)
        .watch_metadata(params, version)
        .map_err(kube::Error::BuildRequest)?;
    // As kube does for its watches: a gzip middleware would decode only a stream's first member.
    request.headers_mut().insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    let response = response::send(client, request, proto::WATCH_ACCEPT).await?;
    let protobuf = proto::is_protobuf(response.headers());
    tracing::debug!(protobuf, "watch answered");
    let bytes = StreamReader::new(response.into_body().into_data_stream().map_err(|e| {
        // A connection that ends inside a chunk ends the watch, which resumes from the last
        // version seen (kube's reading of the same error).
        if e.to_string().contains("unexpected EOF during chunk") {
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, e)
        } else {
            std::io::Error::other(e)
        }
    }));
    Ok(if protobuf {
        protobuf_events(bytes).boxed()
    } else {
        json_events(bytes).boxed()
    })
}

/// Events of a protobuf watch body: 4-byte big-endian lengths, each followed by one event.
pub fn protobuf_events(
    bytes: impl AsyncRead + Send + 'static,
) -> impl futures::Stream<Item = Result<MetaEvent, kube::Error>> + Send {
    let codec = LengthDelimitedCodec::builder()
        .big_endian()
        .length_field_length(4)
        .max_frame_length(proto::MAX_MESSAGE)
        .new_codec();
    FramedRead::new(bytes, codec).filter_map(|frame| async move {
        match frame {
            Ok(frame) => Some(proto::watch_event(&frame).map_err(|e| {
                kube::Error::ReadEvents(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            })),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => None,
            // Includes a body that ends inside a frame ("bytes remaining on stream").
            Err(e) => Some(Err(kube::Error::ReadEvents(e))),
        }
    })
}

type JsonEvent = kube::api::WatchEvent<PartialObjectMeta<DynamicObject>>;

/// Events of a JSON watch body, one per line, read as kube reads them.
fn json_events(
    bytes: impl AsyncRead + Send + 'static,
) -> impl futures::Stream<Item = Result<MetaEvent, kube::Error>> + Send {
    FramedRead::new(bytes, LinesCodec::new()).filter_map(|line| async move {
        match line {
            Ok(line) => match serde_json::from_str::<JsonEvent>(&line) {
                Ok(event) => Some(Ok(match event {
                    JsonEvent::Added(o) => MetaEvent::Added(o.metadata),
                    JsonEvent::Modified(o) => MetaEvent::Modified(o.metadata),
                    JsonEvent::Deleted(o) => MetaEvent::Deleted(o.metadata),
                    JsonEvent::Bookmark(b) => MetaEvent::Bookmark(b.metadata.resource_version),
                    JsonEvent::Error(status) => MetaEvent::Error(status),
                })),
                // The last line of a body cut short.
                Err(e) if e.is_eof() => None,
                Err(e) => Some(Err(match serde_json::from_str(&line) {
                    Ok(status) => kube::Error::Api(Box::new(status)),
                    Err(_) => kube::Error::SerdeError(e),
                })),
            },
            Err(LinesCodecError::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::TimedOut
                ) =>
            {
                None
            }
            Err(LinesCodecError::Io(e)) => Some(Err(kube::Error::ReadEvents(e))),
            Err(LinesCodecError::MaxLineLengthExceeded) => {
                Some(Err(kube::Error::LinesCodecMaxLineLengthExceeded))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_json_watch_is_read_as_kube_reads_it() {
        // What a server that answers JSON sends: one event per line, the last one cut short.
        let body: &'static [u8] = br#"{"type":"ADDED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"5","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"u0"}]}}}
{"type":"BOOKMARK","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"9"}}}
{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (9)","reason":"Expired","code":410}}
{"type":"DELETED","obj"#;
        let events: Vec<_> = json_events(body).collect().await;
        assert_eq!(events.len(), 3, "{events:?}");
        let Ok(MetaEvent::Added(meta)) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(meta.owner_references.as_ref().unwrap()[0].uid, "u0");
        assert!(matches!(&events[1], Ok(MetaEvent::Bookmark(rv)) if rv == "9"));
        assert!(matches!(&events[2], Ok(MetaEvent::Error(s)) if s.code == 410));
    }
}
