//! Benchmark of phase 2 (external resources) against LocalStack: sweeper's mode (cleaners in
//! dependency order, bounded concurrent deletes, bulk discovery) versus a CAPA-like baseline (one
//! flat tagging list, one resource at a time). Each mode gets its own freshly created cluster of
//! 100 load balancers (classic / application / network), 100 target groups (a third attached to
//! the ALBs) and 100 security groups, and the same fixed latency per AWS call
//! (`BENCH_LATENCY_MS`, default 80). Zero-latency figures are printed too.
//!
//! Run: `source .state/env && cargo run --release -p sweeper-services --example bench_external`

use futures::StreamExt;
use std::time::{Duration, Instant};
use sweeper_services::aws::sdk::aws_config::SdkConfig;
use sweeper_services::aws::sdk::elbv2;
use sweeper_services::aws::teardown::{AwsClients, PhaseReport, TeardownRequest, phase2_pass};
use sweeper_services::aws::testing::build::{
    byo_network, classic_lb, cloud, listener, sg, tg, v2_lb,
};
use sweeper_services::aws::testing::{Recorder, baseline_phase2, localstack};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
const N: usize = 100;
const CREATE_CONCURRENCY: usize = 16;

/// Creates the cluster's 300 resources; returns how many. The shared builders panic on a failed
/// create: a half-built world would make the figures meaningless anyway.
async fn world(c: &AwsClients, n: &str) -> usize {
    let owned = [cloud(n, "owned")];
    let (vpc, subnets) = byo_network(c).await;
    let (owned, vpc, subnets) = (&owned, &vpc, &subnets);
    futures::stream::iter(0..N)
        .for_each_concurrent(CREATE_CONCURRENCY, |i| async move {
            // Load balancer i: classic, application or network; target group i attached to ALBs.
            let alb = match i % 3 {
                0 => {
                    classic_lb(c, &format!("{n}-c{i}"), &subnets[0], owned).await;
                    None
                }
                m => {
                    let ty = if m == 1 {
                        elbv2::types::LoadBalancerTypeEnum::Application
                    } else {
                        elbv2::types::LoadBalancerTypeEnum::Network
                    };
                    let arn = v2_lb(c, &format!("{n}-l{i}"), ty, subnets, owned).await;
                    (m == 1).then_some(arn)
                }
            };
            let tg = tg(c, &format!("{n}-t{i}"), vpc, owned).await;
            if let Some(lb) = alb {
                listener(c, &lb, &tg).await;
            }
            sg(c, vpc, &format!("{n}-s{i}"), owned).await;
        })
        .await;
    3 * N
}

struct Run {
    secs: f64,
    calls: usize,
    resources: usize,
}

async fn run(sdk: &SdkConfig, latency: Duration, baseline: bool) -> Res<Run> {
    let cluster = localstack::unique_cluster("bench");
    // Setup keeps the SDK's standard retries (see `retrying_clients`).
    let plain = localstack::retrying_clients(sdk);
    let resources = world(&plain, &cluster).await;
    let rec = Recorder::new().with_latency(latency);
    let clients = rec.clients(sdk);
    let start = Instant::now();
    let report: PhaseReport = if baseline {
        baseline_phase2(&clients, &cluster).await
    } else {
        phase2_pass(&clients, &TeardownRequest::new(&cluster)).await
    };
    let secs = start.elapsed().as_secs_f64();
    let calls = rec.calls().len();
    eprintln!(
        "{} latency={}ms: {:.2}s, {} calls, deleted {}, remaining {}, errors {}",
        if baseline { "baseline" } else { "sweeper " },
        latency.as_millis(),
        secs,
        calls,
        report.deleted.len(),
        report.remaining.len(),
        report.errors.len()
    );
    for (r, why) in report.remaining.iter().take(3) {
        eprintln!("  remaining {r}: {why}");
    }
    for e in report.errors.iter().take(3) {
        eprintln!("  error {e}");
    }
    Ok(Run {
        secs,
        calls,
        resources,
    })
}

#[tokio::main]
async fn main() -> Res<()> {
    let latency_ms: u64 = std::env::var("BENCH_LATENCY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(80);
    let sdk = localstack::sdk().await;
    let zero_s = run(&sdk, Duration::ZERO, false).await?;
    let zero_b = run(&sdk, Duration::ZERO, true).await?;
    println!(
        "zero latency: sweeper={:.2}s baseline={:.2}s ratio={:.2} (calls sweeper={} baseline={})",
        zero_s.secs,
        zero_b.secs,
        zero_b.secs / zero_s.secs,
        zero_s.calls,
        zero_b.calls
    );
    let lat = Duration::from_millis(latency_ms);
    let s = run(&sdk, lat, false).await?;
    let b = run(&sdk, lat, true).await?;
    println!(
        "latency {latency_ms} ms per call: baseline calls={}",
        b.calls
    );
    println!(
        "BENCH external.phase2 sweeper={:.2} baseline={:.2} ratio={:.2} unit=s",
        s.secs,
        b.secs,
        b.secs / s.secs
    );
    println!(
        "BENCH external.calls sweeper={} resources={} ratio={:.3} unit=calls",
        s.calls,
        s.resources,
        s.calls as f64 / s.resources as f64
    );
    Ok(())
}
