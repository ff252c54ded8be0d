//! `BENCH_ONLY=restart` of `make bench-tenant` (issue #52): a tenant collector killed mid-teardown
//! and started again, timed from the new process's start to the Tenant released. The workload is
//! `tests/tenant.rs`'s `killed_mid_teardown_then_restarted_finishes_it`: 300 ClusterRoles of one
//! tenant (and one of a sibling tenant that must stay), `--kube-api-qps 20 --kube-api-burst 20`,
//! the default archive, discovery refreshed every 2 s as in the tests, killed (SIGKILL) once
//! fewer than 290 are left.
//!
//! A restart should cost no more than the deletes it does: the bound printed beside the median is
//! `deletes / qps + 5 s`. Prints `BENCH tenant.restart seconds_to_release=<median s> deletes=<median
//! n> qps=<q> unit=s` and a detail line (runs, min, max, bound), from `BENCH_TENANT_RUNS` runs
//! (default 5). Each sweeper's log is kept in `$TMPDIR/bench-tenant-restart-<run>-<first|second>.log`.

use crate::stats::{median, min_max};
use futures::StreamExt;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use sweeper::api::tenant::{SpecId, Tenant, TenantSpec};

const OBJECTS: usize = 300;
const QPS: u32 = 20;
const SCOPE_LABEL: &str = "sweeper.dev/test-scope";
const SCOPE: &str = "bench-restart";
const FINALIZER: &str = "kubezoo.io/tenant";

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("{key} is not set (source .state/env)"))
}

/// `sweeper run` with only the tenant collector, scoped to this benchmark's Tenants, as the test
/// runs it (its service account when the environment has one).
fn spawn(run: usize, which: &str) -> Child {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kubeconfig = std::env::var("SWEEPER_SA_KUBECONFIG").unwrap_or_else(|_| env("KUBECONFIG"));
    let log = std::fs::File::create(format!(
        "{}/bench-tenant-restart-{run}-{which}.log",
        std::env::temp_dir().display()
    ))
    .unwrap();
    Command::new(env("SWEEPER_BIN"))
        .args(["run", "--http-addr", &format!("127.0.0.1:{port}")])
        // As the test harness runs it (tests/support/sweeper.rs): the refresh that cost most.
        .args(["--discovery-interval", "2s"])
        .args(["--feature-gates", "CascadeGC=false,TenantGC=true"])
        .args(["--tenant-scope-selector", &format!("{SCOPE_LABEL}={SCOPE}")])
        .args(["--kube-api-qps", &QPS.to_string()])
        .args(["--kube-api-burst", &QPS.to_string()])
        .env("KUBECONFIG", kubeconfig)
        .env(
            "RUST_LOG",
            std::env::var("BENCH_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start sweeper (SWEEPER_BIN)")
}

/// A tenant id as KubeZoo's CRD wants it: numeric, the object's name.
fn new_id() -> String {
    format!("{}", 100_000 + rand::random::<u32>() % 800_000)
}

async fn create_tenant(c: &Client, id: &str) {
    let mut t = Tenant::new(
        id,
        TenantSpec {
            id: Some(SpecId::Int(id.parse().unwrap())),
            quota: Some(serde_json::json!({})),
        },
    );
    t.metadata.labels = Some(BTreeMap::from([(SCOPE_LABEL.into(), SCOPE.into())]));
    Api::<Tenant>::all(c.clone())
        .create(&PostParams::default(), &t)
        .await
        .expect("create tenant");
}

async fn create_roles(c: &Client, names: Vec<String>, tenant: &str) {
    futures::stream::iter(names)
        .for_each_concurrent(16, |name| {
            let c = c.clone();
            async move {
                let mut r = ClusterRole::default();
                r.metadata.name = Some(name);
                r.metadata.labels = Some(BTreeMap::from([(
                    "kubezoo.io/tenant".to_string(),
                    tenant.to_string(),
                )]));
                Api::<ClusterRole>::all(c)
                    .create(&PostParams::default(), &r)
                    .await
                    .expect("create clusterrole");
            }
        })
        .await;
}

async fn left(c: &Client, id: &str) -> usize {
    Api::<ClusterRole>::all(c.clone())
        .list_metadata(&ListParams::default().labels(&format!("kubezoo.io/tenant={id}")))
        .await
        .expect("list clusterroles")
        .items
        .len()
}

/// Polls every 50 ms until `check` holds; panics after `limit`.
async fn until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One run: (seconds from the restart's spawn to the Tenant gone, deletes left to it).
async fn once(c: &Client, run: usize) -> (f64, usize) {
    let id = new_id();
    let sibling = format!("{}", id.parse::<u32>().unwrap() + 1);
    let tenants: Api<Tenant> = Api::all(c.clone());
    create_roles(c, (0..OBJECTS).map(|i| format!("{id}-r{i}")).collect(), &id).await;
    create_roles(c, vec![format!("{sibling}-keep")], &sibling).await;
    let mut first = spawn(run, "first");
    create_tenant(c, &id).await;
    until(Duration::from_secs(120), "finalizer added", || async {
        tenants
            .get_opt(&id)
            .await
            .unwrap()
            .is_some_and(|t| t.finalizers().iter().any(|f| f == FINALIZER))
    })
    .await;
    tenants
        .delete(&id, &DeleteParams::default())
        .await
        .expect("delete tenant");
    until(Duration::from_secs(120), "teardown started", || async {
        left(c, &id).await < OBJECTS - 10
    })
    .await;
    let _ = first.kill();
    let _ = first.wait();
    let deletes = left(c, &id).await;
    assert!(deletes > 0, "killed mid-way");
    let started = Instant::now();
    let mut second = spawn(run, "second");
    until(Duration::from_secs(300), "tenant released", || async {
        tenants.get_opt(&id).await.unwrap().is_none()
    })
    .await;
    let seconds = started.elapsed().as_secs_f64();
    let _ = second.kill();
    let _ = second.wait();
    assert_eq!(left(c, &id).await, 0, "every object of the tenant deleted");
    let keep: Api<ClusterRole> = Api::all(c.clone());
    assert!(
        keep.get_opt(&format!("{sibling}-keep"))
            .await
            .unwrap()
            .is_some(),
        "the sibling tenant's object must stay"
    );
    let _ = keep
        .delete(&format!("{sibling}-keep"), &DeleteParams::default())
        .await;
    (seconds, deletes)
}

pub async fn part(c: &Client, runs: usize) -> Vec<String> {
    let mut seconds = Vec::new();
    let mut deletes = Vec::new();
    for run in 0..runs {
        let (s, n) = once(c, run).await;
        let bound = n as f64 / f64::from(QPS) + 5.0;
        eprintln!(
            "restart run {run}: released {s:.2}s after the restart, {n} deletes (bound {bound:.2}s)"
        );
        seconds.push(s);
        deletes.push(n as f64);
    }
    let (s, n) = (median(&seconds), median(&deletes));
    let (lo, hi) = min_max(&seconds);
    vec![
        format!("BENCH tenant.restart seconds_to_release={s:.2} deletes={n:.0} qps={QPS} unit=s"),
        format!(
            "BENCH tenant.restart.detail runs={runs} min={lo:.2} max={hi:.2} bound={:.2} unit=s",
            n / f64::from(QPS) + 5.0
        ),
    ]
}
