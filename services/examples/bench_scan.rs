//! Benchmark of the leak scan (`sweeper scan`, issue #45) against LocalStack: its calls against a
//! per-cluster baseline, and its time as the live clusters grow from 20 to 200.
//!
//! Two worlds, each in 3 fresh LocalStack accounts (12-digit access keys no earlier run used, so
//! runs never mix) × 2 regions, one VPC per (account, region):
//! - 200 orphaned names, spread over the 6 (account, region) pairs, each with one security group
//!   and one 1 GiB volume tagged `kubernetes.io/cluster/<name>=owned`: 400 resources;
//! - live names holding 400 tagged security groups between them: 200 names × 2 (world `live200`)
//!   or 20 names × 20 (world `live20`), each name's groups in one (account, region). Both worlds
//!   thus have the same 800 tagged resources (126 to 148 per (account, region), 2 tagging pages
//!   of 100 each): what grows is the number of live clusters, not the resources the tagging API
//!   pages through (pages grow with tagged resources, one per 100, by design).
//!
//! sweeper: `scan_region` for each (account, region), all 6 at once, as `sweeper scan` runs them,
//! given the live names. Its calls are the scan's own count by operation (`RegionScan::calls`):
//! the tagging pages, `eks:ListClusters` (LocalStack serves no EKS: an SDK mock answering "no
//! clusters", behind the same added latency), and the candidates' volume describes.
//!
//! Baseline, per cluster: one `tag:GetResources` (all pages) with the TagFilter
//! `kubernetes.io/cluster/<name>` = `owned`, for each of the 200 orphaned names, in each of the
//! 6 (account, region) pairs it could be in; the 6 pairs at once, names one after another. It is
//! given the orphaned names for free (a real per-cluster tool has no such list) and asks one tag
//! key where the scan matches five ownership rules: a lower bound. `baseline_located` is the
//! same with each name asked only where it is.
//!
//! IAM: every live name and the first 30 orphaned names have one Karpenter instance profile in
//! their account; the scan lists each account's IAM once (`scan::iam`), reading only the profiles
//! of names not live. `BENCH scan.iam live20=<n> live200=<n>` are those calls, the same whatever
//! the number of live clusters.
//!
//! Every AWS call gets `BENCH_LATENCY_MS` (default 80) of added latency. `BENCH_RUNS` (default 5)
//! scans of each world, alternating; medians. Prints
//! `BENCH scan.calls sweeper=<n> baseline=<n> ratio=<baseline/sweeper> unit=calls` (world
//! live200) and `BENCH scan.flat live20=<s> live200=<s> ratio=<live200/live20> unit=s`, each with
//! a detail line. Fixtures are built without the added latency.
//!
//! Run: `source .state/env && cargo run --release -p sweeper-aws --example bench_scan`

use aws_smithy_mocks::{RuleMode, create_mock_http_client, mock, mock_client};
use futures::StreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use sweeper_aws::phases::AwsClients;
use sweeper_aws::scan::iam::account_iam;
use sweeper_aws::scan::{RegionScan, ScanInput, scan_region};
use sweeper_aws::sdk::aws_config::SdkConfig;
use sweeper_aws::sdk::eks::operation::list_clusters::ListClustersOutput;
use sweeper_aws::sdk::tagging::types::TagFilter;
use sweeper_aws::testing::build::{cloud, fallible, network_in, sg};
use sweeper_aws::testing::{leaks, localstack, with_latency};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const REGIONS: [&str; 2] = ["us-east-1", "eu-west-1"];
const ORPHANS: usize = 200;
/// The live names' security groups, split evenly among them.
const LIVE_RESOURCES: usize = 400;
const CREATE_CONCURRENCY: usize = 16;
/// Orphans that also left a Karpenter instance profile (every live name has one).
const ORPHAN_PROFILES: usize = 30;

/// One (account, region) of a world.
#[derive(Clone)]
struct Place {
    account: String,
    region: &'static str,
}

