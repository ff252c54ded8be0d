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

/// The shipped Lease (the external-only Role allows only this name in this namespace); the
/// collector tests run one at a time, and those that lead start by deleting it.
const LEASE_NS: &str = "sweeper-system";
const LEASE_NAME: &str = "sweeper";

/// `sweeper check -o json`'s scan line, as the admin runs it, told `extra` flags.
fn check_scan_line(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "check",
        "--feature-gates=CascadeGC=false,TenantGC=false,ExternalResourceGC=true",
        "--leader-elect",
        "--leader-elect-namespace",
        LEASE_NS,
        "--skip-aws",
        "-o",
        "json",
    ];
    args.extend(extra);
    let (_, out, err) = support::sweeper::cli(&args);
    let report: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let lines: Vec<&serde_json::Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["category"] == "scan")
        .collect();
    assert_eq!(lines.len(), 1, "one scan line: {report:#}");
    lines[0].clone()
}

/// The leader publishes its scan's state on the Lease, and `sweeper check` (another process,
/// another identity) judges it: ok after a scan, failed when the last success is older than
/// three intervals, "not scheduled" when there is no state and no interval.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn sweeper_check_reports_the_scheduled_scan_from_the_leader_lease() {
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Api, Patch, PatchParams};
    let s = TestScope::new("scancheck").await;
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), LEASE_NS);
    let _ = leases.delete(LEASE_NAME, &Default::default()).await;
    let mut gc = Sweeper::start_external_only_scoped(
        &s,
        &[
            "--scan-interval",
            "1m",
            "--leader-elect",
            "--leader-elect-namespace",
            LEASE_NS,
            "--leader-elect-retry-period",
            "500ms",
        ],
    )
    .await;
    let mut line = serde_json::Value::Null;
    let published = support::sweeper::eventually(Duration::from_secs(90), || {
        line = check_scan_line(&[]);
        let ok = line["status"] == "pass"
            && line["message"]
                .as_str()
                .is_some_and(|m| m.contains("last success"));
        async move { ok }
    })
    .await;
    assert!(published, "no scan state within 90 s: {line:#}");
    assert!(
        line["message"]
            .as_str()
            .unwrap()
            .starts_with("every 60s; last success "),
        "{line:#}"
    );
    // What the check read is on the Lease, as JSON.
    let lease = leases.get(LEASE_NAME).await.unwrap();
    let raw = &lease.metadata.annotations.unwrap()[sweeper::check::scan::ANNOTATION];
    let state: serde_json::Value = serde_json::from_str(raw).unwrap();
    assert_eq!(state["interval_seconds"], 60, "{raw}");
    assert!(state["last_failure"].is_null(), "{raw}");

    // The leader gone, its last word says a success four intervals old: the check fails it.
    gc.kill();
    let old = serde_json::json!({"interval_seconds": 60,
        "last_success": "2026-01-01T00:00:00Z", "last_failure": null});
    let patch = serde_json::json!({"metadata": {"annotations": {
        sweeper::check::scan::ANNOTATION: old.to_string()}}});
    leases
        .patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let line = check_scan_line(&[]);
    assert_eq!(line["status"], "fail", "{line:#}");
    assert!(
        line["message"]
            .as_str()
            .unwrap()
            .contains("older than three intervals (180s)")
            && line["hint"].is_string(),
        "{line:#}"
    );

    // No state at all: "not scheduled", unless the check is told an interval.
    let patch = serde_json::json!({"metadata": {"annotations": {
        sweeper::check::scan::ANNOTATION: null}}});
    leases
        .patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let line = check_scan_line(&[]);
    assert_eq!(line["status"], "pass", "{line:#}");
    assert!(
        line["message"]
            .as_str()
            .unwrap()
            .starts_with("not scheduled"),
        "{line:#}"
    );
    let line = check_scan_line(&["--scan-interval", "1h"]);
    assert_eq!(line["status"], "warn", "{line:#}");
    let _ = leases.delete(LEASE_NAME, &Default::default()).await;
}
