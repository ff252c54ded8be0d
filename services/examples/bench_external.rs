//! Benchmark of phase 2 (external resources) against LocalStack: sweeper's mode (cleaners in
//! dependency order, bounded concurrent deletes, bulk discovery) versus a CAPA-like baseline (one
//! flat tagging list, one resource at a time). Each mode gets its own freshly created cluster of
//! 100 load balancers (classic / application / network), 100 target groups (a third attached to
//! the ALBs) and 100 security groups tagged by the cloud provider, plus what a search by that tag
//! misses: 10 application load balancers, 10 target groups and 10 security groups of the AWS Load
//! Balancer Controller (`elbv2.k8s.aws/cluster`) and 10 detached VPC CNI interfaces
//! (`cluster.k8s.amazonaws.com/name`), 340 in all; and the same fixed latency per AWS call
//! (`BENCH_LATENCY_MS`, default 80). Zero-latency figures are printed too. The baseline, like
//! CAPA, knows only the cluster tag: it leaves the last 40 behind, which its line shows.
//!
//! Issue #34's leftovers are in the inventory too, with their opt-in tasks turned on (sweeper's
//! request names every task): 10 Karpenter instance profiles (path, cluster, EC2NodeClass and
//! region tags, each holding the run's node role, which stays), 10 `available` EBS CSI volumes
//! (deleted without the snapshot-first option, which would add a snapshot each) and 10 EBS CSI
//! snapshots; and external-dns's records of 10 of the cluster's load balancers (an alias and its
//! TXT companion each, under the owner id sweeper's request names: 10 targets, one Route53
//! change batch): 380 resources. CAPA's gc deletes none of these, so the baseline leaves 80.
//! Issue #44's CAPA leftovers too: CAPA's EventBridgeInstanceState queue and rule (one pair, 2
//! targets of `instance-state-queue`) and CAPA's bootstrap data of 10 machines (10 Secrets
//! Manager secrets and 10 SSM parameters, `bootstrap-data`), which CAPA's gc does not know
//! either: 402 resources, the baseline leaves 102.
//! Not in it: Karpenter's instances (their termination is waited for across passes by design,
//! and this measures one pass); EKS's leftovers (OIDC provider, log group, cluster security
//! group), which need EKS, which LocalStack does not serve.
//!
//! Run: `source .state/env && cargo run --release -p sweeper-aws --example bench_external`

use futures::StreamExt;
use std::time::{Duration, Instant};
use sweeper_aws::phases::{AwsClients, PassRequest, PhaseReport, phase2_pass, registry};
use sweeper_aws::sdk::aws_config::SdkConfig;
use sweeper_aws::sdk::elbv2;
use sweeper_aws::testing::build::{
    byo_network, classic_lb, cloud, eni, listener, sg, tag, tg, v2_lb,
};
use sweeper_aws::testing::leaks::{
    bootstrap_parameter, bootstrap_secret, csi_snapshot, csi_volume, external_dns_pair,
    hosted_zone, instance_state_pair, karpenter_profile, lb_dns_names, node_role, uuid_like,
};
use sweeper_aws::testing::{Recorder, baseline_phase2, localstack};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
const N: usize = 100;
const CREATE_CONCURRENCY: usize = 16;

/// The controller-tagged resources of each kind (LB controller: LB, TG, SG; VPC CNI: ENI).
const M: usize = 10;

/// Issue #34's leftovers of each kind (instance profile, EBS volume, EBS snapshot).
const L: usize = 10;

