//! `sweeper run --scan-interval`: the leak scan inside the service, run by the external-only
//! install's service account, so its narrow role is proven to cover what the scan reads (every
//! namespace's AWSClusters and AWSManagedControlPlanes, sweeper's namespace, identities).
//! LocalStack serves no EKS, so a region here may be reported as not covered: the test asserts
//! the schedule's wiring (leader, status, metrics), not the orphans (services/tests/aws_teardown/
//! scan.rs proves those, with EKS mocked).

mod support;

use std::time::{Duration, Instant};
use support::TestScope;
use support::sweeper::Sweeper;

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn the_leader_scans_at_once_and_reports_in_status_and_metrics() {
    let s = TestScope::new("scansvc").await;
    let gc = Sweeper::start_external_only_scoped(&s, &["--scan-interval", "1m"]).await;
    // The first scan starts when the replica leads (at once without leader election).
    let deadline = Instant::now() + Duration::from_secs(90);
    let scan = loop {
        let (code, body) = gc.get("/status").await;
        assert_eq!(code, 200, "{body}");
        let status: serde_json::Value = serde_json::from_str(&body).expect("/status is JSON");
        assert_eq!(status["scan"]["interval_seconds"], 60, "{body}");
        if !status["scan"]["last"].is_null() || !status["scan"]["last_error"].is_null() {
            break status["scan"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "no scan reported within 90 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(scan["last_error"].is_null(), "the scan failed: {scan}");
    let last = &scan["last"];
    let regions = last["regions"].as_u64().unwrap_or_default();
    let uncovered = last["uncovered_total"].as_u64().unwrap_or_default();
    // sweeper's own default region is always a target: scanned, or said not to be.
    assert!(regions + uncovered >= 1, "{scan}");
    assert!(
        gc.metric("sweeper_scan_last_success_timestamp_seconds")
            .await
            > 0.0
    );
    assert_eq!(gc.metric("sweeper_scan_errors_total").await, 0.0);
    assert_eq!(
        gc.metric("sweeper_scan_uncovered_parts").await,
        uncovered as f64
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sweeper"))
        .args(["status", "--server", &gc.base])
        .output()
        .expect("sweeper status runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("leak scan: every 60s; last report"),
        "{text}"
    );
}
