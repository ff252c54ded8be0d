//! `make bench-cascade`: sweeper's cascade collector against kube-controller-manager's garbage
//! collector (`--controllers=garbagecollector`), same apiserver, same workloads, same client
//! rate limits. Prints `BENCH cascade.*` lines last (see README, "Benchmarks").
//!
//! Environment: the test environment (`make env-up`), `SWEEPER_BIN` (a release `sweeper`),
//! `SWEEPER_K8S_BIN` (where kube-controller-manager is). `BENCH_SCALE` (default 1.0) shrinks the
//! workloads for a quick run; `BENCH_ONLY=archive` runs only the archive part,
//! `BENCH_ONLY=expiry` only its expiry line, `BENCH_ONLY=limit` only the `cascade.limit` lines
//! (the API server's own delete ceiling, a plain client with no GC, against sweeper's
//! unthrottled background cascade of the same 1,000 dependents), `BENCH_ONLY=startup` only the
//! start-up at 100,000 objects (`cascade.startup100k`, `cascade.rss100k`; examples/support/startup.rs),
//! `BENCH_ONLY=watch` only the servers' CPU per 1,000 watch events delivered to each collector
//! (`cascade.watch.servers_cpu`; examples/support/watch_cost.rs), `BENCH_ONLY=equal` only the
//! comparison at equal request budgets at the API server (`cascade.*.equal_requests`;
//! examples/support/equal_requests.rs). The `qps20` lines compare at equal *flags*, which on
//! v1.36 gives kube-controller-manager's collector twice sweeper's requests per second.
//!
//! The comparison with kube-controller-manager runs sweeper with `--archive=none` (what the
//! collector itself costs, comparable with earlier runs); the archive part then measures the same
//! 1,000-dependent background cascade with archiving off, on (the default), and under
//! kube-controller-manager, and how fast expired records are removed.

#[path = "support/equal_requests.rs"]
mod equal_requests;
#[path = "support/objects.rs"]
mod objects;
#[path = "support/proc.rs"]
mod proc;
#[path = "support/startup.rs"]
mod startup;
#[path = "support/stats.rs"]
mod stats;
#[path = "support/watch_cost.rs"]
mod watch_cost;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, PartialObjectMeta, PostParams, PropagationPolicy};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use stats::median;
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Gc {
    Sweeper,
    Kcm,
}

#[derive(Clone, Copy, Debug)]
struct Limit {
    name: &'static str,
    qps: u32,
    burst: u32,
}

const LIMITS: [Limit; 2] = [
    Limit {
        name: "qps20",
        qps: 20,
        burst: 30,
    },
    Limit {
        name: "unthrottled",
        qps: 0,
        burst: 0,
    },
];

