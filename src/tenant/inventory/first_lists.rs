//! A restarted collector's first pass and the index's first lists (issue #52).
//!
//! At a restart the index starts one watch per cluster-scoped kind as soon as discovery answers,
//! and the first pass begins at the same moment. A kind whose first list is still running is not
//! answered by the index, so the pass listed it itself: every kind listed twice, through the one
//! rate limit the deletes need (about 32 more calls, 1.6 s at 20 qps, measured 3.5 s for the find
//! against 1.2 s when the index had synced). The pass now waits for the lists already in flight,
//! up to [`FIRST_LIST_WAIT`], and lists only what they have not answered by then. A kind whose
//! watch fails, or that is not watched at all, is not waited for: no list of it is coming.

use super::candidate_kinds;
use crate::engine::discovery::DeletableResource;
use crate::engine::name_index::{NameIndex, NotIndexed};
use crate::tenant::id::TenantId;
use std::time::Duration;

/// How long a pass waits for the index's first lists before it lists the kinds itself.
pub const FIRST_LIST_WAIT: Duration = Duration::from_secs(3);

/// Whether the index's answer for a kind is worth waiting for: only a first list in flight is.
pub fn in_flight(answer: &Result<(), &NotIndexed>) -> bool {
    matches!(answer, Err(NotIndexed::Listing(_)))
}

/// Until no kind the pass asks of the index has its first list in flight, or the wait is over.
pub async fn wait(
    index: &NameIndex,
    resources: &[DeletableResource],
    id: &TenantId,
    scan_kinds: &[String],
) {
    let deadline = tokio::time::Instant::now() + FIRST_LIST_WAIT;
    let asked: Vec<&DeletableResource> = candidate_kinds(resources, id)
        .into_iter()
        .chain(resources.iter().filter(|r| super::is_crd_kind(r)))
        .filter(|r| !scan_kinds.contains(&r.resource.plural))
        .collect();
    let started = std::time::Instant::now();
    loop {
        let pending = asked
            .iter()
            .filter(|r| {
                let answer = index.with_prefix(r, &id.prefix());
                in_flight(&answer.as_ref().map(|_| ()))
            })
            .count();
        if pending == 0 {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::debug!(
                pending,
                "the index's first lists are not done; listing those kinds"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let waited = started.elapsed();
    if waited >= Duration::from_millis(20) {
        tracing::debug!(
            ms = waited.as_millis() as u64,
            "waited for the index's first lists"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_first_list_in_flight_is_waited_for() {
        let failing = NotIndexed::Failing {
            resource: "r".into(),
            reason: "forbidden".into(),
        };
        let behind = NotIndexed::Behind {
            resource: "r".into(),
            since: 7,
            seen: Some(3),
        };
        let listing = NotIndexed::Listing("r".into());
        let unwatched = NotIndexed::NotWatched("r".into());
        let rows: [(Result<(), &NotIndexed>, bool, &str); 5] = [
            (Ok(()), false, "answered"),
            (Err(&listing), true, "its first list is coming"),
            (Err(&failing), false, "a failing watch sends no list soon"),
            (
                Err(&unwatched),
                false,
                "nothing will list an unwatched kind",
            ),
            (
                Err(&behind),
                false,
                "a synced kind answers find (freshness is confirm's)",
            ),
        ];
        for (answer, want, why) in rows {
            assert_eq!(in_flight(&answer), want, "{why}");
        }
    }
}