struct World {
    places: Vec<Place>,
    orphans: Vec<String>,
    live: Vec<String>,
}

fn env_num(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Three LocalStack accounts no earlier run used (as services/tests/aws_teardown/scan.rs).
fn fresh_accounts(salt: u64) -> Vec<String> {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    (0..3)
        .map(|k| {
            let n = 200_000_000_000 + (micros + (salt * 3 + k) * 7919) % 700_000_000_000;
            n.to_string()
        })
        .collect()
}

/// Builds a world with `live_names` live names; fixtures without latency.
async fn world(base: &SdkConfig, prefix: &str, salt: u64, live_names: usize) -> World {
    let accounts = fresh_accounts(salt);
    let places: Vec<Place> = accounts
        .iter()
        .flat_map(|a| {
            REGIONS.iter().map(move |r| Place {
                account: a.clone(),
                region: r,
            })
        })
        .collect();
    let clients: Vec<AwsClients> = places
        .iter()
        .map(|p| localstack::retrying_clients(&localstack::sdk_as(base, p.region, &p.account)))
        .collect();
    let mut vpcs = Vec::new();
    for (p, c) in places.iter().zip(&clients) {
        vpcs.push(network_in(c, &format!("{}a", p.region)).await.vpc);
    }
    let run = localstack::unique_cluster(prefix);
    let orphans: Vec<String> = (0..ORPHANS).map(|i| format!("{run}-o{i}")).collect();
    let live: Vec<String> = (0..live_names).map(|i| format!("{run}-l{i}")).collect();
    // (place, name, security group name, with a volume too)
    let mut items: Vec<(usize, String, String, bool)> = Vec::new();
    for (i, n) in orphans.iter().enumerate() {
        items.push((i % places.len(), n.clone(), format!("{n}-sg"), true));
    }
    let per_live = LIVE_RESOURCES / live_names;
    for (i, n) in live.iter().enumerate() {
        for k in 0..per_live {
            items.push((i % places.len(), n.clone(), format!("{n}-s{k}"), false));
        }
    }
    let (places_ref, clients_ref, vpcs_ref) = (&places, &clients, &vpcs);
    futures::stream::iter(items)
        .for_each_concurrent(CREATE_CONCURRENCY, |(at, name, group, volume)| async move {
            let c = &clients_ref[at];
            let owned = [cloud(&name, "owned")];
            sg(c, &vpcs_ref[at], &group, &owned).await;
            if volume {
                let az = format!("{}a", places_ref[at].region);
                fallible::volume(c, &az, &owned)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        })
        .await;
    // Karpenter's instance profiles (IAM, listed once per account): one per live name, and
    // one for each of the first orphans, in the (account, region) of the name.
    for (p, c) in places.iter().zip(&clients).step_by(REGIONS.len()) {
        leaks::node_role(c, &format!("{run}-node-{}", p.account)).await;
    }
    let profiles: Vec<(usize, String)> = live
        .iter()
        .enumerate()
        .map(|(i, n)| (i % places.len(), n.clone()))
        .chain(
            orphans
                .iter()
                .enumerate()
                .take(ORPHAN_PROFILES)
                .map(|(i, n)| (i % places.len(), n.clone())),
        )
        .collect();
    futures::stream::iter(profiles)
        .for_each_concurrent(CREATE_CONCURRENCY, |(at, name)| {
            let p = &places_ref[at];
            let role = format!("{run}-node-{}", p.account);
            async move {
                leaks::karpenter_profile(&clients_ref[at], &name, "1", p.region, &role).await;
            }
        })
        .await;
    World {
        places,
        orphans,
        live,
    }
}

/// An EKS that has no clusters, each call behind `latency` like the others.
fn no_eks(latency: Duration) -> sweeper_aws::sdk::eks::Client {
    let list = mock!(aws_sdk_eks::Client::list_clusters).then_output(|| {
        ListClustersOutput::builder()
            .set_clusters(Some(vec![]))
            .build()
    });
    let slow = with_latency(
        SdkConfig::builder()
            .http_client(create_mock_http_client())
            .build(),
        latency,
    )
    .http_client()
    .expect("with_latency sets an HTTP client");
    mock_client!(aws_sdk_eks, RuleMode::MatchAny, [&list], |conf| conf
        .http_client(slow.clone()))
}

fn clients(base: &SdkConfig, p: &Place, latency: Duration) -> AwsClients {
    let mut c = localstack::retrying_clients(&with_latency(
        localstack::sdk_as(base, p.region, &p.account),
        latency,
    ));
    c.eks = no_eks(latency);
    c
}

/// sweeper's scan of every (account, region) at once: its time and its reports.
async fn sweeper_scan(base: &SdkConfig, w: &World, latency: Duration) -> (f64, Vec<RegionScan>) {
    let mut input = ScanInput {
        live: w.live.iter().cloned().collect(),
        ..Default::default()
    };
    let all: Vec<(Place, AwsClients)> = w
        .places
        .iter()
        .map(|p| (p.clone(), clients(base, p, latency)))
        .collect();
    let start = Instant::now();
    // IAM once per account, as `sweeper scan` lists it (its calls go with the first region's).
    let firsts: Vec<&(Place, AwsClients)> = all.iter().step_by(REGIONS.len()).collect();
    let listed = futures::future::join_all(firsts.iter().map(|(p, c)| {
        let live = &input.live;
        async move { (p.account.clone(), account_iam(c, live).await) }
    }))
    .await;
    for (account, r) in listed {
        let iam = r.unwrap_or_else(|e| panic!("IAM of {account}: {e}"));
        input.iam.insert(account, std::sync::Arc::new(iam));
    }
    let scans = futures::future::join_all(all.iter().map(|(p, c)| {
        let input = &input;
        async move { scan_region(c, &p.account, p.region, input).await }
    }))
    .await;
    let secs = start.elapsed().as_secs_f64();
    let mut scans = scans
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("the scan failed: {e}"));
    for s in scans.iter_mut().step_by(REGIONS.len()) {
        if let Some(i) = input.iam.get(&s.account) {
            s.calls.extend(i.calls.iter().map(|(k, v)| (*k, *v)));
        }
    }
    // A benchmark that found the wrong orphans measures nothing.
    let found: BTreeSet<&str> = scans
        .iter()
        .flat_map(|s| s.candidates.iter().map(|c| c.cluster.as_str()))
        .collect();
    let resources: usize = scans
        .iter()
        .flat_map(|s| &s.candidates)
        .flat_map(|c| c.resources_by_kind.values())
        .sum();
    let want: BTreeSet<&str> = w.orphans.iter().map(String::as_str).collect();
    assert!(
        found == want && resources == 2 * ORPHANS + ORPHAN_PROFILES,
        "the scan found {} names and {resources} resources, not the {ORPHANS} orphans' {}",
        found.len(),
        2 * ORPHANS + ORPHAN_PROFILES
    );
    (secs, scans)
}

fn calls_by_operation(scans: &[RegionScan]) -> BTreeMap<&'static str, usize> {
    let mut by = BTreeMap::new();
    for s in scans {
        for (op, n) in &s.calls {
            *by.entry(*op).or_default() += n;
        }
    }
    by
}