/// Creates the cluster's 402 resources; returns how many, and its VPC. The shared builders panic
/// on a failed create: a half-built world would make the figures meaningless anyway.
async fn world(c: &AwsClients, n: &str) -> (usize, String) {
    let leftovers = leftovers(c, n).await;
    let owned = [cloud(n, "owned")];
    let (vpc, subnets) = byo_network(c).await;
    let lbc = [("elbv2.k8s.aws/cluster".to_string(), n.to_string())];
    let pods = sg(c, &vpc, &format!("{n}-pods"), &[]).await;
    {
        let (lbc, vpc, subnets, pods) = (&lbc, &vpc, &subnets, &pods);
        futures::stream::iter(0..M)
            .for_each_concurrent(CREATE_CONCURRENCY, |i| async move {
                let ty = elbv2::types::LoadBalancerTypeEnum::Application;
                v2_lb(c, &format!("{n}-k{i}"), ty, subnets, lbc).await;
                tg(c, &format!("{n}-kt{i}"), vpc, lbc).await;
                sg(c, vpc, &format!("{n}-ks{i}"), lbc).await;
                let id = eni(c, &subnets[0], pods).await;
                tag(c, &id, "cluster.k8s.amazonaws.com/name", n).await;
            })
            .await;
    }
    let (owned, vpc_ref, subnets) = (&owned, &vpc, &subnets);
    let vpc = vpc_ref;
    let v2: Vec<Option<String>> = futures::stream::iter(0..N)
        .map(|i| async move {
            // Load balancer i: classic, application or network; target group i attached to ALBs.
            let v2 = match i % 3 {
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
                    Some((m, v2_lb(c, &format!("{n}-l{i}"), ty, subnets, owned).await))
                }
            };
            let tg = tg(c, &format!("{n}-t{i}"), vpc, owned).await;
            if let Some((1, lb)) = &v2 {
                listener(c, lb, &tg).await;
            }
            sg(c, vpc, &format!("{n}-s{i}"), owned).await;
            v2.map(|(_, arn)| arn)
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .collect()
        .await;
    let v2: Vec<String> = v2.into_iter().flatten().take(L).collect();
    let records = dns_records(c, n, &v2).await;
    (3 * N + 4 * M + leftovers + records, vpc.clone())
}

/// external-dns's records for `lbs` (the cluster's own load balancers), owned by the owner id
/// `n` that sweeper's request names: an alias and its TXT companion each, one target of the
/// `dns-record` cleaner per pair.
async fn dns_records(c: &AwsClients, n: &str, lbs: &[String]) -> usize {
    let zone = hosted_zone(c, &format!("{n}.example.com")).await;
    let names = lb_dns_names(c, lbs).await;
    let zone = &zone;
    futures::stream::iter(names.iter().enumerate())
        .for_each_concurrent(CREATE_CONCURRENCY, |(i, dns)| async move {
            external_dns_pair(c, zone, &format!("svc{i}.{n}.example.com."), dns, n).await;
        })
        .await;
    names.len()
}

/// Issue #34's kinds: Karpenter's instance profiles, the EBS CSI driver's volumes and snapshots;
/// issue #44's CAPA leftovers.
async fn leftovers(c: &AwsClients, n: &str) -> usize {
    let region = c.ec2.config().region().map(|r| r.to_string());
    let region = region.as_deref().unwrap_or("us-east-1");
    let role = format!("{n}-node-role");
    node_role(c, &role).await;
    let role = &role;
    futures::stream::iter(0..L)
        .for_each_concurrent(CREATE_CONCURRENCY, |i| async move {
            karpenter_profile(c, n, &format!("{:04}", 1000 + i), region, role).await;
            let vol = csi_volume(c, n, &format!("pvc-{n}-{i}")).await;
            csi_snapshot(c, n, &vol, &format!("snapshot-{n}-{i}")).await;
        })
        .await;
    // Issue #44: CAPA's EventBridgeInstanceState pair (queue and rule), and the bootstrap data
    // of L machines (a secret and a parameter each, tagged as CAPA tags them).
    instance_state_pair(c, n, None, None).await;
    let (capa, cloud) = (
        format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{n}"),
        format!("kubernetes.io/cluster/{n}"),
    );
    let tags = [(capa.as_str(), "owned"), (cloud.as_str(), "owned")];
    let tags = &tags;
    futures::stream::iter(0..L)
        .for_each_concurrent(CREATE_CONCURRENCY, |_| async move {
            let uuid = uuid_like();
            bootstrap_secret(c, &format!("aws.cluster.x-k8s.io/{uuid}-0"), tags).await;
            bootstrap_parameter(c, &format!("/cluster.x-k8s.io/{uuid}/0"), tags).await;
        })
        .await;
    3 * L + 2 + 2 * L
}

struct Run {
    secs: f64,
    calls: usize,
    resources: usize,
    /// What the pass deleted: the baseline leaves behind what CAPA's gc does not know.
    deleted: usize,
    /// `op=count:seconds` of the operations that took most of the server's time.
    by_operation: String,
    /// The calls that change nothing (not a `Delete*`, `Revoke*`, `Untag*`, `Change*`, ...):
    /// listing pages and per-candidate reads, by operation.
    reads: Vec<(String, usize)>,
}

/// Every call whose operation does not change anything, counted by operation: what a pass
/// spends besides its deletes. The issue's target is "≤ 1.1 calls per resource plus listing
/// pages", so the pages are shown apart.
fn reads_of(calls: &[String]) -> Vec<(String, usize)> {
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for op in calls {
        let verb = op.rsplit('.').next().unwrap_or(op);
        let changes = [
            "Delete",
            "Revoke",
            "Terminate",
            "Untag",
            "Create",
            "Detach",
            "Disassociate",
            "Release",
            "Remove",
            "Change",
        ]
        .iter()
        .any(|p| verb.starts_with(p));
        if !changes {
            *by.entry(op.clone()).or_default() += 1;
        }
    }
    by.into_iter().collect()
}

/// Listing operations (a page each): the tagging API's and the describe/list calls.
fn is_listing(op: &str) -> bool {
    let verb = op.rsplit('.').next().unwrap_or(op);
    verb == "GetResources" || verb.starts_with("Describe") || verb.starts_with("List")
}

async fn run(sdk: &SdkConfig, latency: Duration, baseline: bool) -> Res<Run> {
    let cluster = localstack::unique_cluster("bench");
    // Setup keeps the SDK's standard retries (see `retrying_clients`).
    let plain = localstack::retrying_clients(sdk);
    let (resources, vpc) = world(&plain, &cluster).await;
    let rec = Recorder::new().with_latency(latency);
    let clients = rec.clients(sdk);
    let start = Instant::now();
    let report: PhaseReport = if baseline {
        baseline_phase2(&clients, &cluster).await
    } else {
        let req = PassRequest {
            // As the controller passes the AWSCluster's spec.network.vpc.id.
            vpc_ids: vec![vpc],
            // Every task, the opt-in EBS ones included (the gc-tasks annotation naming them all).
            tasks: Some(registry::tasks()),
            ebs_snapshot: false,
            // The cluster names its external-dns owner id: its records go with their LBs.
            external_dns_owner: Some(cluster.clone()),
            ..PassRequest::new(&cluster)
        };
        phase2_pass(&clients, &req).await
    };
    let secs = start.elapsed().as_secs_f64();
    let log = rec.calls();
    let calls = log.len();
    let reads = reads_of(&log);
    let by_operation = rec
        .time_by_operation()
        .iter()
        .take(6)
        .map(|(op, n, d)| format!("{op}={n}:{:.3}", d.as_secs_f64()))
        .collect::<Vec<_>>()
        .join(" ");
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
        deleted: report.deleted.len(),
        by_operation,
        reads,
    })
}

