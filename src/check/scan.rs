//! The scheduled leak scan (`sweeper run --scan-interval`): has it succeeded lately?
//!
//! Only the leader scans, and its state lives in its memory; `sweeper check` runs elsewhere (a
//! terminal, `helm test`'s pod). So the leader publishes it as the annotation [`ANNOTATION`] on
//! the leader Lease it writes every retry period anyway ([`publisher`]): no call and no
//! permission beyond the Lease's own. The check reads the interval from it too, so a check not
//! told `--scan-interval` still judges a leader that scans.
//!
//! The rule is the `SweeperScanStale` alert's: the last success more than three intervals ago,
//! or a last scan that failed, fails. A leader publishes nothing until its first scan ends
//! (within one interval: a scan that overruns it fails) and keeps the previous leader's word
//! meanwhile; with the schedule off it removes the annotation.

use super::Line;
use crate::engine::leader::{LeaseNote, Note};
use crate::external::commands::scan::status::{LastScan, ScanFailure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The leader Lease's annotation with the scan's state ([`ScanState`] as JSON).
pub const ANNOTATION: &str = "sweeper.dev/scan-state";

const SCAN: &str = "scan";

/// An error longer than this is cut in the annotation (`sweeper status` has it whole).
const ERROR_CHARS: usize = 500;

/// What the leader says about its scheduled scan.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ScanState {
    pub interval_seconds: u64,
    /// When the last successful scan ended, RFC 3339.
    pub last_success: Option<String>,
    /// The last scan, when it failed (a success clears it).
    pub last_failure: Option<ScanFailure>,
}

/// The leader's note for its Lease: the state of `last` once a scan has ended.
pub fn publisher(last: LastScan) -> LeaseNote {
    LeaseNote {
        key: ANNOTATION,
        value: Arc::new(move || note(last.get().as_ref())),
    }
}

fn note(status: Option<&crate::external::commands::scan::status::ScanStatus>) -> Note {
    let Some(s) = status else {
        return Note::Remove;
    };
    if s.last.is_none() && s.last_error.is_none() {
        return Note::Keep;
    }
    let state = ScanState {
        interval_seconds: s.interval_seconds,
        last_success: s.last.as_ref().map(|l| l.finished.clone()),
        last_failure: s.last_error.as_ref().map(|e| ScanFailure {
            at: e.at.clone(),
            error: e.error.chars().take(ERROR_CHARS).collect(),
        }),
    };
    serde_json::to_string(&state).map_or(Note::Keep, Note::Set)
}

/// The scan's state on `lease`: `Ok(None)` when there is none, `Err` when it cannot be read
/// (the caller names the Lease and the annotation).
pub fn read(lease: Option<&Lease>) -> Result<Option<ScanState>, serde_json::Error> {
    let Some(raw) = lease
        .and_then(|l| l.metadata.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION))
    else {
        return Ok(None);
    };
    serde_json::from_str(raw).map(Some)
}

/// The scan line, from the published state (if any) and the interval the check was told
/// (`--scan-interval`; zero: not told), at `now`.
pub fn judge_scan(state: Option<&ScanState>, told: Duration, now: Timestamp) -> Line {
    let Some(s) = state else {
        if told.is_zero() {
            return Line::pass(
                SCAN,
                "not scheduled (no scan state on the leader Lease, and no --scan-interval)",
            );
        }
        return Line::warn(
            SCAN,
            format!(
                "--scan-interval {}s, but the leader Lease has no scan state: no scan has ended yet",
                told.as_secs()
            ),
            "the leader publishes it when its first scan ends, within one interval of leading; \
             is `sweeper run` given --scan-interval (Helm: scan.interval)? sweeper status",
        );
    };
    let every = s.interval_seconds.max(1);
    let limit = every.saturating_mul(3);
    let success = s.last_success.as_deref().map(|t| (t, age(t, now)));
    let since = match success {
        Some((t, Some(a))) => format!("last success {t} ({a}s ago)"),
        Some((t, None)) => format!("last success {t} (unreadable time)"),
        None => "no success yet".into(),
    };
    if let Some(f) = &s.last_failure {
        return Line::fail(
            SCAN,
            format!(
                "the last scan (every {every}s) failed at {}: {}; {since}",
                f.at, f.error
            ),
            "the orphan gauges are stale: sweeper status (the last error), and the leader's log \
             (`leak scan`): can it list AWSClusters, did the scan overrun its interval?",
        );
    }
    match success {
        Some((_, Some(a))) if a <= limit => Line::pass(SCAN, format!("every {every}s; {since}")),
        _ => Line::fail(
            SCAN,
            format!("every {every}s; {since}: older than three intervals ({limit}s)"),
            "does a replica lead (the leader line)? the leader's log (`leak scan`) and \
             sweeper status say why no scan ends",
        ),
    }
}

