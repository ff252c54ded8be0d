//! `sweeper run` as a process: connects, becomes ready, serves metrics, stops cleanly on SIGTERM.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn get(url: &str) -> Option<(u16, String)> {
    // A tiny HTTP/1.0 GET so the test needs no HTTP client crate.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = tokio::net::TcpStream::connect(host).await.ok()?;
    s.write_all(format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.ok()?;
    let status = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// `sweeper run` against the test environment, serving plain HTTP on `port` without
/// authentication (these tests are about the process; tests/http_auth.rs is about the port's
/// security), with `extra` flags.
fn sweeper_run(facts: &support::EnvFacts, port: u16, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sweeper"));
    c.args([
        "run",
        "--http-insecure",
        "--http-addr",
        &format!("127.0.0.1:{port}"),
    ])
    .args(extra)
    .env("KUBECONFIG", facts.get("KUBECONFIG"));
    c
}

/// Whether `base`'s /readyz answers 200 within `timeout`.
async fn ready_within(base: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some((200, _)) = get(&format!("{base}/readyz")).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn run_serves_health_ready_and_metrics_then_stops_on_sigterm() {
    let facts = support::EnvFacts::load();
    // Fails with instructions if the apiserver is down, rather than timing out below.
    support::kube_client().await;
    let port = free_port();
    let mut child = sweeper_run(&facts, port, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn sweeper");
    let base = format!("http://127.0.0.1:{port}");

    let ready = ready_within(&base, Duration::from_secs(30)).await;
    let healthz = get(&format!("{base}/healthz")).await;
    let status_out = Command::new(env!("CARGO_BIN_EXE_sweeper"))
        .args(["status", "--server", &base])
        .output()
        .unwrap();
    let metrics = get(&format!("{base}/metrics")).await;
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let exit = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await
    .unwrap();

    assert!(ready, "/readyz never returned 200");
    assert_eq!(healthz.map(|(s, _)| s), Some(200));
    let (status, body) = metrics.expect("metrics answered");
    assert_eq!(status, 200);
    let discovered: i64 = body
        .lines()
        .find_map(|l| l.strip_prefix("sweeper_discovered_resources "))
        .and_then(|v| v.trim().parse().ok())
        .expect("sweeper_discovered_resources in /metrics");
    assert!(
        discovered > 20,
        "a 1.20 apiserver has well over 20 deletable resources, got {discovered}"
    );
    let status_text = String::from_utf8_lossy(&status_out.stdout);
    assert!(status_out.status.success(), "sweeper status: {status_text}");
    assert!(
        status_text.contains("ready: true") && status_text.contains("objects tracked"),
        "sweeper status shows readiness and the cascade collector: {status_text}"
    );
    let exit = exit.expect("sweeper exits within 15s of SIGTERM");
    assert!(exit.success(), "graceful shutdown exits 0, got {exit:?}");
}

/// A CRD deleted after discovery saw it: its watch answers 404 and asks discovery to refresh at
/// once, so the watch stops (and never holds the cascade's first sync, or /readyz, as the CI run
/// of 2026-12-01 saw: another test's CRDs deleted while sweeper started held /readyz 30 s, to the
/// next refresh). The interval here is an hour: only the watch's request can drop it in time.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_deleted_crds_watch_asks_discovery_to_refresh_at_once() {
    use std::io::BufRead;
    let facts = support::EnvFacts::load();
    let client = support::kube_client().await;
    let group = format!("refresh-{}.example.com", std::process::id());
    let ar = support::objects::schemaless_crd(
        &client,
        &group,
        "Gizmo",
        "Namespaced",
        Duration::from_secs(30),
    )
    .await;
    let port = free_port();
    let mut child = sweeper_run(
        &facts,
        port,
        &[
            "--discovery-interval",
            "1h",
            "--feature-gates",
            "CascadeGC=true",
        ],
    )
    .env("RUST_LOG", "info")
    .env("NO_COLOR", "1")
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn sweeper");
    let key = format!("{group}/v1/gizmos");
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            eprintln!("{line}");
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    let wait_for = |what: &str, timeout: Duration| -> bool {
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match lines.recv_timeout(left) {
                Ok(line) if line.contains(what) && line.contains(&key) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    };
    // The watch is running once the graph has synced (its list done): then delete the CRD.
    let synced = ready_within(&format!("http://127.0.0.1:{port}"), Duration::from_secs(60)).await;
    support::objects::delete_crd(&client, &ar).await;
    // Blocking here is fine: the log is read by its own thread, and nothing else runs.
    let stopped = synced
        && wait_for(
            "resource no longer served; stopping its watch",
            Duration::from_secs(30),
        );
    let _ = child.kill();
    let _ = child.wait();
    assert!(synced, "sweeper became ready");
    assert!(
        stopped,
        "the watch of {key} stopped within 30 s of its CRD's deletion, with discovery's interval at 1 h"
    );
}

/// Bad configuration fails at once, before connecting: no environment needed. The kubeconfig
/// points nowhere, so a process that got past validation would fail differently (and later).
#[test]
fn invalid_configuration_fails_fast_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--kube-api-qps=-5"], "--kube-api-qps"),
        (&["--discovery-interval", "0s"], "--discovery-interval"),
        (&["--feature-gates", "Bogus=true"], "Bogus"),
        (
            &[
                "--leader-elect",
                "--leader-elect-namespace",
                "ns",
                "--leader-elect-retry-period",
                "12s",
            ],
            "--leader-elect-retry-period",
        ),
    ];
    for (args, flag) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_sweeper"))
            .arg("run")
            .args(*args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env("RUST_LOG", "off")
            .stdin(Stdio::null())
            .output()
            .expect("run sweeper");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} must fail");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("kubeconfig"),
            "{args:?} failed on configuration before touching the cluster: {stderr}"
        );
    }
}
