//! `BENCH_ONLY=watch` of `make bench-cascade` (issue 36): what serving a collector's watches costs
//! the servers, per 1,000 watch events delivered, for sweeper and for kube-controller-manager's
//! garbage collector under the same churn. Prints `BENCH cascade.watch.servers_cpu`.
//!
//! - **Churn:** 2,000 ConfigMaps (no owners: neither collector acts on them, so the only work
//!   either causes is watching), each labelled again in 5 rounds, 32 merge patches in flight:
//!   10,000 MODIFIED events, each delivered once to every watcher of ConfigMaps. The events are
//!   counted from the patches that succeeded (the driver runs no watch of its own during the
//!   churn, so it shares no encoding with the collector's).
//! - **Three modes per run:** no collector (the baseline: the churn's own cost), sweeper, then
//!   kube-controller-manager, the order rotated from run to run. In a mode, `BENCH_WATCH_WATCHERS`
//!   instances of the collector (default 16; each watches every resource, none is leader-elected)
//!   are started, a probe dependent is collected (they are synced and working), 5 s pass, and then
//!   the churn runs. Several instances multiply what the watches cost while the churn's own cost
//!   stays the same: with one (and with four) the difference was within the run-to-run spread of
//!   the churn on a shared 2-core machine.
//! - **The figure:** etcd + kube-apiserver CPU from the churn's start to 2 s after its end (the
//!   last deliveries), minus the same run's baseline, per 1,000 events delivered (patches ×
//!   instances). The line gives medians over `BENCH_WATCH_RUNS` runs (default 5), the ratio of
//!   the medians, and the median and min-max of the runs' own ratios.

use crate::stats::{median, min_max};
use crate::{Gc, LIMITS, drop_namespace, namespace, probe, servers_cpu_seconds, start};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const OBJECTS: usize = 2000;
const ROUNDS: usize = 5;
const IN_FLIGHT: usize = 32;

/// One churn: every object labelled `churn=<round>` once per round. Returns the patches that
/// succeeded (the MODIFIED events every ConfigMap watcher is sent).
async fn churn(api: &Api<ConfigMap>, names: &[String], first_round: usize) -> usize {
    let mut events = 0;
    for round in first_round..first_round + ROUNDS {
        let patch = serde_json::json!({"metadata": {"labels": {"churn": round.to_string()}}});
        events += futures::stream::iter(names)
            .map(|name| {
                let patch = &patch;
                async move {
                    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                        .is_ok()
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .filter(|ok| futures::future::ready(*ok))
            .count()
            .await;
    }
    events
}

pub async fn part(client: &Client, scale: f64) -> Vec<String> {
    let objects = ((OBJECTS as f64 * scale) as usize).max(50);
    let runs: usize = std::env::var("BENCH_WATCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let watchers: usize = std::env::var("BENCH_WATCH_WATCHERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
        .max(1);
    let ns = format!("bench-watch-{}", std::process::id());
    namespace(client, &ns).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let names: Vec<String> = (0..objects).map(|i| format!("churn-{i:05}")).collect();
    let fill = names
        .iter()
        .map(|name| {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(name.clone());
            cm.metadata.labels = Some(BTreeMap::from([("bench".into(), "watch".into())]));
            cm.data = Some(BTreeMap::from([("k".into(), "v".into())]));
            (api.clone(), cm)
        })
        .collect();
    crate::objects::create_each(fill, 64).await;
    tokio::time::sleep(Duration::from_secs(5)).await;

    let modes = [None, Some(Gc::Sweeper), Some(Gc::Kcm)];
    let (mut base, mut sweeper, mut kcm, mut ratios) = (vec![], vec![], vec![], vec![]);
    let mut round = 0;
    let mut events_per_run = 0;
    for r in 0..runs {
        let mut cost: BTreeMap<&str, f64> = BTreeMap::new();
        for i in 0..modes.len() {
            let mode = modes[(i + r) % modes.len()];
            let running: Vec<_> = mode
                .map(|gc| (0..watchers).map(|_| start(gc, LIMITS[1])).collect())
                .unwrap_or_default();
            if !running.is_empty() {
                probe(client, &ns).await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            let before = servers_cpu_seconds();
            let t = Instant::now();
            let events = churn(&api, &names, round).await;
            round += ROUNDS;
            let took = t.elapsed().as_secs_f64();
            tokio::time::sleep(Duration::from_secs(2)).await;
            let cpu = servers_cpu_seconds() - before;
            drop(running);
            // The baseline's events are the same writes, counted as if delivered as often.
            let delivered = events * watchers;
            let per_1000 = cpu / delivered as f64 * 1000.0;
            let who = match mode {
                None => "none",
                Some(Gc::Sweeper) => "sweeper",
                Some(Gc::Kcm) => "kcm",
            };
            eprintln!(
                "watch run {r} {who}: {events} patches in {took:.1}s, {delivered} events to {watchers} instances, servers CPU {cpu:.2}s ({per_1000:.4}s per 1,000 events)"
            );
            events_per_run = delivered;
            cost.insert(who, per_1000);
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        let (b, s, k) = (
            cost["none"],
            cost["sweeper"] - cost["none"],
            cost["kcm"] - cost["none"],
        );
        eprintln!(
            "watch run {r}: beyond the churn's own {b:.3}s, sweeper {s:.3}s, kcm {k:.3}s per 1,000 events"
        );
        base.push(b);
        sweeper.push(s);
        kcm.push(k);
        ratios.push(s / k);
    }
    drop_namespace(client, &ns).await;
    let (lo, hi) = min_max(&ratios);
    let (s, k) = (median(&sweeper), median(&kcm));
    vec![format!(
        "BENCH cascade.watch.servers_cpu sweeper={s:.4} kcm={k:.4} ratio={:.2} ratio_median={:.2} ratio_min={lo:.2} ratio_max={hi:.2} baseline={:.4} runs={runs} instances={watchers} events={events_per_run} unit=s/1000events",
        s / k,
        median(&ratios),
        median(&base)
    )]
}