/// LocalStack loads a service's provider on the service's first request: the tagging API's took
/// 0.8 s in a freshly started LocalStack (it imports the backends it reads), which the first
/// timed pass (sweeper's, at 0 ms) paid and the baseline's did not. Untimed, once, before any pass.
async fn warm_up(sdk: &SdkConfig) -> Res<()> {
    let c = localstack::retrying_clients(sdk);
    c.tagging
        .get_resources()
        .resources_per_page(1)
        .send()
        .await?;
    c.ec2
        .describe_security_groups()
        .max_results(5)
        .send()
        .await?;
    c.elb.describe_load_balancers().page_size(1).send().await?;
    c.elbv2.describe_target_groups().page_size(1).send().await?;
    c.iam.list_instance_profiles().max_items(1).send().await?;
    c.ec2.describe_volumes().max_results(5).send().await?;
    c.route53.list_hosted_zones().max_items(1).send().await?;
    c.sqs.list_queues().max_results(1).send().await?;
    c.events.list_rules().limit(1).send().await?;
    c.secrets.list_secrets().max_results(1).send().await?;
    c.ssm.describe_parameters().max_results(1).send().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Res<()> {
    let latency_ms: u64 = std::env::var("BENCH_LATENCY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(80);
    let sdk = localstack::sdk().await;
    warm_up(&sdk).await?;
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
    // The fixed cost of a pass (discovery queries, VPC lookups) shows when calls cost nothing
    // but LocalStack's own handling.
    println!(
        "BENCH external.phase2.lat0 sweeper={:.2} baseline={:.2} ratio={:.2} unit=s",
        zero_s.secs,
        zero_b.secs,
        zero_b.secs / zero_s.secs
    );
    // The two passes do different work (the baseline deletes only what CAPA's gc knows): the
    // time per resource deleted puts them side by side.
    let per = |r: &Run| 1000.0 * r.secs / r.deleted.max(1) as f64;
    println!(
        "BENCH external.phase2.lat0.per_resource sweeper={:.2} baseline={:.2} ratio={:.2} deleted_sweeper={} deleted_baseline={} unit=ms",
        per(&zero_s),
        per(&zero_b),
        per(&zero_b) / per(&zero_s),
        zero_s.deleted,
        zero_b.deleted
    );
    // Where the server's time went at zero latency: the six costliest operations, as
    // `operation=attempts:seconds` (concurrent attempts overlap, so the sum can exceed the pass).
    println!(
        "BENCH external.phase2.lat0.detail sweeper_calls={} baseline_calls={} sweeper_top={{{}}} baseline_top={{{}}} unit=s",
        zero_s.calls, zero_b.calls, zero_s.by_operation, zero_b.by_operation
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
    // The same calls with the listing pages set apart: the target is per resource, plus pages.
    let pages: usize = s
        .reads
        .iter()
        .filter(|(op, _)| is_listing(op))
        .map(|(_, n)| n)
        .sum();
    let other_reads: Vec<String> = s
        .reads
        .iter()
        .filter(|(op, _)| !is_listing(op))
        .map(|(op, n)| format!("{op}={n}"))
        .collect();
    let listing: Vec<String> = s
        .reads
        .iter()
        .filter(|(op, _)| is_listing(op))
        .map(|(op, n)| format!("{op}={n}"))
        .collect();
    println!(
        "BENCH external.calls.excl_pages sweeper={} pages={} resources={} ratio={:.3} listing={{{}}} other_reads={{{}}} unit=calls",
        s.calls - pages,
        pages,
        s.resources,
        (s.calls - pages) as f64 / s.resources as f64,
        listing.join(" "),
        other_reads.join(" ")
    );
    Ok(())
}