/// Seconds from `t` (RFC 3339) to `now`; `None` when `t` does not parse.
fn age(t: &str, now: Timestamp) -> Option<u64> {
    let t: Timestamp = t.parse().ok()?;
    Some(u64::try_from(now.duration_since(t).as_secs()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;
    use crate::external::commands::scan::status::ScanSummary;

    const NOW: &str = "2026-11-28T12:00:00Z";

    fn state(success: Option<&str>, failure: Option<&str>) -> ScanState {
        ScanState {
            interval_seconds: 3600,
            last_success: success.map(String::from),
            last_failure: failure.map(|at| ScanFailure {
                at: at.into(),
                error: "cannot list AWSCluster".into(),
            }),
        }
    }

    #[test]
    fn the_scan_line_by_its_state() {
        let now: Timestamp = NOW.parse().unwrap();
        let hour = Duration::from_secs(3600);
        let cases: &[(Option<ScanState>, Duration, Status, &str)] = &[
            (None, Duration::ZERO, Status::Pass, "not scheduled"),
            (None, hour, Status::Warn, "no scan has ended yet"),
            (
                Some(state(Some("2026-11-28T11:00:00Z"), None)),
                Duration::ZERO,
                Status::Pass,
                "every 3600s; last success 2026-11-28T11:00:00Z (3600s ago)",
            ),
            // Exactly three intervals is still fresh; one second more is not.
            (
                Some(state(Some("2026-11-28T09:00:00Z"), None)),
                hour,
                Status::Pass,
                "(10800s ago)",
            ),
            (
                Some(state(Some("2026-11-28T08:59:59Z"), None)),
                hour,
                Status::Fail,
                "older than three intervals (10800s)",
            ),
            (
                Some(state(
                    Some("2026-11-28T11:50:00Z"),
                    Some("2026-11-28T11:55:00Z"),
                )),
                hour,
                Status::Fail,
                "failed at 2026-11-28T11:55:00Z: cannot list AWSCluster; last success",
            ),
            (
                Some(state(None, Some("2026-11-28T11:55:00Z"))),
                Duration::ZERO,
                Status::Fail,
                "no success yet",
            ),
            (
                Some(state(Some("yesterday"), None)),
                hour,
                Status::Fail,
                "unreadable time",
            ),
        ];
        for (state, told, status, text) in cases {
            let line = judge_scan(state.as_ref(), *told, now);
            assert_eq!(line.category, "scan");
            assert_eq!(line.status, *status, "{state:?}: {line:?}");
            assert!(line.message.contains(text), "{state:?}: {line:?}");
            assert_eq!(line.hint.is_some(), *status != Status::Pass, "{line:?}");
        }
    }

    #[test]
    fn the_leader_publishes_once_a_scan_ended_and_removes_it_when_off() {
        assert_eq!(note(None), Note::Remove, "schedule off");
        let last = LastScan::scheduled(Duration::from_secs(600));
        assert_eq!(note(last.get().as_ref()), Note::Keep, "nothing to say yet");
        last.succeeded(ScanSummary {
            finished: NOW.into(),
            ..Default::default()
        });
        last.failed("2026-11-28T12:10:00Z".into(), "x".repeat(2000));
        let Note::Set(json) = (publisher(last).value)() else {
            panic!("a state to publish")
        };
        let mut lease = Lease::default();
        lease.metadata.annotations = Some([(ANNOTATION.to_string(), json)].into());
        let read = read(Some(&lease)).unwrap().unwrap();
        assert_eq!(read.interval_seconds, 600);
        assert_eq!(read.last_success.as_deref(), Some(NOW));
        let failure = read.last_failure.unwrap();
        assert_eq!(failure.at, "2026-11-28T12:10:00Z");
        assert_eq!(failure.error.len(), ERROR_CHARS, "cut for the annotation");
        assert!(read_of("{not json").is_err());
        assert!(matches!(super::read(None), Ok(None)));
    }

    fn read_of(raw: &str) -> Result<Option<ScanState>, serde_json::Error> {
        let mut lease = Lease::default();
        lease.metadata.annotations = Some([(ANNOTATION.to_string(), raw.to_string())].into());
        read(Some(&lease))
    }
}
