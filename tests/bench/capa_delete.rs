//! `make bench-capa` (issue #53 part 4): how long from an AWSCluster's delete until the object is
//! gone, for the cluster of tests/capa_controller.rs (built by CAPA v2.13.0's own controller in a
//! fresh LocalStack account, with a workload's leaks: the cloud provider's NLB and its security
//! group, an AWS Load Balancer Controller group, an opt-in CSI volume), two ways:
//!
//! - `capa_alone`: CAPA's controller alone with its `ExternalResourceGC` gate on, as before sweeper
//!   is installed. It may never finish; it is stopped at [`BOUND`] and what holds it is printed.
//! - `sweeper`: CAPA's controller with its gate off (the hand-over's end state) and sweeper.
//!
//! Each run prints what the account has left that it did not have before the cluster (the
//! inventory of tests/support/inventory.rs). A Cargo bench target without the test harness
//! (`harness = false`), so that it runs the `sweeper` binary Cargo builds beside it, in release.

#[path = "../support/mod.rs"]
mod support;

use std::time::Duration;
use support::TestScope;
use support::capa::strip_finalizers;
use support::capa_cluster::{Running, TEARDOWN, repeated_errors};
use support::inventory::{diff, inventory};

/// How long CAPA alone is given: its delete retries every few seconds, so a minute past its own
/// deletes it is held, not slow.
const BOUND: Duration = Duration::from_secs(120);

/// One delete, timed: seconds until the AWSCluster was gone (None: not within the bound), and
/// the inventory lines the account has that it had not before the cluster.
struct Timed {
    secs: Option<f64>,
    left: Vec<String>,
}

async fn delete_and_time(r: &Running, bound: Duration) -> Timed {
    let b = &r.b;
    b.infra.delete(&b.name, &Default::default()).await.unwrap();
    let secs = r.gone_within(bound).await.map(|d| d.as_secs_f64());
    r.print_who_deleted().await;
    let (left, _) = diff(&b.before, &inventory(&b.aws).await);
    Timed { secs, left }
}

async fn capa_alone(run: usize) -> Timed {
    let mut scope = TestScope::new("bench-capa-alone").await;
    let mut r = Running::start_capa_alone(&mut scope, true).await;
    let t = delete_and_time(&r, BOUND).await;
    if t.secs.is_none() {
        let errors = repeated_errors(&r.capa.log_text());
        eprintln!(
            "run {run}: CAPA alone did not finish in {BOUND:?}; its most repeated errors: {:#?}",
            errors.iter().take(3).collect::<Vec<_>>()
        );
        // What a user does then: CAPA's finalizer off by hand, so the namespace can go.
        r.capa.stop();
        let b = &r.b;
        strip_finalizers(&b.infra, &b.name).await;
    }
    t
}

async fn with_sweeper() -> Timed {
    let mut scope = TestScope::new("bench-capa-sweeper").await;
    let r = Running::start(&mut scope, support::capa_cluster::Vpc::Managed, false).await;
    let t = delete_and_time(&r, TEARDOWN).await;
    if t.secs.is_none() {
        eprintln!(
            "CAPA (gate off) and sweeper did not release the AWSCluster within {TEARDOWN:?}: finalizers {:?}; CAPA's errors {:#?}; sweeper's {:#?}",
            r.finalizers().await,
            repeated_errors(&r.capa.log_text()),
            repeated_errors(&r.sweeper_log_text())
        );
    }
    t
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| v[v.len() / 2])
}

fn fmt_secs(v: Option<f64>) -> String {
    v.map_or_else(|| "none".to_string(), |s| format!("{s:.2}"))
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let (mut alone, mut both) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let a = capa_alone(run).await;
        eprintln!(
            "run {run}: CAPA alone: {} s, left {:#?}",
            fmt_secs(a.secs),
            a.left
        );
        alone.push(a);
        let s = with_sweeper().await;
        eprintln!(
            "run {run}: CAPA (gate off) + sweeper: {} s, left {:#?}",
            fmt_secs(s.secs),
            s.left
        );
        both.push(s);
    }
    let gone = |v: &[Timed]| v.iter().filter(|t| t.secs.is_some()).count();
    let secs = |v: &[Timed]| median(v.iter().filter_map(|t| t.secs).collect());
    let left = |v: &[Timed]| median(v.iter().map(|t| t.left.len() as f64).collect());
    println!(
        "BENCH capa.delete capa_alone={} capa_alone_gone={}/{runs} sweeper={} sweeper_gone={}/{runs} bound={} runs={runs} unit=s",
        fmt_secs(secs(&alone)),
        gone(&alone),
        fmt_secs(secs(&both)),
        gone(&both),
        BOUND.as_secs(),
    );
    println!(
        "BENCH capa.delete.left capa_alone={} sweeper={} unit=resources",
        fmt_secs(left(&alone)),
        fmt_secs(left(&both)),
    );
    for (who, v) in [("capa_alone", &alone), ("sweeper", &both)] {
        if let Some(t) = v.last() {
            println!("LEFT {who}: {}", t.left.join(", "));
        }
    }
}
