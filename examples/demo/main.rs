//! `make demo`'s story, against the running environment and the sweeper replicas that
//! scripts/demo.sh started from the Helm chart's settings:
//! 1. set up a workload cluster with AWS resources, a KubeZoo tenant and three owner trees (plus
//!    what must survive: another cluster sharing the name prefix, a `shared` resource, a tenant
//!    sharing the id prefix, an object with a second live owner, orphaned dependents);
//! 2. delete the cluster, the tenant and the three tree roots at once;
//! 3. show live progress (a table redrawn in place on a terminal, change lines in a log);
//! 4. report what was deleted and how long each step took, and check the survivors.
//!
//! Usage (scripts/demo.sh runs these):
//!   demo chart-env < rendered-chart.yaml         the Deployment's settings, for the script
//!   demo clean                                    remove what an earlier run left
//!   demo run --replica NAME=URL=PID ... [--timeout SECS] [--failover] [--capa-log FILE]
//!
//! With `--capa-log` (the log of CAPA's own controller, which scripts/demo.sh started for the
//! demo's namespace), CAPA builds the workload cluster's network and deletes it beside sweeper;
//! without it (the 1.20 fallback, no CAPA CRDs), the demo builds a stand-in for it.

mod aws_build;
mod aws_probe;
mod aws_world;
mod capa_built;
mod chart_env;
mod kube_util;
mod live;
mod probes;
mod report;
mod step;
mod tenant;
mod trees;
mod who;
mod workload;

use kube::Client;
use kube_util::Res;
use live::{Board, Replica, Shared, lock};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sweeper_aws::phases::{AwsClients, PassRequest, teardown_pass};

const FINALIZER_TIMEOUT: Duration = Duration::from_secs(60);

struct RunArgs {
    replicas: Vec<Replica>,
    timeout: Duration,
    failover: bool,
    /// CAPA's controller runs, logging here: it builds the workload cluster.
    capa_log: Option<PathBuf>,
}

fn parse_run_args(args: &[String]) -> Res<RunArgs> {
    let mut out = RunArgs {
        replicas: vec![],
        timeout: Duration::from_secs(120),
        failover: false,
        capa_log: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--replica" => {
                let v = it.next().ok_or("--replica needs NAME=URL[=PID]")?;
                let mut parts = v.splitn(3, '=');
                let name = parts.next().unwrap_or_default().to_string();
                let url = parts
                    .next()
                    .ok_or("--replica needs NAME=URL[=PID]")?
                    .to_string();
                let pid = parts.next().map(str::parse).transpose()?;
                out.replicas.push(Replica {
                    name,
                    url,
                    pid,
                    role: "?".into(),
                });
            }
            "--timeout" => {
                out.timeout =
                    Duration::from_secs(it.next().ok_or("--timeout needs seconds")?.parse()?)
            }
            "--failover" => out.failover = true,
            "--capa-log" => out.capa_log = Some(it.next().ok_or("--capa-log needs a file")?.into()),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(out)
}

#[tokio::main]
async fn main() {
    sweeper::install_crypto_provider();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("chart-env") => chart_env::run(),
        Some("clean") => clean().await,
        Some("run") => match parse_run_args(&args[1..]) {
            Ok(a) => run(a).await,
            Err(e) => Err(e),
        },
        _ => Err("usage: demo chart-env | clean | run --replica NAME=URL[=PID] ...".into()),
    };
    if let Err(e) = result {
        eprintln!("demo FAILED: {e}");
        std::process::exit(1);
    }
}

/// Clients for setting up (the SDK's standard retries: LocalStack answers an occasional 500)
/// and for watching and cleaning (sweeper's own: retries off, short calls).
async fn aws_clients() -> (AwsClients, AwsClients) {
    let sdk = sweeper_aws::load_config().await;
    let setup = sweeper_aws::testing::localstack::retrying_clients(&sdk);
    (setup, AwsClients::new(&sdk))
}

fn section(title: &str) {
    println!("\n== {title}");
}

/// Removes everything an earlier run left, in Kubernetes and in LocalStack.
async fn clean() -> Res<()> {
    let c = Client::try_default().await?;
    let (_, aws) = aws_clients().await;
    workload::clean(&c).await?;
    tenant::clean(&c).await?;
    trees::clean(&c).await?;
    kube_util::delete(
        &kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone()),
        workload::NS,
    )
    .await?;
    let mut removed = 0;
    for cluster in [aws_world::CLUSTER, aws_world::OTHER, aws_world::LEAK] {
        removed += clean_aws(&aws, cluster).await?;
    }
    let mut namespaces = tenant::namespaces();
    namespaces.extend([trees::NS.to_string(), workload::NS.to_string()]);
    let nss: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(c.clone());
    for ns in &namespaces {
        if !kube_util::eventually(FINALIZER_TIMEOUT, || kube_util::is_gone(&nss, ns)).await {
            return Err(
                format!("namespace {ns} of an earlier run is still terminating after 60s").into(),
            );
        }
    }
    println!(
        "clean: removed what earlier runs left: demo objects in Kubernetes, {removed} AWS resources in LocalStack"
    );
    Ok(())
}

