//! The scheduled scan's part of `/status` and `sweeper status`: a short summary of the last
//! report and the last error, never the report itself (`sweeper scan` prints that).

use crate::external::commands::scan::LeakReport;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How many of a report's uncovered parts the summary repeats (the log has them all).
const UNCOVERED_SHOWN: usize = 5;

/// `/status`'s `scan` field: present only while `--scan-interval` is set.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ScanStatus {
    pub interval_seconds: u64,
    /// The last scan that produced a report on this replica (none yet, or a standby: `null`).
    pub last: Option<ScanSummary>,
    /// The last failed scan since then (a success clears it).
    pub last_error: Option<ScanFailure>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ScanSummary {
    /// When it ended, RFC 3339.
    pub finished: String,
    pub seconds: f64,
    /// (account, region) pairs scanned.
    pub regions: usize,
    /// Distinct cluster names with orphaned resources, in any region.
    pub orphan_names: usize,
    pub orphan_resources: usize,
    pub dollars_per_month: f64,
    /// Orphaned resources with no price (the dollars are a lower bound when this is not 0).
    pub unpriced: usize,
    /// Parts not covered, the first few of them.
    pub uncovered: Vec<String>,
    pub uncovered_total: usize,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ScanFailure {
    /// When it failed, RFC 3339.
    pub at: String,
    pub error: String,
}

/// The summary of a report that ended at `finished` after `took`.
pub fn summary(report: &LeakReport, finished: String, took: Duration) -> ScanSummary {
    let candidates = report.regions.iter().flat_map(|r| &r.candidates);
    ScanSummary {
        finished,
        seconds: took.as_secs_f64(),
        regions: report.regions.len(),
        orphan_names: candidates
            .clone()
            .map(|c| c.cluster.as_str())
            .collect::<BTreeSet<_>>()
            .len(),
        orphan_resources: candidates.flat_map(|c| c.resources_by_kind.values()).sum(),
        dollars_per_month: report.total.dollars_per_month,
        unpriced: report.total.unknown,
        uncovered: report
            .errors
            .iter()
            .take(UNCOVERED_SHOWN)
            .cloned()
            .collect(),
        uncovered_total: report.errors.len(),
    }
}

/// The scan's status as the schedule updates it and `/status` reads it (clones share it).
#[derive(Clone, Default)]
pub struct LastScan(Arc<Mutex<Option<ScanStatus>>>);

impl LastScan {
    /// The schedule is on, every `interval`: `/status` shows it from now on.
    pub fn scheduled(interval: Duration) -> LastScan {
        LastScan(Arc::new(Mutex::new(Some(ScanStatus {
            interval_seconds: interval.as_secs(),
            ..Default::default()
        }))))
    }

    /// `None` while the schedule is off.
    pub fn get(&self) -> Option<ScanStatus> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn succeeded(&self, s: ScanSummary) {
        if let Some(status) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            status.last = Some(s);
            status.last_error = None;
        }
    }

    pub fn failed(&self, at: String, error: String) {
        if let Some(status) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            status.last_error = Some(ScanFailure { at, error });
        }
    }
}

/// `sweeper status`'s lines for the scan.
pub fn render(s: &ScanStatus) -> String {
    let mut out = format!("leak scan: every {}s; ", s.interval_seconds);
    match &s.last {
        None => out.push_str("no report on this replica yet (only the leader scans)"),
        Some(l) => {
            out.push_str(&format!(
                "last report {} ({:.1}s): {} orphaned resources of {} cluster names in {} account-regions, ~${:.2}/month",
                l.finished,
                l.seconds,
                l.orphan_resources,
                l.orphan_names,
                l.regions,
                l.dollars_per_month
            ));
            if l.unpriced > 0 {
                out.push_str(&format!(" (+{} unpriced)", l.unpriced));
            }
            out.push_str("; `sweeper scan` lists them");
            if l.uncovered_total > 0 {
                out.push_str(&format!("\n  not covered ({}):", l.uncovered_total));
                for u in &l.uncovered {
                    out.push_str(&format!("\n    {u}"));
                }
                if l.uncovered_total > l.uncovered.len() {
                    out.push_str("\n    ... (the log has every one)");
                }
            }
        }
    }
    if let Some(e) = &s.last_error {
        out.push_str(&format!(
            "\n  last scan failed at {} (the numbers above are older): {}",
            e.at, e.error
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_the_last_report_and_a_success_clears_the_error() {
        let last = LastScan::scheduled(Duration::from_secs(3600));
        assert_eq!(
            render(&last.get().unwrap()),
            "leak scan: every 3600s; no report on this replica yet (only the leader scans)"
        );
        last.succeeded(ScanSummary {
            finished: "2026-11-27T08:00:00Z".into(),
            seconds: 2.5,
            regions: 6,
            orphan_names: 2,
            orphan_resources: 9,
            dollars_per_month: 41.5,
            unpriced: 1,
            uncovered: vec!["region x: denied".into()],
            uncovered_total: 1,
        });
        last.failed(
            "2026-11-27T09:00:00Z".into(),
            "cannot list AWSCluster".into(),
        );
        let s = last.get().unwrap();
        // The CLI reads it back from JSON.
        let wire: ScanStatus = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(wire, s);
        let text = render(&wire);
        assert!(
            text.contains("9 orphaned resources of 2 cluster names in 6 account-regions, ~$41.50/month (+1 unpriced)")
                && text.contains("not covered (1):\n    region x: denied")
                && text.contains("last scan failed at 2026-11-27T09:00:00Z (the numbers above are older): cannot list AWSCluster"),
            "{text}"
        );
        last.succeeded(ScanSummary::default());
        assert_eq!(last.get().unwrap().last_error, None);
        assert_eq!(LastScan::default().get(), None, "off: no scan field");
    }
}
