//! Leader election with two real processes against the real API server: one active, the standby
//! takes over within the lease duration, and a replica that loses its lease stops deleting at once.

mod support;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::PostParams;
use kube::api::PropagationPolicy::Background;
use kube::{Api, Client};
use std::time::{Duration, Instant};
use support::TestScope;
use support::objects::*;
use support::sweeper::{Sweeper, eventually};

/// Short timings so the test runs in seconds; their relations are the production ones.
const LEASE: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(300);

/// The shipped Lease: its Role (deploy/manifests) allows only this name in this namespace, and the
/// processes run as the shipped service account. The tests run one at a time (nextest group
/// `collector`) and each starts by deleting it.
const LEASE_NS: &str = "sweeper-system";
const LEASE_NAME: &str = "sweeper";

async fn fresh_lease(c: &Client) {
    let api: Api<Lease> = Api::namespaced(c.clone(), LEASE_NS);
    let _ = api.delete(LEASE_NAME, &Default::default()).await;
}

fn args(identity: &str) -> Vec<&str> {
    vec![
        "--leader-elect",
        "--leader-elect-namespace",
        LEASE_NS,
        "--leader-elect-lease-name",
        LEASE_NAME,
        "--leader-elect-identity",
        identity,
        "--leader-elect-lease-duration",
        "3s",
        "--leader-elect-renew-deadline",
        "2s",
        "--leader-elect-retry-period",
        "300ms",
        "--kube-api-qps",
        "0",
    ]
}

async fn holder(c: &Client) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(c.clone(), LEASE_NS);
    api.get_opt(LEASE_NAME)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

async fn role(s: &Sweeper) -> String {
    let (_, body) = s.get("/status").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["leader"]["role"].as_str().unwrap_or("?").to_string()
}

/// Starts a replica and waits until it holds the (fresh) lease.
async fn leading(c: &Client, identity: &str) -> Sweeper {
    let s = Sweeper::start(&args(identity)).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            holder(c).await.as_deref() == Some(identity)
        })
        .await,
        "{identity} takes the free lease"
    );
    s
}

/// An owner with one dependent; returns the dependent's name.
async fn doomed_pair(c: &Client, ns: &str, name: &str) -> String {
    let owner = configmap(c, ns, name, vec![]).await;
    let dep = format!("{name}-dep");
    configmap(c, ns, &dep, vec![owner_ref(&owner, None)]).await;
    dep
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn one_replica_leads_and_the_standby_takes_over_when_it_dies() {
    let mut s = TestScope::new("leader").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    fresh_lease(&c).await;

    let mut a = leading(&c, "replica-a").await;
    let b = Sweeper::start(&args("replica-b")).await;
    assert_eq!(role(&b).await, "standby");
    assert_eq!(role(&a).await, "leader");
    assert_eq!(b.metric("sweeper_leader_is_leader").await, 0.0);
    assert_eq!(a.metric("sweeper_leader_is_leader").await, 1.0);

    // The leader collects.
    let dep = doomed_pair(&c, &ns, "first").await;
    delete_cm(&c, &ns, "first", Background).await;
    assert!(
        cm_gone(&c, &ns, &dep, Duration::from_secs(30)).await,
        "leader collects"
    );
    // The standby has sent no write at all, not even to the lease.
    for verb in ["delete", "patch", "create", "update"] {
        let series = format!("sweeper_kube_api_calls_total{{verb=\"{verb}\"}}");
        assert_eq!(b.metric(&series).await, 0.0, "standby sent a {verb}");
    }

    // Kill the leader without warning: no release, the standby must wait for expiry.
    let killed = Instant::now();
    a.kill();
    let dep = doomed_pair(&c, &ns, "second").await;
    delete_cm(&c, &ns, "second", Background).await;
    assert!(
        eventually(Duration::from_secs(20), || async {
            holder(&c).await.as_deref() == Some("replica-b")
        })
        .await,
        "the standby takes the lease"
    );
    let took = killed.elapsed();
    // The last renewal was at most one retry period before the kill; the standby notices the
    // expiry at its next try. Anything later means it did not honour the lease duration.
    assert!(
        took <= LEASE + RETRY * 3,
        "takeover took {took:?}, lease duration {LEASE:?}"
    );
    assert!(
        cm_gone(&c, &ns, &dep, Duration::from_secs(30)).await,
        "the new leader collects what happened while nobody led"
    );
    assert_eq!(role(&b).await, "leader");
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn graceful_shutdown_releases_the_lease_for_an_immediate_takeover() {
    let s = TestScope::new("leader-rel").await;
    let c = s.client.clone();
    fresh_lease(&c).await;
    let mut a = leading(&c, "replica-a").await;
    a.signal("TERM");
    let status = a
        .wait_exit(Duration::from_secs(20))
        .await
        .expect("exits on SIGTERM");
    assert!(status.success(), "clean exit: {status:?}");
    assert_eq!(holder(&c).await, None, "released on exit");
    let released = Instant::now();
    let _b = Sweeper::start(&args("replica-b")).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            holder(&c).await.as_deref() == Some("replica-b")
        })
        .await
    );
    assert!(
        released.elapsed() < LEASE,
        "a released lease is taken at once, not after expiry"
    );
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_replica_that_lost_its_lease_deletes_nothing_and_exits() {
    let mut s = TestScope::new("leader-lost").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    fresh_lease(&c).await;
    let mut a = leading(&c, "replica-a").await;
    // Make sure the collector is fully up (watching configmaps) before freezing it.
    a.wait_ready(Duration::from_secs(30)).await;
    let dep = doomed_pair(&c, &ns, "frozen").await;

    // Freeze the leader past its renew deadline (a long GC pause, a stalled node), and meanwhile
    // let someone else take the lease and delete the owner. On waking, the leader has work to do
    // at once (the owner's deletion) and has not yet noticed it lost the lease.
    a.signal("STOP");
    tokio::time::sleep(LEASE + Duration::from_millis(500)).await;
    let api: Api<Lease> = Api::namespaced(c.clone(), LEASE_NS);
    let mut l = api.get(LEASE_NAME).await.unwrap();
    let spec = l.spec.as_mut().unwrap();
    spec.holder_identity = Some("thief".into());
    spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
    spec.lease_duration_seconds = Some(3600);
    api.replace(LEASE_NAME, &PostParams::default(), &l)
        .await
        .unwrap();
    delete_cm(&c, &ns, "frozen", Background).await;
    a.signal("CONT");

    let status = a
        .wait_exit(Duration::from_secs(15))
        .await
        .expect("a replica that lost its lease exits");
    assert!(!status.success(), "it exits with an error: {status:?}");
    // It never deleted the dependent, although it saw the owner go.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        cm(&c, &ns, &dep).await.is_some(),
        "the fenced replica deleted a dependent after losing its lease"
    );
    assert_eq!(holder(&c).await.as_deref(), Some("thief"));
}
