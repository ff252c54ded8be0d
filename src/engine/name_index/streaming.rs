//! One kind's watch as a single request: a streaming list (`sendInitialEvents`, Kubernetes'
//! WatchList feature) delivers the kind's objects and then its changes on one watch, where a list
//! and then a watch take two requests. At a restart every cluster-scoped kind is watched at once,
//! through the rate limit the first deletes wait behind: this halves what they wait for (issue
//! #52: 33 kinds, 1.6 s at 20 qps).
//!
//! The request leaves `resourceVersion` unset, which the API server serves as a consistent read:
//! the snapshot is at least as new as etcd was when the request was sent, so the epoch argument
//! of the module above holds, and the bookmark that ends the snapshot names its exact revision.
//! (kube's own `watcher` sends `resourceVersion=0` here, "any" cache state, which would not.)
//!
//! Only where the server serves it: [`serves_streaming_lists`] reads the version (a server before
//! 1.27 ignores the parameter and would never end the snapshot), and a server that refuses it
//! (the feature gate off) answers 400 or 422 at once, after which the caller lists and watches.

use super::{NameIndex, entry};
use futures::{Stream, StreamExt};
use kube::Api;
use kube::api::{DynamicObject, PartialObjectMeta, WatchEvent, WatchParams};
use std::collections::BTreeMap;
use std::time::Duration;

/// The annotation on the bookmark that ends a streaming list's snapshot.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Server-side timeout of each watch request (the API server's own default is 30 to 60 minutes,
/// kube's 290 s): a watch that ends is resumed from its last revision.
const WATCH_TIMEOUT_SECS: u32 = 290;

/// Whether a server of this version serves streaming lists by default. The WatchList gate is on
/// by default in 1.32 and from 1.34 (off in 1.27 to 1.31 and in 1.33, where a request with it is
/// refused, and unknown before 1.27, where the parameter is ignored).
pub fn serves_streaming_lists(major: &str, minor: &str) -> bool {
    let number = |s: &str| -> Option<u32> {
        s.trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .ok()
    };
    match (number(major), number(minor)) {
        (Some(1), Some(minor)) => minor == 32 || minor >= 34,
        (Some(major), Some(_)) => major > 1,
        _ => false,
    }
}

/// Why a streaming watch stopped for good: the server will not serve it; list and watch instead.
#[derive(Debug, thiserror::Error)]
#[error("the API server refuses streaming lists: {0}")]
pub struct Refused(#[source] pub kube::Error);

/// Why one streaming watch stopped (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
enum Failed {
    #[error(transparent)]
    Request(#[from] kube::Error),
    #[error("the watch sent an error: {0}")]
    Event(String),
    #[error("the watch ended before its snapshot did")]
    Early,
}

/// A request the server refused because of its parameters (400, 422): retrying cannot help.
fn is_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 400 || s.code == 422)
}

/// Keeps `key`'s entry of `index` current until the task is aborted; returns only if the server
/// refuses streaming lists, before anything was indexed.
pub async fn run(api: Api<DynamicObject>, key: &str, index: &NameIndex) -> Refused {
    let mut failures = 0u32;
    loop {
        let wp = WatchParams::streaming_lists().timeout(WATCH_TIMEOUT_SECS);
        let outcome = match api.watch_metadata(&wp, "").await {
            Ok(stream) => follow(&api, stream, key, index).await,
            Err(e) if is_refusal(&e) && failures == 0 => return Refused(e),
            Err(e) => Err(Failed::Request(e)),
        };
        match outcome {
            // Expired (410): a fresh snapshot, at once.
            Ok(()) => failures = 0,
            Err(failed) => {
                let reason = failed.to_string();
                tracing::debug!(%reason, "index watch failed; retrying with backoff");
                index.failing(key, reason);
                failures += 1;
                tokio::time::sleep(backoff(failures)).await;
            }
        }
    }
}

/// 0.8 s, doubling up to 25.6 s (kube's watcher backs off from 0.8 s to 30 s).
fn backoff(failures: u32) -> Duration {
    Duration::from_millis(800 << failures.clamp(1, 6).saturating_sub(1))
}

