//! `sweeper pause` / `sweeper resume` against the real kube-apiserver: a running cascade stops
//! within a second (the audit log, which records every request of sweeper's service account,
//! shows no write after it) and finishes after resume.
//!
//! Each test keeps its switch in its own namespace (`--namespace`), so pausing here never pauses
//! the sweepers of the tests running beside it.

mod support;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ListParams, PropagationPolicy::Background};
use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;
use support::TestScope;
use support::objects::*;
use support::sweeper::{Sweeper, eventually};

const SA_USER: &str = "system:serviceaccount:sweeper-system:sweeper";

/// Runs `sweeper <args>` as the test's admin and returns its stdout; it must succeed.
fn cli(args: &[&str]) -> String {
    let (ok, out, err) = support::sweeper::cli(args);
    assert!(ok, "sweeper {args:?}: {err}");
    out
}

/// The test's objects left: the switch and the archive's records (ConfigMaps too) not counted.
async fn count(api: &Api<ConfigMap>) -> usize {
    api.list_metadata(&ListParams::default().labels("!sweeper.dev/archive"))
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|m| m.metadata.name.as_deref() != Some("sweeper-pause"))
                .count()
        })
        .unwrap_or(usize::MAX)
}

/// The times at which the API server received a write (delete, patch, create, update) from
/// sweeper's service account in `namespace`, read from the audit log past `from`.
fn writes_in(namespace: &str, from: u64) -> Vec<Timestamp> {
    let path = support::EnvFacts::load().get("SWEEPER_AUDIT_LOG");
    let mut f = std::fs::File::open(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}: start the environment with `make env-up`"));
    f.seek(SeekFrom::Start(from)).unwrap();
    let mut text = String::new();
    f.read_to_string(&mut text).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|ev| ev["user"]["username"] == SA_USER)
        .filter(|ev| ev["objectRef"]["namespace"] == namespace)
        .filter(|ev| {
            matches!(
                ev["verb"].as_str(),
                Some("delete" | "patch" | "create" | "update")
            )
        })
        .filter_map(|ev| ev["requestReceivedTimestamp"].as_str()?.parse().ok())
        .collect()
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn pause_stops_a_running_cascade_within_a_second_and_resume_finishes_it() {
    let mut s = TestScope::new("pause").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let owner = configmap(&c, &ns, "owner", vec![]).await;
    let oref = owner_ref(&owner, None);
    const N: usize = 2000;
    futures::stream::iter(0..N)
        .map(|i| {
            let (c, ns, oref) = (c.clone(), ns.clone(), oref.clone());
            async move { configmap(&c, &ns, &format!("dep-{i}"), vec![oref]).await }
        })
        .buffer_unordered(48)
        .collect::<Vec<_>>()
        .await;
    let audit = support::EnvFacts::load().get("SWEEPER_AUDIT_LOG");
    let from = std::fs::metadata(&audit).map(|m| m.len()).unwrap_or(0);

    // The switch lives in the test's namespace; sweeper deletes at 50 requests/s.
    let gc = Sweeper::start(&["--namespace", &ns, "--kube-api-qps", "50"]).await;
    delete_cm(&c, &ns, "owner", Background).await;
    let started = eventually(Duration::from_secs(60), || async {
        count(&api).await <= N - 100
    })
    .await;
    assert!(started, "the cascade is under way");

    let out = cli(&[
        "pause",
        "-n",
        &ns,
        "--collector",
        "cascade",
        "--reason",
        "test",
    ]);
    let paused_at = Timestamp::now();
    assert!(out.contains("paused now: cascade"), "{out}");

    // Nothing more may leave: watch the count stand still, then read the audit log.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = count(&api).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(count(&api).await, held, "no delete lands while paused");
    assert!(
        held > 100,
        "the pause caught the cascade mid-way ({held} left)"
    );
    let late: Vec<_> = writes_in(&ns, from)
        .into_iter()
        .filter(|t| *t > paused_at + Duration::from_secs(1))
        .collect();
    assert!(
        late.is_empty(),
        "{} writes reached the API server more than 1s after the pause (first {:?}, paused at {paused_at})",
        late.len(),
        late.first()
    );

    // The pause is visible: /status, /readyz (still ready), the metric and an Event.
    let (code, status) = sweeper::http_get::get(&format!("{}/status", gc.base))
        .await
        .unwrap();
    assert_eq!(code, 200);
    let status: sweeper::status::StatusReport = serde_json::from_str(&status).unwrap();
    let paused = status.paused.expect("the switch was read");
    assert_eq!(paused.keys().collect::<Vec<_>>(), vec!["cascade"]);
    assert_eq!(paused["cascade"].reason.as_deref(), Some("test"));
    let (code, ready) = sweeper::http_get::get(&format!("{}/readyz", gc.base))
        .await
        .unwrap();
    assert_eq!(code, 200, "a paused replica is healthy and ready");
    assert!(ready.contains("paused: cascade"), "{ready}");
    let (_, metrics) = sweeper::http_get::get(&format!("{}/metrics", gc.base))
        .await
        .unwrap();
    assert!(
        metrics.contains("sweeper_paused{collector=\"cascade\"} 1"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("paused"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(metrics.contains("sweeper_paused{collector=\"tenant\"} 0"));
    let evented = eventually(Duration::from_secs(10), || async {
        any_event(&c, &ns, |e| {
            e.reason.as_deref() == Some("Paused")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("sweeper-pause")
        })
        .await
    })
    .await;
    assert!(evented, "a Paused Event on the switch");

    // Resume: the queued work finishes.
    let out = cli(&["resume", "-n", &ns]);
    assert!(out.contains("paused now: none"), "{out}");
    let finished = eventually(Duration::from_secs(120), || async {
        count(&api).await == 0
    })
    .await;
    assert!(finished, "every dependent is collected after resume");
    assert!(
        api.get_opt("sweeper-pause").await.unwrap().is_some(),
        "the switch is kept (emptied), not collected"
    );
    drop(gc);
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_replica_started_while_paused_deletes_nothing_until_resumed() {
    let mut s = TestScope::new("pausestart").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    cli(&["pause", "-n", &ns]);
    let owner = configmap(&c, &ns, "owner", vec![]).await;
    configmap(&c, &ns, "dep", vec![owner_ref(&owner, None)]).await;
    delete_cm(&c, &ns, "owner", Background).await;
    let _gc = Sweeper::start(&["--namespace", &ns]).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        cm(&c, &ns, "dep").await.is_some(),
        "paused before start: nothing is collected"
    );
    // Resuming another collector leaves cascade paused (all → the other two by name).
    cli(&["resume", "-n", &ns, "--collector", "tenant"]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        cm(&c, &ns, "dep").await.is_some(),
        "cascade is still paused"
    );
    cli(&["resume", "-n", &ns, "--collector", "cascade"]);
    assert!(
        cm_gone(&c, &ns, "dep", Duration::from_secs(30)).await,
        "collected once cascade is resumed"
    );
}