struct Running {
    child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn env(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set: run through `make bench-cascade`"))
}

fn start(gc: Gc, limit: Limit) -> Running {
    start_with(gc, limit, &["--archive", "none"])
}

fn start_with(gc: Gc, limit: Limit, extra: &[&str]) -> Running {
    let kubeconfig = env("KUBECONFIG");
    let log = std::fs::File::create(format!(
        "{}/bench-{gc:?}-{}.log",
        std::env::temp_dir().display(),
        limit.name
    ))
    .unwrap();
    let child = match gc {
        Gc::Sweeper => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            Command::new(env("SWEEPER_BIN"))
                .args([
                    "run",
                    // Nothing reads its port: no certificate to make, no token to review.
                    "--http-insecure",
                    "--http-addr",
                    &format!("127.0.0.1:{port}"),
                    "--feature-gates",
                    "CascadeGC=true",
                ])
                .args([
                    "--kube-api-qps",
                    &limit.qps.to_string(),
                    "--kube-api-burst",
                    &limit.burst.max(1).to_string(),
                ])
                .args(extra)
                .env("KUBECONFIG", &kubeconfig)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start sweeper")
        }
        Gc::Kcm => {
            // client-go has no "unlimited": a limit far above what the apiserver can serve.
            let (qps, burst) = if limit.qps == 0 {
                (100_000, 100_000)
            } else {
                (limit.qps, limit.burst)
            };
            Command::new(format!(
                "{}/kube-controller-manager",
                env("SWEEPER_K8S_BIN")
            ))
            .args([
                "--kubeconfig",
                &kubeconfig,
                "--controllers",
                "garbagecollector",
                "--leader-elect=false",
            ])
            .args([
                "--secure-port",
                "0",
                "--use-service-account-credentials=false",
            ])
            // 1.20 (SWEEPER_KUBE=1.20) also opens an insecure port unless told not to; the flag is
            // gone since 1.24, and the current server refuses it.
            .args(if std::env::var("SWEEPER_KUBE").as_deref() == Ok("1.20") {
                &["--port", "0"][..]
            } else {
                &[][..]
            })
            .args([
                "--kube-api-qps",
                &qps.to_string(),
                "--kube-api-burst",
                &burst.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start kube-controller-manager")
        }
    };
    Running { child }
}

fn rss_bytes(pid: u32) -> u64 {
    proc::status_bytes(pid, "VmRSS:")
}

/// RSS once it has stopped moving (three samples 2 s apart within 1%).
async fn stable_rss(pid: u32) -> u64 {
    let mut last = Vec::new();
    for _ in 0..90 {
        last.push(rss_bytes(pid));
        if last.len() >= 3 {
            let w = &last[last.len() - 3..];
            let (lo, hi) = (
                *w.iter().min().unwrap() as f64,
                *w.iter().max().unwrap() as f64,
            );
            if hi - lo <= hi * 0.01 {
                return w[2];
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    *last.last().unwrap()
}

fn oref(cm: &ConfigMap, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: cm.name_any(),
        uid: cm.uid().unwrap(),
        block_owner_deletion: Some(block),
        controller: None,
    }
}

async fn create(
    api: &Api<ConfigMap>,
    name: String,
    label: &str,
    owner: Option<OwnerReference>,
) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name);
    cm.metadata.labels = Some(BTreeMap::from([("bench".to_string(), label.to_string())]));
    cm.metadata.owner_references = owner.map(|o| vec![o]);
    api.create(&PostParams::default(), &cm)
        .await
        .expect("create configmap")
}

async fn create_many(
    api: &Api<ConfigMap>,
    prefix: &str,
    n: usize,
    label: &str,
    owner: Option<OwnerReference>,
) -> Vec<ConfigMap> {
    futures::stream::iter(0..n)
        .map(|i| create(api, format!("{prefix}-{i}"), label, owner.clone()))
        .buffer_unordered(64)
        .collect()
        .await
}

/// The label on every namespace a run makes for its workloads (not the start-up fill, which may
/// be kept on purpose): what a killed run left behind is found by it.
const BENCH_LABEL: &str = "sweeper.dev/bench";

async fn namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    ns.metadata.labels = Some([(BENCH_LABEL.to_string(), "cascade".to_string())].into());
    let _ = api.create(&PostParams::default(), &ns).await;
}

/// Deletes the namespaces an earlier, killed run left and waits until they are gone: their
/// dependents, whose owners that run deleted, would otherwise be collected by this run's garbage
/// collector and counted in its figures.
async fn remove_stale_namespaces(client: &Client) {
    let api: Api<Namespace> = Api::all(client.clone());
    let lp = ListParams::default().labels(BENCH_LABEL);
    let stale = api.list_metadata(&lp).await.expect("list namespaces");
    if stale.items.is_empty() {
        return;
    }
    for ns in &stale.items {
        eprintln!(
            "removing namespace {} left by an earlier run",
            ns.name_any()
        );
        drop_namespace(client, &ns.name_any()).await;
    }
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(300) {
        if api
            .list_metadata(&lp)
            .await
            .is_ok_and(|l| l.items.is_empty())
        {
            return;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    panic!("namespaces labelled {BENCH_LABEL} still there after 300 s");
}

async fn drop_namespace(client: &Client, name: &str) {
    let _ = Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

/// The API server's request counters so far (its own `apiserver_request_total`), from one read
/// of its /metrics.
#[derive(Clone, Copy)]
struct Requests {
    /// The GC-relevant requests on configmaps.
    configmaps: f64,
    /// Every request, WATCH excepted: a watch is counted only when it ends.
    all: f64,
}

async fn requests(client: &Client) -> Requests {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.expect("apiserver /metrics");
    let counters: Vec<(&str, f64)> = text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter_map(|l| Some((l, l.rsplit(' ').next()?.parse::<f64>().ok()?)))
        .collect();
    let sum = |keep: &dyn Fn(&str) -> bool| -> f64 {
        counters
            .iter()
            .filter(|(l, _)| keep(l))
            .map(|(_, v)| v)
            .sum()
    };
    Requests {
        configmaps: sum(&|l| {
            // LIST too: the archive reads dependents by list.
            l.contains("resource=\"configmaps\"")
                && ["DELETE", "GET", "LIST", "PATCH", "PUT", "POST"]
                    .iter()
                    .any(|v| l.contains(&format!("verb=\"{v}\"")))
        }),
        all: sum(&|l| !l.contains("verb=\"WATCH\"")),
    }
}

/// Sum of the GC-relevant requests on configmaps the apiserver has served (its own counters).
async fn configmap_calls(client: &Client) -> f64 {
    requests(client).await.configmaps
}

/// Waits until `n` objects labelled `label` in `ns` have been deleted (counted from a watch,
/// so measuring does not load the apiserver), after running `trigger`.
async fn time_deletions<F: std::future::Future<Output = ()>>(
    client: &Client,
    ns: &str,
    label: &str,
    n: usize,
    trigger: F,
) -> Duration {
    time_deletions_split(client, ns, label, n, trigger).await.1
}

/// [`time_deletions`], also saying when the first deletion was seen: (first, last).
async fn time_deletions_split<F: std::future::Future<Output = ()>>(
    client: &Client,
    ns: &str,
    label: &str,
    n: usize,
    trigger: F,
) -> (Duration, Duration) {
    let api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.clone(), ns);
    let cfg = watcher::Config::default().labels(&format!("bench={label}"));
    let mut stream = watcher::watcher(api, cfg).boxed();
    while let Some(ev) = stream.try_next().await.expect("watch") {
        if matches!(ev, Event::InitDone) {
            break;
        }
    }
    let t0 = Instant::now();
    let mut first = Duration::ZERO;
    // The watch is read while the trigger runs: a trigger that deletes for seconds (the plain
    // client of the limit line) must not leave the events to pile up unread on the server.
    let count = async {
        let mut deleted = 0;
        while deleted < n {
            match tokio::time::timeout(Duration::from_secs(1200), stream.try_next()).await {
                Ok(Ok(Some(Event::Delete(_)))) => {
                    deleted += 1;
                    if deleted == 1 {
                        first = t0.elapsed();
                    }
                }
                Ok(Ok(Some(_))) => {}
                _ => panic!("timed out after {deleted} of {n} deletions"),
            }
        }
    };
    futures::join!(trigger, count);
    (first, t0.elapsed())
}

/// The API server's own DELETE latency on configmaps so far: (seconds summed, requests), from
/// `apiserver_request_duration_seconds`. Differences of two readings give the mean latency the
/// server spent per DELETE between them.
async fn delete_latency(client: &Client) -> (f64, f64) {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.expect("apiserver /metrics");
    let sum = |metric: &str| -> f64 {
        text.lines()
            .filter(|l| {
                l.starts_with(metric)
                    && l.contains("resource=\"configmaps\"")
                    && l.contains("verb=\"DELETE\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    (
        sum("apiserver_request_duration_seconds_sum{"),
        sum("apiserver_request_duration_seconds_count{"),
    )
}

/// CPU seconds (user + system) a process has used so far; 0 when it is not readable.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0 // USER_HZ
}

/// CPU seconds of etcd and kube-apiserver together (their pid files in SWEEPER_TEST_ENV).
fn servers_cpu_seconds() -> f64 {
    let Ok(state) = std::env::var("SWEEPER_TEST_ENV") else {
        return 0.0;
    };
    ["etcd", "kube-apiserver"]
        .iter()
        .map(|s| {
            cpu_seconds(
                &std::fs::read_to_string(format!("{state}/run/{s}.pid")).unwrap_or_default(),
            )
        })
        .sum()
}

/// One measured batch of deletions: rate, the time to the first deletion seen, the mean
/// server-side DELETE latency, and so the mean DELETEs in flight at the server (Little's law);
/// the CPU the deleting client and the servers (etcd + kube-apiserver) used, per object.
#[derive(Clone, Copy, Default)]
struct Batch {
    rate: f64,
    first: Duration,
    server_latency: f64,
    client_cpu: f64,
    servers_cpu: f64,
}

impl Batch {
    fn in_flight(&self) -> f64 {
        self.rate * self.server_latency
    }

    fn describe(&self) -> String {
        format!(
            "{:.1}/s, first deletion after {:.0} ms, server {:.1} ms per DELETE, {:.1} in flight, CPU per object: client {:.2} ms, etcd+apiserver {:.2} ms",
            self.rate,
            self.first.as_secs_f64() * 1e3,
            self.server_latency * 1e3,
            self.in_flight(),
            self.client_cpu * 1e3,
            self.servers_cpu * 1e3
        )
    }
}

/// Times `n` deletions after `trigger` as a [`Batch`]; `client_pid` is the deleting process.
async fn measure_batch<F: std::future::Future<Output = ()>>(
    client: &Client,
    ns: &str,
    label: &str,
    n: usize,
    client_pid: &str,
    trigger: F,
) -> Batch {
    let before = delete_latency(client).await;
    let cpu_before = (cpu_seconds(client_pid), servers_cpu_seconds());
    let (first, total) = time_deletions_split(client, ns, label, n, trigger).await;
    let cpu_after = (cpu_seconds(client_pid), servers_cpu_seconds());
    let after = delete_latency(client).await;
    let count = (after.1 - before.1).max(1.0);
    Batch {
        rate: n as f64 / total.as_secs_f64(),
        first,
        server_latency: (after.0 - before.0) / count,
        client_cpu: (cpu_after.0 - cpu_before.0) / n as f64,
        servers_cpu: (cpu_after.1 - cpu_before.1) / n as f64,
    }
}

/// Waits until the GC collects a probe dependent: it is synced and working.
async fn probe(client: &Client, ns: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let owner = create(&api, "probe-owner".into(), "probe", None).await;
    create(&api, "probe-dep".into(), "probe", Some(oref(&owner, false))).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t = time_deletions(client, ns, "probe", 2, async {
        api.delete("probe-owner", &DeleteParams::default())
            .await
            .unwrap();
    });
    tokio::time::timeout(Duration::from_secs(180), t)
        .await
        .expect("GC never collected the probe");
}

struct Figures {
    background: f64,
    foreground: f64,
    calls_per_dependent: f64,
    idle_rss: u64,
}

/// One timed workload: the objects deleted, the time from the owner's DELETE to the last
/// deletion, and the requests the API server served from just before that DELETE to just after
/// the last deletion (the GC's, and the benchmark's owner DELETE and its watch's LIST).
struct Workload {
    objects: usize,
    took: Duration,
    before: Requests,
    after: Requests,
}

impl Workload {
    /// The GC's ConfigMap calls per object (the owner's DELETE, ours, not counted).
    fn calls_per_object(&self) -> f64 {
        (self.after.configmaps - self.before.configmaps - 1.0) / self.objects as f64
    }

    fn rate(&self) -> f64 {
        self.objects as f64 / self.took.as_secs_f64()
    }
}

/// The background workload in `ns`, the GC already running and synced: one owner with
/// `5,000 × scale` dependents, the owner deleted in the background.
async fn background_workload(client: &Client, ns: &str, scale: f64) -> Workload {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let n = ((5000.0 * scale) as usize).max(10);
    let owner = create(&api, "bg-owner".into(), "bg-owner", None).await;
    create_many(&api, "bg", n, "bg", Some(oref(&owner, false))).await;
    tokio::time::sleep(Duration::from_secs(5)).await; // let the GC observe everything
    let before = requests(client).await;
    let took = time_deletions(client, ns, "bg", n, async {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        api.delete("bg-owner", &dp).await.unwrap();
    })
    .await;
    Workload {
        objects: n,
        took,
        before,
        after: requests(client).await,
    }
}

/// The foreground workload in `ns`: a tree of 1 root, `50 × scale` children and `20 × √scale`
/// grandchildren each, the root deleted in the foreground (timed until the root is gone).
async fn foreground_workload(client: &Client, ns: &str, scale: f64) -> Workload {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let (mids, leaves) = (
        ((50.0 * scale) as usize).max(2),
        ((20.0 * scale.sqrt()) as usize).max(2),
    );
    let root = create(&api, "fg-root".into(), "fg", None).await;
    let mid_objs = create_many(&api, "fg-mid", mids, "fg", Some(oref(&root, true))).await;
    for m in &mid_objs {
        create_many(
            &api,
            &format!("{}-leaf", m.name_any()),
            leaves,
            "fg",
            Some(oref(m, true)),
        )
        .await;
    }
    let total = 1 + mids + mids * leaves;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = requests(client).await;
    let took = time_deletions(client, ns, "fg", total, async {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            ..Default::default()
        };
        api.delete("fg-root", &dp).await.unwrap();
    })
    .await;
    Workload {
        objects: total,
        took,
        before,
        after: requests(client).await,
    }
}

async fn run_workloads(
    client: &Client,
    gc: Gc,
    limit: Limit,
    scale: f64,
    tag: &str,
) -> (Figures, Running) {
    let ns = format!("bench-{tag}");
    namespace(client, &ns).await;
    let running = start(gc, limit);
    probe(client, &ns).await;
    let idle_rss = stable_rss(running.child.id()).await;
    let bg = background_workload(client, &ns, scale).await;
    let fg = foreground_workload(client, &ns, scale).await;
    drop_namespace(client, &ns).await;
    eprintln!(
        "{gc:?} {}: background {} in {:.1}s, foreground {} in {:.1}s, {:.2} calls per dependent, idle RSS {} MiB",
        limit.name,
        bg.objects,
        bg.took.as_secs_f64(),
        fg.objects,
        fg.took.as_secs_f64(),
        bg.calls_per_object(),
        idle_rss >> 20
    );
    let figures = Figures {
        background: bg.rate(),
        foreground: fg.rate(),
        calls_per_dependent: bg.calls_per_object(),
        idle_rss,
    };
    (figures, running)
}

/// One background cascade of `n` dependents under `running`: objects/s and API calls on
/// configmaps (deletes, and with the archive its reads and record writes) per dependent.
async fn background_cascade(client: &Client, ns: &str, n: usize) -> (f64, f64) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let owner = create(&api, "ar-owner".into(), "ar-owner", None).await;
    create_many(&api, "ar", n, "ar", Some(oref(&owner, false))).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = configmap_calls(client).await;
    let t = time_deletions(client, ns, "ar", n, async {
        api.delete("ar-owner", &DeleteParams::default())
            .await
            .unwrap();
    })
    .await;
    // Settles land just after the last delete: let them in before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let calls = configmap_calls(client).await - before - 1.0;
    (n as f64 / t.as_secs_f64(), calls / n as f64)
}

/// `records` archive records of 20 kB, all due at one moment `DUE` seconds after they start being
/// written, with a ready sweeper that has seen them; the time from that moment to the last
/// deletion.
async fn expiry_run(
    client: &Client,
    limit: Limit,
    records: usize,
    run_id: u32,
    bucketed: bool,
) -> Duration {
    const DUE: u64 = 45;
    let which = if bucketed { "bucket" } else { "each" };
    let ns = format!("bench-ar-gc-{which}-{run_id}");
    namespace(client, &ns).await;
    let due = k8s_openapi::jiff::Timestamp::now()
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(DUE as i64))
        .unwrap();
    let due_at = Instant::now() + Duration::from_secs(DUE);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let payload = "x".repeat(20_000);
    let mut labels = serde_json::json!({"sweeper.dev/archive": "true", "sweeper.dev/archive-state": "complete",
                                        "sweeper.dev/archive-collector": "cascade", "bench": format!("ar-gc-{which}")});
    if bucketed {
        // As sweeper writes them: the bucket ends at the due time.
        labels["sweeper.dev/archive-expiry-bucket"] =
            serde_json::json!(due.as_second().to_string());
    }
    futures::stream::iter(0..records)
        .map(|i| {
            let api = api.clone();
            let payload = payload.clone();
            let labels = labels.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                    "metadata": {
                        "name": format!("sweeper-archive-bench-{i}"),
                        "labels": labels,
                        "annotations": {"sweeper.dev/archive-expires": due.to_string()},
                    },
                    "data": {"entry.json": payload},
                }))
                .unwrap();
                api.create(&PostParams::default(), &cm).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    // Started after the records are written: its first pass sees when they fall due and wakes
    // then (as in production, where a pass every ttl / 10 always sees a record before it is due).
    let expirer = start_with(Gc::Sweeper, limit, &["--archive", "all"]);
    probe(client, &ns).await;
    assert!(
        Instant::now() < due_at,
        "writing {records} records and starting sweeper took longer than {DUE}s: raise DUE"
    );
    let label = format!("ar-gc-{which}");
    time_deletions(client, &ns, &label, records, async {
        tokio::time::sleep_until(due_at.into()).await;
    })
    .await;
    // From the due moment (the wait before it is not the expiry's) to the last deletion seen.
    let took = Instant::now().saturating_duration_since(due_at);
    drop(expirer);
    drop_namespace(client, &ns).await;
    took
}

fn expiry_line(records: usize, bucket: Duration, per_record: Duration) -> String {
    format!(
        "BENCH cascade.archive.expiry records={records} seconds={:.2} rate={:.1} per_record_seconds={:.2} per_record_rate={:.1} ratio={:.2} unit=records/s",
        bucket.as_secs_f64(),
        records as f64 / bucket.as_secs_f64(),
        per_record.as_secs_f64(),
        records as f64 / per_record.as_secs_f64(),
        per_record.as_secs_f64() / bucket.as_secs_f64()
    )
}

/// The archive's cost and its expiry, at qps 20: BENCH cascade.archive.* lines.
async fn archive_part(client: &Client, scale: f64, run_id: u32) -> Vec<String> {
    let limit = LIMITS[0];
    let n = ((1000.0 * scale) as usize).max(10);
    let mut figures = Vec::new();
    for (label, gc, args) in [
        ("plain", Gc::Sweeper, &["--archive", "none"][..]),
        ("archive", Gc::Sweeper, &["--archive", "all"][..]),
        ("kcm", Gc::Kcm, &[][..]),
    ] {
        let ns = format!("bench-ar-{label}-{run_id}");
        namespace(client, &ns).await;
        let running = start_with(gc, limit, args);
        probe(client, &ns).await;
        let (rate, calls) = background_cascade(client, &ns, n).await;
        eprintln!("{label} qps20: {n} dependents at {rate:.2}/s, {calls:.3} calls per dependent");
        figures.push((rate, calls));
        drop(running);
        drop_namespace(client, &ns).await;
    }
    let [
        (plain, plain_calls),
        (archive, archive_calls),
        (kcm, kcm_calls),
    ] = figures[..]
    else {
        unreachable!()
    };

    // Expiry, both ways under the same conditions: a ready sweeper, and
    // `records` records that all fall due at one moment (after they are all written); timed from
    // that moment to the last deletion. `per_record`: records as written before expiry buckets
    // (one DELETE each, at the client rate limit); `bucket`: as sweeper writes them now (one
    // deletecollection per namespace and bucket).
    let records = ((500.0 * scale) as usize).max(10);
    let per_record = expiry_run(client, limit, records, run_id, false).await;
    let bucket = expiry_run(client, limit, records, run_id, true).await;
    eprintln!(
        "expiry of {records} records: {:.2}s by bucket, {:.2}s one by one",
        bucket.as_secs_f64(),
        per_record.as_secs_f64()
    );
    vec![
        format!(
            "BENCH cascade.archive.qps20 sweeper_archive={archive:.2} sweeper={plain:.2} kcm={kcm:.2} ratio={:.2} unit=objects/s",
            archive / plain
        ),
        format!(
            "BENCH cascade.archive.calls_per_dependent sweeper_archive={archive_calls:.2} sweeper={plain_calls:.2} kcm={kcm_calls:.2} ratio={:.2} unit=calls",
            archive_calls / kcm_calls
        ),
        expiry_line(records, bucket, per_record),
    ]
}

/// Concurrencies the plain client tries for the API server's delete ceiling; the best is kept.
const LIMIT_CONCURRENCY: [usize; 6] = [1, 4, 8, 16, 32, 64];

/// `n` dependents of one owner, as the background workloads make them (a labelled ConfigMap with
/// one non-blocking owner reference), under `label`.
async fn dependents(api: &Api<ConfigMap>, label: &str, n: usize) -> Vec<ConfigMap> {
    let owner = create(
        api,
        format!("{label}-owner"),
        &format!("{label}-owner"),
        None,
    )
    .await;
    let deps = create_many(api, label, n, label, Some(oref(&owner, false))).await;
    // As the cascade workloads: let the creations settle (and a GC observe them) first.
    tokio::time::sleep(Duration::from_secs(5)).await;
    deps
}

/// The plain client: deletes `deps` with at most `concurrency` DELETEs in flight, each as sweeper
/// sends it (background propagation, uid and resourceVersion preconditions), timed like a
/// cascade, from the first DELETE to the last deletion seen by a watch.
async fn plain_deletes(
    client: &Client,
    ns: &str,
    label: &str,
    deps: &[ConfigMap],
    concurrency: usize,
) -> Batch {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let me = std::process::id().to_string();
    measure_batch(client, ns, label, deps.len(), &me, async {
        futures::stream::iter(deps)
            .map(|cm| {
                let dp = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Background),
                    preconditions: Some(kube::api::Preconditions {
                        uid: cm.uid(),
                        resource_version: cm.resource_version(),
                    }),
                    ..Default::default()
                };
                let api = &api;
                async move {
                    api.delete(&cm.name_any(), &dp)
                        .await
                        .expect("delete configmap");
                }
            })
            .buffer_unordered(concurrency)
            .collect::<Vec<_>>()
            .await;
    })
    .await
}