/// Teardown passes (sweeper's own library) until nothing of `cluster` is left in LocalStack.
async fn clean_aws(aws: &AwsClients, cluster: &str) -> Res<usize> {
    let req = PassRequest::new(cluster);
    let mut removed = 0;
    for _ in 0..60 {
        let r = teardown_pass(aws, &req).await;
        removed += r.phases.iter().map(|p| p.deleted.len()).sum::<usize>();
        if r.done {
            return Ok(removed);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(format!("AWS resources of an earlier {cluster} are still there after 60 passes").into())
}

/// What the demo created in AWS: the workload cluster's resources, the other cluster's, and the
/// other cluster's that are shared with the workload cluster.
struct AwsWorld {
    workload: Vec<aws_world::AwsRes>,
    others: Vec<aws_world::AwsRes>,
    shared: Vec<aws_world::AwsRes>,
}

/// Creates the trees, the tenants and the workload cluster, saying what each is. With CAPA's
/// controller running (`capa`), CAPA builds the cluster's network.
async fn set_up(c: &Client, setup_aws: &AwsClients, capa: bool) -> Res<AwsWorld> {
    section("setting up the world");
    let t = Instant::now();
    let n = trees::create(c).await?;
    println!(
        "owner trees    {n} objects in {}: 3 roots x (9 ConfigMaps x 10 Secrets), plus `shared` owned by bg-root and the live `keeper`",
        trees::NS
    );
    let n = tenant::create(c).await?;
    println!(
        "tenants        {n} objects: Tenant {} (CRD + 2 Widgets, 5 ClusterRoles, 3 namespaces x 4 ConfigMaps) and Tenant {}",
        tenant::ID,
        tenant::SIBLING
    );
    let (mut wl, net) = if capa {
        workload::create(c, workload::Network::Capa).await?;
        let took = workload::wait_capa_ready(c).await?;
        let (built, net) = capa_built::find(setup_aws, aws_world::CLUSTER).await?;
        println!(
            "cluster        {}/{} (CAPI Cluster owning an AWSCluster, external GC enabled): CAPA v2.13.0's own\n               AWSCluster controller made it ready in {:.1}s, building {} AWS resources in LocalStack:\n               {}",
            workload::NS,
            aws_world::CLUSTER,
            took.as_secs_f64(),
            built.len(),
            report::wrap(&aws_world::counts(&built), 15),
        );
        (built, net)
    } else {
        let (built, net) = aws_world::create_capa_like_network(setup_aws).await?;
        workload::create(c, workload::Network::Demo(&net.vpc)).await?;
        println!(
            "cluster        {}/{} (CAPI Cluster owning an AWSCluster, external GC enabled); CAPA's controller\n               does not run on this environment, so the demo built {} AWS resources as CAPA would:\n               {}",
            workload::NS,
            aws_world::CLUSTER,
            built.len(),
            report::wrap(&aws_world::counts(&built), 15),
        );
        (built, net)
    };
    let added = aws_world::create_workload(setup_aws, &net).await?;
    println!(
        "               and {} more in its network: a control-plane machine's instance (CAPA-owned; made\n               by the demo, CAPA's machine controller does not run), and by the workload\n               (kubernetes.io/cluster/{}=owned): Service ELB + its security group, NLB, ALB,\n               3 target groups, 2 security groups, a detached ENI",
        added.len(),
        aws_world::CLUSTER
    );
    wl.extend(added);
    let (others, shared) = aws_world::create_survivors(setup_aws).await?;
    println!(
        "must survive   {} AWS resources of cluster {}, and {} of its resources tagged kubernetes.io/cluster/{}=shared",
        others.len(),
        aws_world::OTHER,
        shared.len(),
        aws_world::CLUSTER
    );
    let leak = aws_world::create_leak(setup_aws).await?;
    println!(
        "leak           {} AWS resources of cluster {}, deleted before sweeper was installed (no object): never\n               touched by the demo; `sweeper scan` finds them at the end",
        leak.len(),
        aws_world::LEAK
    );
    println!("set up in {:.1}s", t.elapsed().as_secs_f64());
    Ok(AwsWorld {
        workload: wl,
        others,
        shared,
    })
}

async fn run(args: RunArgs) -> Res<()> {
    let c = Client::try_default().await?;
    let (setup_aws, aws) = aws_clients().await;
    let world = set_up(&c, &setup_aws, args.capa_log.is_some()).await?;
    wait_for_finalizers(&c).await?;

    let mut steps = trees::steps();
    steps.push(tenant::step());
    steps.push(workload::step(&world.workload));
    let board: Shared = Arc::new(Mutex::new(Board {
        t0: Instant::now(),
        steps,
        replicas: args.replicas,
        events: vec![],
    }));
    delete_all(&c, &board).await?;
    watch_live(&board, &c, &aws, &world, args.failover, args.timeout).await;

    let survivors = check_survivors(&c, &aws, &world).await?;
    let problems = report::print(&lock(&board), &survivors, args.timeout);
    if let Some(log) = &args.capa_log {
        who::print(&c, &world.workload, log).await?;
    }
    println!("survivors are left in place to look at; the next `make demo` removes them first");
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; ").into())
    }
}

/// Deleting before the collectors hold their finalizers would let the objects go at once.
async fn wait_for_finalizers(c: &Client) -> Res<()> {
    let ready = kube_util::eventually(FINALIZER_TIMEOUT, || async {
        tenant::finalized(c).await && workload::finalized(c).await
    })
    .await;
    if !ready {
        return Err("sweeper put no finalizer on the Tenants / the AWSCluster within 60s: is a demo replica leading? (logs: .state/logs/demo-sweeper-*.log)".into());
    }
    println!("sweeper's finalizers are on both Tenants and the AWSCluster");
    Ok(())
}

/// Sends the five deletes at once; the clock starts here.
async fn delete_all(c: &Client, board: &Shared) -> Res<()> {
    section(&format!(
        "deleting at once: the three tree roots (Background, Foreground, Orphan), Tenant {}, Cluster {}",
        tenant::ID,
        aws_world::CLUSTER
    ));
    lock(board).t0 = Instant::now();
    tokio::try_join!(
        trees::delete_roots(c),
        tenant::delete(c),
        workload::delete(c)
    )?;
    Ok(())
}

/// Watches the world and the replicas, drawing the table, until every step is done or the
/// timeout passes.
async fn watch_live(
    board: &Shared,
    c: &Client,
    aws: &AwsClients,
    world: &AwsWorld,
    failover: bool,
    timeout: Duration,
) {
    let mut tasks = vec![
        tokio::spawn(live::poll_status(board.clone())),
        tokio::spawn(probes::watch_trees(board.clone(), c.clone())),
        tokio::spawn(probes::watch_tenant(board.clone(), c.clone())),
        tokio::spawn(probes::watch_workload(
            board.clone(),
            c.clone(),
            aws.clone(),
            world.workload.clone(),
        )),
    ];
    if failover {
        tasks.push(tokio::spawn(probes::failover(board.clone())));
    }
    live::render(board.clone(), timeout, std::io::stdout().is_terminal()).await;
    for t in tasks {
        t.abort();
    }
}

/// Every survivor, checked after the deletions.
async fn check_survivors(
    c: &Client,
    aws: &AwsClients,
    world: &AwsWorld,
) -> Res<Vec<(String, bool)>> {
    let mut survivors = trees::survivors(c).await?;
    survivors.extend(tenant::survivors(c).await?);
    let other = format!(
        "cluster {} (name shares the prefix): VPC, subnet, security group, API-server ELB, NLB, target group",
        aws_world::OTHER
    );
    survivors.push(aws_survivors(aws, &world.others, other).await);
    let shared = format!(
        "tagged kubernetes.io/cluster/{}=shared: security group, target group",
        aws_world::CLUSTER
    );
    survivors.push(aws_survivors(aws, &world.shared, shared).await);
    Ok(survivors)
}

async fn aws_survivors(aws: &AwsClients, rs: &[aws_world::AwsRes], what: String) -> (String, bool) {
    let existing = aws_probe::existing(aws, rs).await;
    let missing: Vec<String> = rs
        .iter()
        .zip(existing)
        .filter(|(_, e)| !e)
        .map(|(r, _)| format!("{} {}", r.kind.name(), r.id))
        .collect();
    let mut text = format!("{what}: {}/{} present", rs.len() - missing.len(), rs.len());
    if !missing.is_empty() {
        text.push_str(&format!(" (gone: {})", missing.join(", ")));
    }
    (text, missing.is_empty())
}
