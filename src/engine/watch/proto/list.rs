//! A protobuf `PartialObjectMetadataList` read item by item while the body arrives.
//!
//! prost decodes a message from a buffer that holds all of it, and a list is one message as large
//! as the body (the envelope's `raw` field): decoding it whole would hold the body and every
//! decoded item at once (100,000 objects' metadata, managedFields included). So only the two outer
//! levels, the `runtime.Unknown` envelope and the list, are walked field by field, with prost's
//! own key and varint readers; every message inside them (typeMeta, the list's metadata, each
//! item) is decoded by prost from its own bytes, and one item's bytes are held at a time.

use super::{MAGIC, MAX_MESSAGE, ProtoError, object_meta};
use futures::{AsyncRead, AsyncReadExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb;
use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
use prost::Message;
use prost::encoding::{WireType, decode_key, decode_varint};

/// Field numbers: `runtime.Unknown.typeMeta` and `.raw`; `PartialObjectMetadataList.metadata`
/// and `.items` (k8s.io/apimachinery's generated.proto).
const ENVELOPE_TYPE_META: u32 = 1;
const ENVELOPE_RAW: u32 = 2;
const LIST_METADATA: u32 = 1;
const LIST_ITEMS: u32 = 2;

enum State {
    Start,
    /// Between the envelope's fields; true once the list has been read.
    Envelope(bool),
    /// Inside the envelope's `raw` (the list): how many of its bytes are still to come.
    List(u64),
    Done,
}

/// Reads the list in `reader`; [`ListReader::next`] gives one item at a time.
pub struct ListReader<R> {
    reader: R,
    state: State,
    buf: Vec<u8>,
    resource_version: Option<String>,
}

impl<R: AsyncRead + Unpin> ListReader<R> {
    pub fn new(reader: R) -> Self {
        ListReader {
            reader,
            state: State::Start,
            buf: Vec::new(),
            resource_version: None,
        }
    }

    /// The list's `metadata.resourceVersion`, once read (the server sends it before the items).
    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    /// The next item's metadata; `None` at the end of a complete body. A body that ends inside
    /// the list is [`ProtoError::Truncated`], never a short list.
    pub async fn next(&mut self) -> Result<Option<ObjectMeta>, ProtoError> {
        loop {
            match self.state {
                State::Start => {
                    let mut magic = [0u8; 4];
                    self.read_exact_into(&mut magic).await?;
                    if &magic != MAGIC {
                        return Err(ProtoError::NoMagic);
                    }
                    self.state = State::Envelope(false);
                }
                State::Envelope(listed) => self.envelope_field(listed).await?,
                State::List(0) => self.state = State::Envelope(true),
                State::List(remaining) => {
                    if let Some(meta) = self.list_field(remaining).await? {
                        return Ok(Some(object_meta(meta)));
                    }
                }
                State::Done => return Ok(None),
            }
        }
    }

    /// Reads one of the envelope's fields: the list (entered, not read), or its typeMeta
    /// (checked), or another (skipped). The end of the body between two of the envelope's fields
    /// is its end, once the list is in.
    async fn envelope_field(&mut self, listed: bool) -> Result<(), ProtoError> {
        let Some((tag, wire, _)) = self.key(true).await? else {
            if !listed {
                return Err(ProtoError::Truncated);
            }
            self.state = State::Done;
            return Ok(());
        };
        match (tag, wire) {
            (ENVELOPE_RAW, WireType::LengthDelimited) => {
                let (len, _) = self.varint().await?;
                self.state = State::List(len);
            }
            (ENVELOPE_TYPE_META, WireType::LengthDelimited) => {
                self.message().await?;
                let meta =
                    TypeMeta::decode(&self.buf[..]).map_err(|source| ProtoError::Decode {
                        what: "the envelope's typeMeta",
                        source,
                    })?;
                match meta.kind.as_deref().unwrap_or("") {
                    "PartialObjectMetadataList" | "" => {}
                    other => {
                        return Err(ProtoError::Kind {
                            expected: "PartialObjectMetadataList",
                            got: other.to_string(),
                        });
                    }
                }
            }
            (_, wire) => {
                self.skip(wire).await?;
            }
        }
        Ok(())
    }

    /// Reads one of the list's fields, `remaining` bytes of the list still to come: an item
    /// (returned), the list's metadata (its resourceVersion kept), or another (skipped).
    async fn list_field(&mut self, remaining: u64) -> Result<Option<pb::ObjectMeta>, ProtoError> {
        let Some((tag, wire, key_len)) = self.key(false).await? else {
            return Err(ProtoError::Truncated);
        };
        let (field_len, item) = match (tag, wire) {
            (LIST_ITEMS, WireType::LengthDelimited) => {
                let n = self.message().await?;
                let item = pb::PartialObjectMetadata::decode(&self.buf[..]).map_err(|source| {
                    ProtoError::Decode {
                        what: "a PartialObjectMetadata",
                        source,
                    }
                })?;
                (n, Some(item.metadata.unwrap_or_default()))
            }
            (LIST_METADATA, WireType::LengthDelimited) => {
                let n = self.message().await?;
                let meta =
                    pb::ListMeta::decode(&self.buf[..]).map_err(|source| ProtoError::Decode {
                        what: "the list's metadata",
                        source,
                    })?;
                self.resource_version = meta.resource_version;
                (n, None)
            }
            (_, wire) => (self.skip(wire).await?, None),
        };
        let used = key_len + field_len;
        let Some(left) = remaining.checked_sub(used) else {
            return Err(ProtoError::Kind {
                expected: "a field inside the list",
                got: format!("one running {} bytes past its end", used - remaining),
            });
        };
        self.state = State::List(left);
        Ok(item)
    }

    /// The bytes of one varint, as they come (`n` of the 10 at most). `Ok(None)` only when
    /// `eof_ok` and the body ends before its first byte.
    async fn varint_bytes(
        &mut self,
        eof_ok: bool,
    ) -> Result<Option<([u8; 10], usize)>, ProtoError> {
        let mut bytes = [0u8; 10];
        for i in 0..bytes.len() {
            let mut byte = [0u8; 1];
            if self.reader.read(&mut byte).await? == 0 {
                return if i == 0 && eof_ok {
                    Ok(None)
                } else {
                    Err(ProtoError::Truncated)
                };
            }
            bytes[i] = byte[0];
            if byte[0] < 0x80 {
                return Ok(Some((bytes, i + 1)));
            }
        }
        // Ten bytes with the continuation bit: prost says what is wrong with them.
        Ok(Some((bytes, bytes.len())))
    }

    /// A varint: its value and its length in bytes.
    async fn varint(&mut self) -> Result<(u64, u64), ProtoError> {
        let (bytes, n) = self
            .varint_bytes(false)
            .await?
            .ok_or(ProtoError::Truncated)?;
        let value = decode_varint(&mut &bytes[..n]).map_err(|source| ProtoError::Decode {
            what: "a varint",
            source,
        })?;
        Ok((value, n as u64))
    }

    /// A field's key: tag, wire type, and the key's length in bytes.
    async fn key(&mut self, eof_ok: bool) -> Result<Option<(u32, WireType, u64)>, ProtoError> {
        let Some((bytes, n)) = self.varint_bytes(eof_ok).await? else {
            return Ok(None);
        };
        let (tag, wire) = decode_key(&mut &bytes[..n]).map_err(|source| ProtoError::Decode {
            what: "a field key",
            source,
        })?;
        Ok(Some((tag, wire, n as u64)))
    }

    /// A length-delimited field's bytes into `self.buf`; returns the bytes consumed (length
    /// prefix included).
    async fn message(&mut self) -> Result<u64, ProtoError> {
        let (len, prefix) = self.varint().await?;
        let size = usize::try_from(len)
            .ok()
            .filter(|n| *n <= MAX_MESSAGE)
            .ok_or(ProtoError::TooLarge(len))?;
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.resize(size, 0);
        let read = self.read_exact_into(&mut buf).await;
        self.buf = buf;
        read?;
        Ok(prefix + len)
    }

    /// Skips a field the reader does not need; returns the bytes consumed. Every field of the
    /// envelope and of the list is length-delimited or a varint: anything else is a broken body.
    async fn skip(&mut self, wire: WireType) -> Result<u64, ProtoError> {
        match wire {
            WireType::Varint => Ok(self.varint().await?.1),
            WireType::LengthDelimited => {
                let (len, prefix) = self.varint().await?;
                let skipped =
                    futures::io::copy((&mut self.reader).take(len), &mut futures::io::sink())
                        .await?;
                if skipped < len {
                    return Err(ProtoError::Truncated);
                }
                Ok(prefix + len)
            }
            other => Err(ProtoError::WireType(other as u64)),
        }
    }

    async fn read_exact_into(&mut self, buf: &mut [u8]) -> Result<(), ProtoError> {
        self.reader.read_exact(buf).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                ProtoError::Truncated
            } else {
                ProtoError::Io(e)
            }
        })
    }
}
