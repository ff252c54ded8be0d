//! `sweeper run --scan-interval`: `sweeper scan` on a schedule inside the service.
//!
//! Only the leader scans (`run` starts this with the collectors, after the lease is won, and
//! stops it with them): a scan deletes nothing, but every replica scanning would multiply its
//! AWS calls for the same answer. Its AWS sessions pass the lease's fence as well, so a replica
//! that lost the lease makes no call even before it stops. A standby exports the families with
//! no series; a new leader scans at once.
//!
//! `sweeper pause` does not stop it: it deletes nothing, so there is nothing to pause.
//!
//! A scan that produces a report sets the gauges (crate::external::commands::scan::metrics) and the
//! summary `/status` shows. One that fails (the live clusters cannot be listed, or it runs
//! longer than one interval) leaves them as they were, counts in `sweeper_scan_errors_total`,
//! is logged, and shows in `/status` as the last error: old numbers, said to be old, are more
//! use on a dashboard than none.

use crate::config::RunConfig;
use crate::engine::leader::Fence;
use crate::external::commands::scan::metrics::{ScanMetrics, gauges};
use crate::external::commands::scan::status::{LastScan, summary};
use crate::external::commands::scan::{
    LeakReport, LiveListError, ScanTargets, scan_with_annotation,
};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use sweeper_aws::session::SessionCache;
use tokio_util::sync::CancellationToken;

/// The schedule and what each scan covers beyond the live clusters.
#[derive(Clone, Debug)]
pub struct ScanSchedule {
    pub interval: Duration,
    /// `--scan-region`: regions scanned with sweeper's own identity too.
    pub regions: Vec<String>,
    /// `--scan-not-ours`, added to the annotation on `namespace` (read at every scan).
    pub not_ours: BTreeSet<String>,
    pub capa_namespace: String,
    /// Sweeper's own namespace, whose `sweeper.dev/scan-not-ours` annotation is read.
    pub namespace: String,
}

impl ScanSchedule {
    /// The schedule `--scan-interval` asks for; `None` when it is 0 (off).
    pub fn from_config(config: &RunConfig, namespace: &str) -> Option<ScanSchedule> {
        (!config.scan_interval.is_zero()).then(|| ScanSchedule {
            interval: config.scan_interval,
            regions: config.scan_regions.clone(),
            not_ours: config.scan_not_ours.iter().cloned().collect(),
            capa_namespace: config.capa_namespace.clone(),
            namespace: namespace.to_string(),
        })
    }

    /// Scans at once, then every interval (a scan that overruns delays the next, never doubles
    /// it), until `shutdown`.
    pub async fn run(
        self,
        client: kube::Client,
        fence: Fence,
        metrics: ScanMetrics,
        last: LastScan,
        shutdown: CancellationToken,
    ) {
        let sessions = SessionCache::new(
            sweeper_aws::load_config().await,
            Some(sweeper_aws::fence::AwsFence(Arc::new(move || {
                fence.permits()
            }))),
        );
        tracing::info!(
            interval_seconds = self.interval.as_secs(),
            "leak scan scheduled"
        );
        metrics
            .interval
            .set(i64::try_from(self.interval.as_secs()).unwrap_or(i64::MAX));
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let started = Instant::now();
            let outcome = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = tokio::time::timeout(self.interval, self.once(&client, &sessions)) => r,
            };
            let took = started.elapsed();
            match outcome {
                Ok(Ok(report)) => record_success(&report, took, &metrics, &last),
                Ok(Err(e)) => record_failure(e.to_string(), &metrics, &last),
                Err(_) => record_failure(
                    format!(
                        "the scan did not finish within its interval ({}s); it was stopped",
                        self.interval.as_secs()
                    ),
                    &metrics,
                    &last,
                ),
            }
        }
    }

    /// One scan, as `sweeper scan` runs it.
    #[tracing::instrument(name = "leak_scan", skip_all)]
    async fn once(
        &self,
        client: &kube::Client,
        sessions: &SessionCache,
    ) -> Result<LeakReport, LiveListError> {
        let targets = ScanTargets {
            regions: self.regions.clone(),
            capa_namespace: self.capa_namespace.clone(),
            not_ours: self.not_ours.clone(),
        };
        scan_with_annotation(client, sessions, &self.namespace, targets).await
    }
}