/// Reads one streaming watch: the snapshot (swapped in whole at its end), then changes, resuming
/// from the last revision whenever a watch request ends. Ok when the revision expired (410) and a
/// new snapshot is needed; Err with the reason when a request or the stream failed.
async fn follow(
    api: &Api<DynamicObject>,
    stream: impl Stream<Item = kube::Result<WatchEvent<PartialObjectMeta<DynamicObject>>>> + Send,
    key: &str,
    index: &NameIndex,
) -> Result<(), Failed> {
    let mut stream = stream.boxed();
    let mut snapshot = BTreeMap::new();
    let mut newest: Option<u64> = None;
    // The snapshot: objects, then the bookmark that ends it.
    let mut revision = loop {
        match stream.next().await {
            Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                newest = newest.max(revision_of(o.metadata.resource_version.as_deref()));
                snapshot.extend(entry(&o.metadata));
            }
            Some(Ok(WatchEvent::Deleted(_))) => {}
            Some(Ok(WatchEvent::Bookmark(b))) => {
                if b.metadata.annotations.contains_key(INITIAL_EVENTS_END) {
                    let at = revision_of(Some(&b.metadata.resource_version));
                    index.replaced(key, std::mem::take(&mut snapshot), at.max(newest));
                    break b.metadata.resource_version;
                }
            }
            Some(Ok(WatchEvent::Error(s))) if s.code == 410 => return Ok(()),
            Some(Ok(WatchEvent::Error(s))) => return Err(Failed::Event(s.message)),
            Some(Err(e)) => return Err(Failed::Request(e)),
            None => return Err(Failed::Early),
        }
    };
    // Changes, resumed from the last revision seen when a request ends (its timeout).
    loop {
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                    revision = o.metadata.resource_version.clone().unwrap_or(revision);
                    index.applied(key, &o.metadata);
                }
                Ok(WatchEvent::Deleted(o)) => {
                    revision = o.metadata.resource_version.clone().unwrap_or(revision);
                    index.removed(key, &o.metadata);
                }
                // A bookmark proves the kind current to its revision, events or not.
                Ok(WatchEvent::Bookmark(b)) => {
                    let at = revision_of(Some(&b.metadata.resource_version));
                    index.update(key, |k| k.seen = k.seen.max(at));
                    revision = b.metadata.resource_version;
                }
                Ok(WatchEvent::Error(s)) if s.code == 410 => return Ok(()),
                Ok(WatchEvent::Error(s)) => return Err(Failed::Event(s.message)),
                Err(e) => return Err(Failed::Request(e)),
            }
        }
        // Bookmarks are on by default.
        let wp = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
        stream = match api.watch_metadata(&wp, &revision).await {
            Ok(s) => s.boxed(),
            Err(kube::Error::Api(s)) if s.code == 410 => return Ok(()),
            Err(e) => return Err(Failed::Request(e)),
        };
    }
}

fn revision_of(rv: Option<&str>) -> Option<u64> {
    rv?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_lists_are_used_only_where_the_server_serves_them_by_default() {
        let table = [
            ("1", "36", true),
            ("1", "34", true),
            ("1", "33", false), // the gate went back off for one release
            ("1", "32", true),
            ("1", "31+", false), // alpha, off: the server refuses the parameter
            ("1", "20", false),  // before 1.27 the parameter is ignored: never use it there
            ("2", "0", true),
            ("", "", false),
            ("v1", "x", false),
        ];
        for (major, minor, want) in table {
            assert_eq!(
                serves_streaming_lists(major, minor),
                want,
                "{major}.{minor}"
            );
        }
    }

    #[test]
    fn only_a_parameter_refusal_stops_streaming() {
        let api = |code: u16| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..Default::default()
            }))
        };
        assert!(is_refusal(&api(422)) && is_refusal(&api(400)));
        for code in [403, 429, 500, 503] {
            assert!(!is_refusal(&api(code)), "{code}");
        }
    }

    #[test]
    fn the_backoff_doubles_up_to_about_half_a_minute() {
        let secs: Vec<f64> = (1..=8).map(|n| backoff(n).as_secs_f64()).collect();
        assert_eq!(secs, vec![0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 25.6, 25.6]);
    }
}
