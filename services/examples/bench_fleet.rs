//! Benchmark of a fleet teardown against LocalStack, the size of a real management cluster: 100
//! clusters of 32 resources each, spread over 5 accounts and 3 regions, all deleted at once.
//!
//! - sweeper: every cluster in its own session (the session cache, static identities per
//!   account, the cluster's region), every account's sessions sharing the request budget at its
//!   default (`AccountBudget::DEFAULT`, `--aws-account-qps`/`--aws-account-burst`), at most
//!   `BENCH_FLEET_CONCURRENCY` (default 8, the `--external-concurrency` default) teardowns at
//!   once, each passes until done.
//! - baseline, CAPA-shaped: one cluster after another, each with CAPA's phase 2 (one flat tagging
//!   list, one resource at a time: `baseline_phase2`), then the network (sweeper's phases 1 and
//!   3, as CAPA's own reconcile deletes its network after its gc). No budget (CAPA has none; one
//!   call at a time never reaches it anyway). Measured in full, never extrapolated.
//!
//! Each cluster: a CAPA-managed VPC and subnet (tagged with CAPA's key), 28 resources the cloud
//! provider made (`kubernetes.io/cluster/<name>=owned`): 8 network load balancers, 8 target
//! groups, 12 security groups; and 2 Karpenter instance profiles (issue #34; IAM is global, so
//! every pass of every cluster of an account needs the account's profile listing). Every AWS call
//! gets `BENCH_LATENCY_MS` (default 80) of added latency, as a real region has.
//! `BENCH_FLEET_CLUSTERS` (default 100) scales the fleet down for functional runs.
//!
//! Every HTTP request sweeper's sessions send is logged (`testing::AccountThrottle`: account,
//! operation, time; the SDK's retries are off, so one attempt is one request). Prints:
//! - `BENCH external.fleet sweeper=<s> baseline=<s> ratio=<baseline/sweeper> clusters=<n>
//!   accounts=5 regions=3 unit=s`: the time to all released.
//! - `BENCH external.fleet.account_peak calls_per_second=<p> over_5s=<q> budget=<qps>
//!   burst=<b> unit=calls/s`: the most requests any one account sent in one 1-s window (windows
//!   counted from the start of sweeper's run), and in one 5-s window per second, against the
//!   budget; the bucket bounds the first to `qps + burst`, the second to `qps + burst / 5`.
//! - `BENCH external.fleet.calls per_resource=<r> listing_pages=<n> sessions=<s> unit=calls`:
//!   `per_resource` is the requests that are not listings (every operation not named
//!   `Describe*`, `List*` or `Get*`, nor a REST `GET`: deletes, revokes, deregisters, removes),
//!   divided by the resources deleted (32 per cluster); `listing_pages` is the
//!   `Describe*`/`List*`/`Get*`/`GET` requests (every page one request), `sts:GetCallerIdentity` (one per session built) apart in
//!   `sessions`. Target: per_resource <= 1.1.
//! - `BENCH external.fleet.requests sweeper=<n> baseline=<n> sweeper_per_s=<r> baseline_per_s=<r>
//!   at_budget=<r> unit=requests`: every request each side sent, and per second of its run;
//!   `at_budget` is the ratio sweeper would reach sending its requests at exactly its budget
//!   (accounts x qps) against the baseline's measured time: the most its pacing could give; above
//!   that only fewer requests help. (The baseline is not one request at a time throughout: its
//!   network part is sweeper's phases, whose cleaners run concurrently.)
//! - `BENCH external.fleet.iam_listings made=<n> passes=<p> accounts=5 clusters=<n>
//!   unit=listings`: the IAM listings sweeper's passes made, shared per account (`listings`),
//!   against the passes that needed one.
//!
//! `BENCH_FLEET_LOG=<file>` also writes every request of sweeper's part there, a line each:
//! milliseconds from its start, account, region, service, operation (tab-separated).
//!
//! Run: `source .state/env && cargo run --release -p sweeper-aws --example bench_fleet`

