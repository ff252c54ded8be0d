//! Benchmark of phase 2 (external resources) against LocalStack: sweeper's mode (cleaners in
//! dependency order, bounded concurrent deletes, bulk discovery) versus a CAPA-like baseline (one
//! flat tagging list, one resource at a time). Each mode gets its own freshly created cluster of
//! 100 load balancers (classic / application / network), 100 target groups (a third attached to
//! the ALBs) and 100 security groups, and the same fixed latency per AWS call
//! (`BENCH_LATENCY_MS`, default 80). Zero-latency figures are printed too.
//!
//! Run: `source .state/env && cargo run --release -p sweeper-services --example bench_external`

use futures::StreamExt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use sweeper_services::aws::interceptor::Recorder;
use sweeper_services::aws::sdk::aws_config::{self, BehaviorVersion, Region, SdkConfig};
use sweeper_services::aws::sdk::{ec2, elb, elbv2};
use sweeper_services::aws::teardown::{
    AwsClients, PhaseReport, TeardownRequest, baseline_phase2, phase2_pass,
};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
const N: usize = 100;
const CREATE_CONCURRENCY: usize = 16;

fn tag(n: &str) -> (String, String) {
    (format!("kubernetes.io/cluster/{n}"), "owned".into())
}

/// Creates the cluster's 300 resources; returns how many.
async fn world(c: &AwsClients, n: &str) -> Res<usize> {
    let (k, v) = tag(n);
    let vpc = c.ec2.create_vpc().cidr_block("10.0.0.0/16").send().await?;
    let vpc = vpc
        .vpc()
        .and_then(|v| v.vpc_id())
        .ok_or("no vpc id")?
        .to_string();
    let mut subnets = Vec::new();
    for (cidr, az) in [("10.0.1.0/24", "us-east-1a"), ("10.0.2.0/24", "us-east-1b")] {
        let s = c
            .ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(cidr)
            .availability_zone(az)
            .send()
            .await?;
        subnets.push(
            s.subnet()
                .and_then(|s| s.subnet_id())
                .ok_or("no subnet id")?
                .to_string(),
        );
    }
    let (k, v, vpc, subnets) = (&k, &v, &vpc, &subnets);
    let results: Vec<Res<()>> = futures::stream::iter(0..N)
        .map(|i| async move {
            // Load balancer i: classic, application or network; target group i attached to ALBs.
            let lb_arn = match i % 3 {
                0 => {
                    c.elb
                        .create_load_balancer()
                        .load_balancer_name(format!("{n}-c{i}"))
                        .subnets(&subnets[0])
                        .listeners(
                            elb::types::Listener::builder()
                                .protocol("TCP")
                                .load_balancer_port(80)
                                .instance_port(80)
                                .build()?,
                        )
                        .tags(elb::types::Tag::builder().key(k).value(v).build()?)
                        .send()
                        .await?;
                    None
                }
                m => {
                    let ty = if m == 1 {
                        elbv2::types::LoadBalancerTypeEnum::Application
                    } else {
                        elbv2::types::LoadBalancerTypeEnum::Network
                    };
                    let out = c
                        .elbv2
                        .create_load_balancer()
                        .name(format!("{n}-l{i}"))
                        .r#type(ty.clone())
                        .set_subnets(Some(subnets.clone()))
                        .tags(elbv2::types::Tag::builder().key(k).value(v).build())
                        .send()
                        .await?;
                    let arn = out
                        .load_balancers()
                        .first()
                        .and_then(|l| l.load_balancer_arn())
                        .ok_or("no lb arn")?
                        .to_string();
                    (m == 1).then_some(arn)
                }
            };
            let tg = c
                .elbv2
                .create_target_group()
                .name(format!("{n}-t{i}"))
                .protocol(elbv2::types::ProtocolEnum::Http)
                .port(80)
                .vpc_id(vpc)
                .tags(elbv2::types::Tag::builder().key(k).value(v).build())
                .send()
                .await?;
            let tg = tg
                .target_groups()
                .first()
                .and_then(|t| t.target_group_arn())
                .ok_or("no tg arn")?
                .to_string();
            if let Some(lb) = lb_arn {
                c.elbv2
                    .create_listener()
                    .load_balancer_arn(lb)
                    .protocol(elbv2::types::ProtocolEnum::Http)
                    .port(80)
                    .default_actions(
                        elbv2::types::Action::builder()
                            .r#type(elbv2::types::ActionTypeEnum::Forward)
                            .target_group_arn(tg)
                            .build(),
                    )
                    .send()
                    .await?;
            }
            c.ec2
                .create_security_group()
                .vpc_id(vpc)
                .group_name(format!("{n}-s{i}"))
                .description("bench")
                .tag_specifications(
                    ec2::types::TagSpecification::builder()
                        .resource_type(ec2::types::ResourceType::SecurityGroup)
                        .tags(ec2::types::Tag::builder().key(k).value(v).build())
                        .build(),
                )
                .send()
                .await?;
            Ok(())
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .collect()
        .await;
    for r in results {
        r?;
    }
    Ok(3 * N)
}

struct Run {
    secs: f64,
    calls: usize,
    resources: usize,
}

async fn run(sdk: &SdkConfig, latency: Duration, baseline: bool) -> Res<Run> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let cluster = format!("bench-{:x}", nanos % 0xffff_ffff);
    // Setup keeps the SDK's standard retries: LocalStack answers concurrent creates with an
    // occasional 500 InternalError ("dictionary changed size during iteration").
    let plain = AwsClients {
        ec2: ec2::Client::new(sdk),
        elb: elb::Client::new(sdk),
        elbv2: elbv2::Client::new(sdk),
        tagging: sweeper_services::aws::sdk::tagging::Client::new(sdk),
    };
    let resources = world(&plain, &cluster).await?;
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
    let endpoint =
        std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| "http://127.0.0.1:4566".into());
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(
            std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
        ))
        .credentials_provider(ec2::config::Credentials::new(
            "test", "test", None, None, "bench",
        ))
        .load()
        .await;
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
