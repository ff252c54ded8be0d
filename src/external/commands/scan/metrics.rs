//! The scheduled scan's metrics (`sweeper run --scan-interval`): the orphans of the last
//! successful scan as gauges, and the scan's own health as `sweeper_scan_*`.
//!
//! The gauges are the last successful scan's, set all at once: a label set the newer scan no
//! longer has (the orphans were torn down, a region is no longer reached) is removed, never left
//! at its old value. A failed scan changes none of them; `sweeper_scan_errors_total` and the age
//! of `sweeper_scan_last_success_timestamp_seconds` say the values are getting old.

use crate::external::commands::scan::LeakReport;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OrphanKindLabels {
    pub account: String,
    pub region: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OrphanRegionLabels {
    pub account: String,
    pub region: String,
}

/// What one report sets: orphaned resources by (account, region, kind), only kinds it found;
/// estimated dollars per month by (account, region), for every (account, region) scanned, 0
/// when clean (a clean region is a zero on the dashboard, not a gap).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OrphanGauges {
    pub resources: BTreeMap<(String, String, String), i64>,
    pub cost: BTreeMap<(String, String), f64>,
}

/// The gauges a report sets. Only orphan candidates count: names held back (not ours, a live
/// EKS cluster) are not orphans and are left out.
pub fn gauges(report: &LeakReport) -> OrphanGauges {
    let mut g = OrphanGauges::default();
    for r in &report.regions {
        let cost = g
            .cost
            .entry((r.account.clone(), r.region.clone()))
            .or_default();
        for c in &r.candidates {
            *cost += c.cost.dollars_per_month;
            for (kind, n) in &c.resources_by_kind {
                *g.resources
                    .entry((r.account.clone(), r.region.clone(), kind.clone()))
                    .or_default() += i64::try_from(*n).unwrap_or(i64::MAX);
            }
        }
    }
    g
}

/// `sweeper_orphan_*` and `sweeper_scan_*`. Registered always (the schedule off, or this replica
/// a standby): the families are there with no series, and the timestamp is 0.
#[derive(Clone, Default)]
pub struct ScanMetrics {
    pub orphan_resources: Family<OrphanKindLabels, Gauge>,
    pub orphan_cost: Family<OrphanRegionLabels, Gauge<f64, AtomicU64>>,
    /// When the last scan that produced a report ended (Unix seconds; 0: none yet).
    pub last_success: Gauge,
    /// How long that scan took.
    pub last_duration: Gauge<f64, AtomicU64>,
    /// Scans that produced no report (the live clusters could not be listed, or the scan ran
    /// past its interval): the gauges kept the previous values.
    pub errors: Counter,
    /// Parts of the accounts the last report does not cover: sessions not built, regions not
    /// scanned, objects not decoded. Their orphans are missing from the gauges.
    pub uncovered: Gauge,
    /// 1 when the last scan failed, 0 once one succeeds: with `interval` and `last_success`,
    /// what the shipped alert `SweeperScanStale` reads.
    pub last_failed: Gauge,
    /// `--scan-interval` in seconds on the replica that scans (0: off, or a standby).
    pub interval: Gauge,
    /// The label sets set now, so the next report removes those it lacks.
    applied: Arc<Mutex<OrphanGauges>>,
}

impl ScanMetrics {
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "orphan_resources",
            "AWS resources tagged for a cluster name with no live cluster, by account, region and kind, as of the last successful scan (--scan-interval)",
            self.orphan_resources.clone(),
        );
        r.register(
            "orphan_cost_dollars_per_month",
            "Estimated monthly cost of the orphaned resources, by account and region (0: scanned, none found), as of the last successful scan; unpriced resources count 0",
            self.orphan_cost.clone(),
        );
        let r = r.sub_registry_with_prefix("scan");
        r.register(
            "last_success_timestamp_seconds",
            "When the last successful leak scan ended, Unix seconds (0: none yet on this replica)",
            self.last_success.clone(),
        );
        r.register(
            "duration_seconds",
            "How long the last successful leak scan took",
            self.last_duration.clone(),
        );
        r.register(
            "errors",
            "Leak scans that failed (no report; the orphan gauges keep the previous scan's values)",
            self.errors.clone(),
        );
        r.register(
            "last_failed",
            "1 when the last leak scan failed (no report), 0 once one succeeds",
            self.last_failed.clone(),
        );
        r.register(
            "interval_seconds",
            "The leak scan's --scan-interval on the replica that scans (0: off or standing by)",
            self.interval.clone(),
        );
        r.register(
            "uncovered_parts",
            "Parts the last leak scan could not cover (a session not built, a region not scanned, an object not decoded)",
            self.uncovered.clone(),
        );
    }

    /// Sets the orphan gauges to `g`, removing every label set `g` lacks.
    pub fn apply(&self, g: &OrphanGauges) {
        let mut applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
        for ((account, region, kind), n) in &g.resources {
            self.orphan_resources
                .get_or_create(&kind_labels(account, region, kind))
                .set(*n);
        }
        for (account, region, kind) in applied.resources.keys() {
            if !g
                .resources
                .contains_key(&(account.clone(), region.clone(), kind.clone()))
            {
                self.orphan_resources
                    .remove(&kind_labels(account, region, kind));
            }
        }
        for ((account, region), dollars) in &g.cost {
            self.orphan_cost
                .get_or_create(&region_labels(account, region))
                .set(*dollars);
        }
        for (account, region) in applied.cost.keys() {
            if !g.cost.contains_key(&(account.clone(), region.clone())) {
                self.orphan_cost.remove(&region_labels(account, region));
            }
        }
        *applied = g.clone();
    }
}

fn kind_labels(account: &str, region: &str, kind: &str) -> OrphanKindLabels {
    OrphanKindLabels {
        account: account.into(),
        region: region.into(),
        kind: kind.into(),
    }
}

fn region_labels(account: &str, region: &str) -> OrphanRegionLabels {
    OrphanRegionLabels {
        account: account.into(),
        region: region.into(),
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