/// The baseline: its time, its calls, its calls had it known where each name is, and the
/// resources it found.
async fn baseline(base: &SdkConfig, w: &World, latency: Duration) -> (f64, usize, usize, usize) {
    let start = Instant::now();
    let per_place = futures::future::join_all(w.places.iter().enumerate().map(|(at, p)| {
        let c = clients(base, p, latency);
        async move {
            let (mut calls, mut located, mut found) = (0, 0, 0);
            for (i, name) in w.orphans.iter().enumerate() {
                let filter = TagFilter::builder()
                    .key(format!("kubernetes.io/cluster/{name}"))
                    .values("owned")
                    .build();
                let mut pages = c
                    .tagging
                    .get_resources()
                    .tag_filters(filter)
                    .resources_per_page(100)
                    .into_paginator()
                    .send();
                while let Some(page) = pages.next().await {
                    let page = page.unwrap_or_else(|e| panic!("baseline GetResources: {e:?}"));
                    calls += 1;
                    if i % w.places.len() == at {
                        located += 1;
                    }
                    found += page.resource_tag_mapping_list().len();
                }
            }
            (calls, located, found)
        }
    }))
    .await;
    let secs = start.elapsed().as_secs_f64();
    let sum = |f: fn(&(usize, usize, usize)) -> usize| per_place.iter().map(f).sum::<usize>();
    (secs, sum(|t| t.0), sum(|t| t.1), sum(|t| t.2))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Res<()> {
    let latency = Duration::from_millis(env_num("BENCH_LATENCY_MS", 80));
    let runs = env_num("BENCH_RUNS", 5).max(1) as usize;
    let base = localstack::sdk().await;
    let built = Instant::now();
    let w200 = world(&base, "scn", 1, 200).await;
    let w20 = world(&base, "scn", 2, 20).await;
    eprintln!(
        "worlds built in {:.1}s: {ORPHANS} orphans and {LIVE_RESOURCES} live resources each, under 200 and 20 live names",
        built.elapsed().as_secs_f64()
    );
    let (mut t20, mut t200) = (Vec::new(), Vec::new());
    let (mut calls20, mut calls200) = (BTreeMap::new(), BTreeMap::new());
    for run in 0..runs {
        let (s, scans) = sweeper_scan(&base, &w20, latency).await;
        t20.push(s);
        calls20 = calls_by_operation(&scans);
        let (s, scans) = sweeper_scan(&base, &w200, latency).await;
        t200.push(s);
        calls200 = calls_by_operation(&scans);
        eprintln!(
            "run {run}: live20 {:.3}s, live200 {:.3}s",
            t20[run], t200[run]
        );
    }
    let (b_secs, b_calls, b_located, b_found) = baseline(&base, &w200, latency).await;
    assert_eq!(
        b_found,
        2 * ORPHANS,
        "the baseline finds every orphan's resources"
    );
    let s_calls: usize = calls200.values().sum();
    let ops = |m: &BTreeMap<&str, usize>| {
        m.iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    println!(
        "BENCH scan.calls sweeper={s_calls} baseline={b_calls} ratio={:.1} unit=calls",
        b_calls as f64 / s_calls as f64
    );
    println!(
        "BENCH scan.calls.detail sweeper_ops={} baseline_located={b_located} sweeper_s={:.3} baseline_s={b_secs:.2} orphans={ORPHANS} live=200 accounts=3 regions=2 latency_ms={} unit=calls",
        ops(&calls200),
        median(&mut t200.clone()),
        latency.as_millis()
    );
    let iam = |m: &BTreeMap<&str, usize>| {
        m.iter()
            .filter(|(k, _)| k.starts_with("iam."))
            .map(|(_, v)| v)
            .sum::<usize>()
    };
    println!(
        "BENCH scan.iam live20={} live200={} accounts=3 orphan_profiles={ORPHAN_PROFILES} unit=calls",
        iam(&calls20),
        iam(&calls200)
    );
    let (m20, m200) = (median(&mut t20.clone()), median(&mut t200.clone()));
    println!(
        "BENCH scan.flat live20={m20:.3} live200={m200:.3} ratio={:.2} unit=s",
        m200 / m20
    );
    let lo = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    println!(
        "BENCH scan.flat.detail runs={runs} live20_min={:.3} live20_max={:.3} live200_min={:.3} live200_max={:.3} calls_live20={} calls_live200={} tagged_per_world={} latency_ms={} unit=s",
        lo(&t20),
        hi(&t20),
        lo(&t200),
        hi(&t200),
        ops(&calls20),
        ops(&calls200),
        2 * ORPHANS + LIVE_RESOURCES,
        latency.as_millis()
    );
    Ok(())
}