/// The API server's own delete ceiling on this machine against sweeper's unthrottled background
/// cascade of the same 1,000 dependents: `BENCH cascade.limit*` lines. `BENCH_LIMIT_RUNS` rounds
/// (default 5: the host's pace moves more between rounds than the two differ, so fewer rounds
/// say little; docs/benchmarks.md, 2026-12-03 night), each the plain client at every concurrency
/// then one sweeper cascade, so a busy moment of the host weighs on both alike. The plain client
/// runs with no garbage collector at all (kube-controller-manager runs the namespace controller
/// only); sweeper runs as in the unthrottled comparison (`--archive none`, qps 0), started for
/// its cascade and stopped after it.
/// Kept: the best rate per concurrency and the best of sweeper's cascades (and their median).
async fn limit_part(client: &Client, scale: f64, run_id: u32) -> Vec<String> {
    let n = ((1000.0 * scale) as usize).max(10);
    let runs: usize = std::env::var("BENCH_LIMIT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let ns = format!("bench-limit-{run_id}");
    namespace(client, &ns).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    let mut by_concurrency: Vec<(usize, Batch)> = LIMIT_CONCURRENCY
        .iter()
        .map(|&c| (c, Batch::default()))
        .collect();
    let mut cascades: Vec<Batch> = Vec::new();
    // Each round's best plain rate, for the medians' ratio (steadier than best against best on
    // a busy host).
    let mut round_limits: Vec<f64> = Vec::new();
    for r in 0..runs {
        let mut round_best = 0.0f64;
        for (c, best) in by_concurrency.iter_mut() {
            let label = format!("lim{r}-c{c}");
            let deps = dependents(&api, &label, n).await;
            let b = plain_deletes(client, &ns, &label, &deps, *c).await;
            eprintln!("round {r}: plain client, {c} in flight: {}", b.describe());
            round_best = round_best.max(b.rate);
            if b.rate > best.rate {
                *best = b;
            }
        }
        round_limits.push(round_best);
        let sweeper = start(Gc::Sweeper, LIMITS[1]);
        probe(client, &ns).await;
        let label = format!("sw{r}");
        dependents(&api, &label, n).await;
        let pid = sweeper.child.id().to_string();
        let b = measure_batch(client, &ns, &label, n, &pid, async {
            let dp = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..Default::default()
            };
            api.delete(&format!("{label}-owner"), &dp).await.unwrap();
        })
        .await;
        drop(sweeper);
        eprintln!("round {r}: sweeper unthrottled: {}", b.describe());
        cascades.push(b);
    }
    drop_namespace(client, &ns).await;
    let (best_c, limit) = by_concurrency
        .iter()
        .copied()
        .max_by(|a, b| a.1.rate.total_cmp(&b.1.rate))
        .unwrap();
    let sweeper = cascades
        .iter()
        .copied()
        .max_by(|a, b| a.rate.total_cmp(&b.rate))
        .unwrap();
    let rates: Vec<f64> = cascades.iter().map(|b| b.rate).collect();
    // Unset: sweeper's own default (80).
    let workers = std::env::var("SWEEPER_CASCADE_WORKERS").unwrap_or_else(|_| "80".into());
    let ms = |d: f64| d * 1e3;
    vec![
        format!(
            "BENCH cascade.limit sweeper={:.2} limit={:.2} ratio={:.2} best_concurrency={best_c} sweeper_median={:.2} limit_median={:.2} ratio_median={:.2} runs={runs} sweeper_workers={workers} dependents={n} unit=objects/s",
            sweeper.rate,
            limit.rate,
            sweeper.rate / limit.rate,
            median(&rates),
            median(&round_limits),
            median(&rates) / median(&round_limits)
        ),
        // Where the time goes, for the best of each: until the first deletion (sweeper: seeing
        // the owner go and queueing), the server's mean time per DELETE, the DELETEs in flight
        // at the server that implies (rate x latency), and CPU per object: the deleting process
        // (sweeper; the plain client, i.e. this driver) and etcd + kube-apiserver.
        format!(
            "BENCH cascade.limit.detail sweeper_first_ms={:.0} limit_first_ms={:.0} sweeper_server_ms={:.2} limit_server_ms={:.2} sweeper_in_flight={:.1} limit_in_flight={:.1} sweeper_cpu_ms={:.3} limit_client_cpu_ms={:.3} servers_cpu_ms_sweeper={:.3} servers_cpu_ms_limit={:.3} unit=ms",
            ms(sweeper.first.as_secs_f64()),
            ms(limit.first.as_secs_f64()),
            ms(sweeper.server_latency),
            ms(limit.server_latency),
            sweeper.in_flight(),
            limit.in_flight(),
            ms(sweeper.client_cpu),
            ms(limit.client_cpu),
            ms(sweeper.servers_cpu),
            ms(limit.servers_cpu)
        ),
        format!(
            "BENCH cascade.limit.by_concurrency {} unit=objects/s",
            by_concurrency
                .iter()
                .map(|(c, b)| format!("c{c}={:.2}", b.rate))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    ]
}

#[tokio::main]
async fn main() {
    sweeper::install_crypto_provider();
    let scale: f64 = std::env::var("BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let client = Client::try_default()
        .await
        .expect("kube client (KUBECONFIG)");
    let run_id = std::process::id();
    remove_stale_namespaces(&client).await;
    if std::env::var("BENCH_ONLY").as_deref() == Ok("expiry") {
        let records = ((500.0 * scale) as usize).max(10);
        let per_record = expiry_run(&client, LIMITS[0], records, run_id, false).await;
        let bucket = expiry_run(&client, LIMITS[0], records, run_id, true).await;
        println!("{}", expiry_line(records, bucket, per_record));
        return;
    }
    if std::env::var("BENCH_ONLY").as_deref() == Ok("limit") {
        limit_part(&client, scale, run_id)
            .await
            .iter()
            .for_each(|l| println!("{l}"));
        return;
    }
    if std::env::var("BENCH_ONLY").as_deref() == Ok("startup") {
        startup::part(&client, scale)
            .await
            .iter()
            .for_each(|l| println!("{l}"));
        return;
    }
    if std::env::var("BENCH_ONLY").as_deref() == Ok("equal") {
        equal_requests::part(&client, scale, run_id)
            .await
            .iter()
            .for_each(|l| println!("{l}"));
        return;
    }
    if std::env::var("BENCH_ONLY").as_deref() == Ok("watch") {
        watch_cost::part(&client, scale)
            .await
            .iter()
            .for_each(|l| println!("{l}"));
        return;
    }
    // First in a full run: its fill is gone again (waited for) before the other parts start.
    let startup_lines = if std::env::var("BENCH_ONLY").is_err() {
        startup::part(&client, scale).await
    } else {
        Vec::new()
    };
    let watch_lines = if std::env::var("BENCH_ONLY").is_err() {
        watch_cost::part(&client, scale).await
    } else {
        Vec::new()
    };
    let archive_lines = archive_part(&client, scale, run_id).await;
    if std::env::var("BENCH_ONLY").as_deref() == Ok("archive") {
        archive_lines.iter().for_each(|l| println!("{l}"));
        return;
    }
    let limit_lines = limit_part(&client, scale, run_id).await;
    let mut results: BTreeMap<(&str, &str), (Figures, Figures)> = BTreeMap::new();
    for limit in LIMITS {
        let (s, r1) = run_workloads(
            &client,
            Gc::Sweeper,
            limit,
            scale,
            &format!("s-{}-{run_id}", limit.name),
        )
        .await;
        drop(r1);
        let (k, r2) = run_workloads(
            &client,
            Gc::Kcm,
            limit,
            scale,
            &format!("k-{}-{run_id}", limit.name),
        )
        .await;
        drop(r2);
        results.insert(("x", limit.name), (s, k));
    }
    let equal_lines = equal_requests::part(&client, scale, run_id).await;

    // memory: 100,000 extra objects tracked.
    let extra = ((100_000.0 * scale) as usize).max(100);
    let ns = format!("bench-mem-{run_id}");
    namespace(&client, &ns).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let t0 = Instant::now();
    for chunk in 0..extra.div_ceil(10_000) {
        let n = (extra - chunk * 10_000).min(10_000);
        create_many(&api, &format!("m{chunk}"), n, "mem", None).await;
    }
    eprintln!(
        "created {extra} objects in {:.0}s",
        t0.elapsed().as_secs_f64()
    );
    let listed = api
        .list_metadata(&ListParams::default().labels("bench=mem").limit(1))
        .await
        .unwrap();
    let _ = listed;
    let mut memory = Vec::new();
    for limit in LIMITS {
        let mut per = Vec::new();
        for gc in [Gc::Sweeper, Gc::Kcm] {
            let r = start(gc, limit);
            probe(&client, &ns).await;
            let full = stable_rss(r.child.id()).await;
            let idle = {
                let (s, k) = &results[&("x", limit.name)];
                if gc == Gc::Sweeper {
                    s.idle_rss
                } else {
                    k.idle_rss
                }
            };
            let per_object = full.saturating_sub(idle) as f64 / extra as f64;
            eprintln!(
                "{gc:?} {}: RSS {} MiB with {extra} extra objects, idle {} MiB: {per_object:.0} B/object",
                limit.name,
                full >> 20,
                idle >> 20
            );
            per.push(per_object);
        }
        memory.push((limit.name, per[0], per[1]));
    }
    drop_namespace(&client, &ns).await;

    let line = |name: String, s: f64, k: f64, unit: &str| {
        println!(
            "BENCH cascade.{name} sweeper={s:.2} kcm={k:.2} ratio={:.2} unit={unit}",
            s / k
        );
    };
    for limit in LIMITS {
        let (s, k) = &results[&("x", limit.name)];
        line(
            format!("background.{}", limit.name),
            s.background,
            k.background,
            "objects/s",
        );
        line(
            format!("foreground.{}", limit.name),
            s.foreground,
            k.foreground,
            "objects/s",
        );
    }
    for (name, s, k) in memory {
        line(format!("memory.{name}"), s, k, "bytes/object");
    }
    let (s_calls, k_calls): (Vec<f64>, Vec<f64>) = LIMITS
        .iter()
        .map(|l| {
            let (s, k) = &results[&("x", l.name)];
            (s.calls_per_dependent, k.calls_per_dependent)
        })
        .unzip();
    let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    line(
        "calls_per_dependent".into(),
        avg(&s_calls),
        avg(&k_calls),
        "calls",
    );
    equal_lines.iter().for_each(|l| println!("{l}"));
    limit_lines.iter().for_each(|l| println!("{l}"));
    archive_lines.iter().for_each(|l| println!("{l}"));
    startup_lines.iter().for_each(|l| println!("{l}"));
    watch_lines.iter().for_each(|l| println!("{l}"));
}