fn record_success(report: &LeakReport, took: Duration, metrics: &ScanMetrics, last: &LastScan) {
    let now = k8s_openapi::jiff::Timestamp::now();
    metrics.apply(&gauges(report));
    metrics.last_success.set(now.as_second());
    metrics.last_failed.set(0);
    metrics.last_duration.set(took.as_secs_f64());
    metrics
        .uncovered
        .set(i64::try_from(report.errors.len()).unwrap_or(i64::MAX));
    let s = summary(report, now.to_string(), took);
    tracing::info!(
        regions = s.regions,
        orphan_names = s.orphan_names,
        orphan_resources = s.orphan_resources,
        dollars_per_month = s.dollars_per_month,
        uncovered = s.uncovered_total,
        seconds = took.as_secs_f64(),
        "leak scan done (nothing deleted)"
    );
    for e in &report.errors {
        tracing::warn!(error = %e, "leak scan: a part not covered");
    }
    last.succeeded(s);
}

fn record_failure(error: String, metrics: &ScanMetrics, last: &LastScan) {
    metrics.errors.inc();
    metrics.last_failed.set(1);
    tracing::warn!(error = %error, "leak scan failed; the orphan gauges keep the previous scan's values");
    last.failed(k8s_openapi::jiff::Timestamp::now().to_string(), error);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn config(args: &[&str]) -> RunConfig {
        let argv = ["sweeper", "run"].iter().chain(args).copied();
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Run(a) => a.config,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_schedule_is_off_by_default_and_at_least_a_minute_apart() {
        let off = config(&[]);
        assert!(ScanSchedule::from_config(&off, "sweeper").is_none());
        assert_eq!(off.validate(), Ok(()));
        let err = config(&["--scan-interval", "30s"])
            .validate()
            .unwrap_err()
            .to_string();
        assert!(err.contains("--scan-interval"), "{err}");
        let on = config(&[
            "--scan-interval",
            "6h",
            "--scan-region",
            "eu-west-1,us-east-1",
            "--scan-not-ours",
            "theirs",
        ]);
        assert_eq!(on.validate(), Ok(()));
        let s = ScanSchedule::from_config(&on, "sweeper").unwrap();
        assert_eq!(s.interval, Duration::from_secs(6 * 3600));
        assert_eq!(s.regions, ["eu-west-1", "us-east-1"]);
        assert!(s.not_ours.contains("theirs") && s.namespace == "sweeper");
    }

    fn report(volumes: usize) -> LeakReport {
        let candidate = sweeper_aws::scan::OrphanCandidate {
            cluster: "old".into(),
            account: "111111111111".into(),
            region: "eu-west-1".into(),
            resources_by_kind: [("ec2:volume".to_string(), volumes)].into(),
            oldest: None,
            cost: Default::default(),
            recovery: Default::default(),
            also_named: Default::default(),
            resources: Vec::new(),
        };
        LeakReport {
            notice: "",
            prices_as_of: "",
            prices_source: "",
            regions: vec![sweeper_aws::scan::RegionScan {
                account: "111111111111".into(),
                region: "eu-west-1".into(),
                candidates: vec![candidate],
                held: Vec::new(),
                malformed: Vec::new(),
                unproven: Vec::new(),
                calls: Default::default(),
            }],
            not_ours: Default::default(),
            errors: vec!["region us-east-1: denied".into()],
            total: Default::default(),
            teardown_recovers: Default::default(),
            needs_person: Default::default(),
        }
    }

    #[test]
    fn a_failed_scan_keeps_the_last_report_and_counts() {
        let metrics = ScanMetrics::default();
        let last = LastScan::scheduled(Duration::from_secs(600));
        record_success(&report(3), Duration::from_secs(2), &metrics, &last);
        let set_at = metrics.last_success.get();
        assert!(set_at > 0);
        assert_eq!(metrics.last_failed.get(), 0);
        assert_eq!(metrics.uncovered.get(), 1);
        record_failure("cannot list AWSCluster".into(), &metrics, &last);
        assert_eq!(metrics.errors.get(), 1);
        assert_eq!(metrics.last_failed.get(), 1, "what the alert reads");
        assert_eq!(metrics.last_success.get(), set_at, "the last success stays");
        let labels = super::super::metrics::OrphanKindLabels {
            account: "111111111111".into(),
            region: "eu-west-1".into(),
            kind: "ec2:volume".into(),
        };
        assert_eq!(
            metrics.orphan_resources.get_or_create(&labels).get(),
            3,
            "the gauges keep the previous scan's values"
        );
        let status = last.get().unwrap();
        assert_eq!(status.last.as_ref().map(|l| l.orphan_resources), Some(3));
        assert_eq!(
            status.last_error.map(|e| e.error),
            Some("cannot list AWSCluster".to_string())
        );
    }
}