use futures::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use sweeper_aws::budget::AccountBudget;
use sweeper_aws::phases::{AwsClients, PassRequest, teardown_pass};
use sweeper_aws::sdk::aws_config::SdkConfig;
use sweeper_aws::session::{Principal, SessionCache, SessionSpec, StaticKeys, listings::Listings};
use sweeper_aws::testing::build::{cloud, network_in, nlb, sg, tag, tg};
use sweeper_aws::testing::leaks::{karpenter_profile, node_role};
use sweeper_aws::testing::{AccountThrottle, Sent, baseline_phase2, localstack, with_latency};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const ACCOUNTS: [&str; 5] = [
    "610000000001",
    "610000000002",
    "610000000003",
    "610000000004",
    "610000000005",
];
const REGIONS: [&str; 3] = ["us-east-1", "eu-west-1", "ap-southeast-2"];
const CREATE_CONCURRENCY: usize = 16;

/// One cluster of the fleet and where it lives.
struct Cluster {
    name: String,
    account: &'static str,
    region: &'static str,
    resources: usize,
}

fn env_num(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Builds one cluster's 32 resources in its account and region.
async fn build(base: &SdkConfig, prefix: &str, i: usize) -> Cluster {
    let account = ACCOUNTS[i % ACCOUNTS.len()];
    let region = REGIONS[i % REGIONS.len()];
    let c = localstack::retrying_clients(&localstack::sdk_as(base, region, account));
    let name = localstack::unique_cluster(prefix);
    let net = network_in(&c, &format!("{region}a")).await;
    let capa = format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{name}");
    for id in [&net.vpc, &net.subnet] {
        tag(&c, id, &capa, "owned").await;
    }
    let owned = [cloud(&name, "owned")];
    let short = &name[name.len().saturating_sub(8)..];
    let (c, net, owned, name_ref) = (&c, &net, &owned, &name);
    futures::stream::iter(0..12)
        .for_each_concurrent(CREATE_CONCURRENCY, |k| async move {
            if k < 8 {
                nlb(c, net, &format!("{short}-l{k}"), owned).await;
                tg(c, &format!("{short}-t{k}"), &net.vpc, owned).await;
            }
            sg(c, &net.vpc, &format!("{name_ref}-s{k}"), owned).await;
        })
        .await;
    let role = format!("{name}-node-role");
    node_role(c, &role).await;
    for k in 0..2 {
        karpenter_profile(c, name_ref, &format!("{:04}", 1000 + k), region, &role).await;
    }
    Cluster {
        name,
        account,
        region,
        resources: 2 + 8 + 8 + 12 + 2,
    }
}

async fn fleet(base: &SdkConfig, prefix: &str, clusters: usize) -> Vec<Cluster> {
    futures::stream::iter(0..clusters)
        .map(|i| build(base, prefix, i))
        .buffer_unordered(4)
        .collect()
        .await
}

fn spec(c: &Cluster) -> SessionSpec {
    SessionSpec {
        region: Some(c.region.to_string()),
        principal: Principal::Static(StaticKeys {
            access_key_id: c.account.to_string(),
            secret_access_key: "test".into(),
            session_token: None,
        }),
        chain: vec![format!("AWSClusterStaticIdentity {}", c.account)],
    }
}

/// Passes until done, returning how many; panics after `max` (a benchmark that did not finish
/// measures nothing).
async fn until_done(clients: &AwsClients, req: &PassRequest, max: usize) -> usize {
    for pass in 1..=max {
        if teardown_pass(clients, req).await.done {
            return pass;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{} not torn down after {max} passes", req.cluster_name);
}

/// What sweeper's mode measured: its time, its passes, and the IAM listings its passes made.
struct Measured {
    secs: f64,
    passes: usize,
    listings_made: usize,
}

async fn sweeper_mode(sessions: &SessionCache, fleet: &[Cluster], concurrency: usize) -> Measured {
    let start = Instant::now();
    // Each account's shared listings, as its sessions hold them (one per account).
    let shared: Mutex<Vec<Arc<Listings>>> = Mutex::default();
    let passes = std::sync::atomic::AtomicUsize::new(0);
    let (shared_ref, passes_ref) = (&shared, &passes);
    futures::stream::iter(fleet)
        .for_each_concurrent(concurrency, |c| async move {
            let s = sessions.session(&spec(c)).await.expect("session");
            if let Some(l) = &s.clients.listings {
                let mut all = shared_ref.lock().unwrap();
                if !all.iter().any(|x| Arc::ptr_eq(x, l)) {
                    all.push(l.clone());
                }
            }
            let n = until_done(&s.clients, &PassRequest::new(&c.name), 30).await;
            passes_ref.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        })
        .await;
    let secs = start.elapsed().as_secs_f64();
    let listings_made = shared.lock().unwrap().iter().map(|l| l.made()).sum();
    Measured {
        secs,
        passes: passes.into_inner(),
        listings_made,
    }
}

async fn baseline_mode(sessions: &SessionCache, fleet: &[Cluster]) -> f64 {
    let start = Instant::now();
    for c in fleet {
        let s = sessions.session(&spec(c)).await.expect("session");
        let p2 = baseline_phase2(&s.clients, &c.name).await;
        if !p2.errors.is_empty() || !p2.remaining.is_empty() {
            eprintln!(
                "baseline {}: phase 2 left {} and failed {}",
                c.name,
                p2.remaining.len(),
                p2.errors.len()
            );
        }
        until_done(&s.clients, &PassRequest::new(&c.name), 30).await;
    }
    start.elapsed().as_secs_f64()
}

/// What sweeper's requests were, from the log of every request its sessions sent.
struct Requests {
    /// The most any one account sent in one 1-s window from `start`.
    peak: usize,
    /// The most any one account sent in one 5-s window, per second (the burst weighs a fifth:
    /// the bucket bounds it to `qps + burst / 5`).
    sustained: f64,
    listings: usize,
    sessions: usize,
    others: usize,
}

fn requests(log: &[Sent], start: Instant) -> Requests {
    let mut per_window: HashMap<(&str, u64), usize> = HashMap::new();
    let (mut listings, mut sessions, mut others) = (0, 0, 0);
    let mut by_operation: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in log {
        *by_operation.entry(r.operation.as_str()).or_default() += 1;
        let window = r.at.saturating_duration_since(start).as_secs();
        *per_window.entry((r.key.as_str(), window)).or_default() += 1;
        let op = r.operation.as_str();
        if op == "GetCallerIdentity" {
            sessions += 1;
        } else if ["Describe", "List", "Get", "GET "]
            .iter()
            .any(|p| op.starts_with(p))
        {
            listings += 1;
        } else {
            others += 1;
        }
    }
    // Where the requests went, for the reader of a run (stderr): which listings a pass repeats.
    eprintln!("sweeper's requests by operation: {by_operation:?}");
    Requests {
        peak: per_window.values().copied().max().unwrap_or(0),
        sustained: {
            let mut per_five: HashMap<(&str, u64), usize> = HashMap::new();
            for ((key, w), n) in &per_window {
                *per_five.entry((key, w / 5)).or_default() += n;
            }
            per_five.values().copied().max().unwrap_or(0) as f64 / 5.0
        },
        listings,
        sessions,
        others,
    }
}

/// The request log as tab-separated lines (see `BENCH_FLEET_LOG`).
fn write_log(path: &str, log: &[Sent], start: Instant) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for r in log {
        let ms = r.at.saturating_duration_since(start).as_millis();
        writeln!(
            out,
            "{ms}\t{}\t{}\t{}\t{}",
            r.key, r.region, r.service, r.operation
        )?;
    }
    out.flush()
}

#[tokio::main]
async fn main() -> Res<()> {
    let latency = Duration::from_millis(env_num("BENCH_LATENCY_MS", 80));
    let concurrency = env_num("BENCH_FLEET_CONCURRENCY", 8) as usize;
    let clusters = env_num("BENCH_FLEET_CLUSTERS", 100) as usize;
    let budget = AccountBudget::DEFAULT;
    let base = localstack::sdk().await;
    let log = AccountThrottle::new();
    let log_ = log.clone();
    let sessions = SessionCache::new(base.clone(), None)
        .with_hook(Arc::new(move |_spec, sdk| {
            log_.install(with_latency(sdk, latency))
        }))
        .with_account_budget(budget);
    // The baseline's requests are logged too (no throttling is planned on either log): the
    // ratio's ceiling is set by how many requests each side sends (see the calls line).
    let b_log = AccountThrottle::new();
    let b_log_ = b_log.clone();
    let unbudgeted =
        SessionCache::new(base.clone(), None).with_hook(Arc::new(move |_spec, sdk| {
            b_log_.install(with_latency(sdk, latency))
        }));

    let a = fleet(&base, "flt", clusters).await;
    let resources: usize = a.iter().map(|c| c.resources).sum();
    eprintln!(
        "fleet: {} clusters, {resources} resources, {} accounts, {} regions",
        a.len(),
        ACCOUNTS.len(),
        REGIONS.len()
    );
    log.reset();
    let start = Instant::now();
    let m = sweeper_mode(&sessions, &a, concurrency).await;
    let r = requests(&log.log(), start);
    if let Ok(path) = std::env::var("BENCH_FLEET_LOG") {
        write_log(&path, &log.log(), start)?;
    }
    let s = m.secs;
    eprintln!("sweeper: {s:.2}s (concurrency {concurrency})");
    let b_fleet = fleet(&base, "flb", clusters).await;
    b_log.reset();
    let b = baseline_mode(&unbudgeted, &b_fleet).await;
    let b_requests = b_log.log().len();
    eprintln!("baseline: {b:.2}s (one cluster at a time)");
    println!(
        "BENCH external.fleet sweeper={s:.2} baseline={b:.2} ratio={:.2} clusters={} accounts={} regions={} unit=s",
        b / s,
        a.len(),
        ACCOUNTS.len(),
        REGIONS.len()
    );
    println!(
        "BENCH external.fleet.account_peak calls_per_second={} over_5s={:.1} budget={} burst={} unit=calls/s",
        r.peak, r.sustained, budget.qps, budget.burst
    );
    println!(
        "BENCH external.fleet.calls per_resource={:.3} listing_pages={} sessions={} unit=calls",
        r.others as f64 / resources as f64,
        r.listings,
        r.sessions
    );
    // Both sides' requests, all of them (sessions included): the budget lets sweeper send at
    // most accounts x qps per second, so at its budget the ratio is the baseline's time over
    // sweeper's requests / (accounts x qps); past that only fewer requests raise it.
    let s_requests = r.listings + r.others + r.sessions;
    println!(
        "BENCH external.fleet.requests sweeper={s_requests} baseline={b_requests} sweeper_per_s={:.1} baseline_per_s={:.1} at_budget={:.2} unit=requests",
        s_requests as f64 / s,
        b_requests as f64 / b,
        b * f64::from(budget.qps) * ACCOUNTS.len() as f64 / s_requests.max(1) as f64
    );
    // Every pass lists the account's instance profiles (a Karpenter cluster's profiles are found
    // by name); without the sharing, `made` would equal `passes`.
    println!(
        "BENCH external.fleet.iam_listings made={} passes={} accounts={} clusters={} unit=listings",
        m.listings_made,
        m.passes,
        ACCOUNTS.len(),
        a.len()
    );
    Ok(())
}
