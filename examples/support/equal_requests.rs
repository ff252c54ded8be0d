//! `BENCH_ONLY=equal` (and part of a full run): sweeper against kube-controller-manager's garbage
//! collector at equal *request budgets* at the API server, not at equal flags.
//!
//! Why the flags differ: kube-controller-manager v1.36.3 doubles its garbage collector's budget
//! (`cmd/kube-controller-manager/app/core.go`, `newGarbageCollectorController`, lines 702-704:
//! "Increase garbage collector controller's throughput: each object deletion takes two API calls,
//! so to get |config.QPS| deletion rate we need to allow 2x more requests for this controller."
//! `config.QPS *= 2`). Only the QPS is doubled, not the burst, and only for the metadata client
//! that reads and deletes dependents. So kube-controller-manager at `--kube-api-qps 20
//! --kube-api-burst 30` sends up to 40 requests/s with a burst of 30, and sweeper is held to the
//! same: `--kube-api-qps 40 --kube-api-burst 30` (sweeper's one limiter covers all its requests).
//!
//! Each collector runs alone, and its rate is read from the API server's own counters
//! (`apiserver_request_total`, every verb but WATCH, whose count lands only when the watch ends):
//! read just before the owner's DELETE and just after the last deletion, the difference over the
//! time between is the mean rate; read every 2 s meanwhile, the highest rate over any 10 s (when
//! the cascade lasts that long). The counter has no user label, so what else reaches the server in
//! that time is inside the figure too (the API server's own lease renewals, a few per 10 s; the
//! benchmark's owner DELETE and its watch's LIST): it can only make a collector's rate look higher.

use crate::{
    Gc, Limit, Running, Workload, background_workload, drop_namespace, foreground_workload,
    namespace, probe, requests, start,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};
use std::time::{Duration, Instant};

/// kube-controller-manager's flags: its default `--kube-api-qps 20 --kube-api-burst 30`.
const KCM: Limit = Limit {
    name: "equal_requests_kcm",
    qps: 20,
    burst: 30,
};

/// Sweeper's flags for the same budget at the server: twice the QPS (what kube-controller-manager
/// gives its collector), the same burst (which it does not double).
const SWEEPER: Limit = Limit {
    name: "equal_requests_sweeper",
    qps: 2 * KCM.qps,
    burst: KCM.burst,
};

const SAMPLE_EVERY: Duration = Duration::from_secs(2);
const PEAK_SPAN: Duration = Duration::from_secs(10);

#[derive(Clone, Copy)]
enum Mode {
    Background,
    Foreground,
}

/// Samples the API server's requests (WATCH excepted) every [`SAMPLE_EVERY`] until `stop` is sent.
async fn sample(
    client: Client,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> Vec<(Instant, f64)> {
    let mut samples = Vec::new();
    loop {
        samples.push((Instant::now(), requests(&client).await.all));
        tokio::select! {
            _ = &mut stop => return samples,
            _ = tokio::time::sleep(SAMPLE_EVERY) => {}
        }
    }
}

/// The highest request rate over any [`PEAK_SPAN`] inside `[start, end]`, from the samples taken
/// inside it only (none from the idle time around it); `None` when the window is shorter.
fn peak(samples: &[(Instant, f64)], start: Instant, end: Instant) -> Option<f64> {
    let inside: Vec<_> = samples
        .iter()
        .filter(|(t, _)| *t >= start && *t <= end)
        .collect();
    inside
        .iter()
        .filter_map(|a| {
            let b = inside.iter().find(|b| b.0 - a.0 >= PEAK_SPAN)?;
            Some((b.1 - a.1) / (b.0 - a.0).as_secs_f64())
        })
        .reduce(f64::max)
}

fn show(peak: Option<f64>) -> String {
    peak.map_or("none".into(), |p| format!("{p:.1}"))
}

/// Waits until namespace `ns` is gone, so that the namespace controller's cleanup of one run is
/// not counted in the next run's requests.
async fn wait_gone(client: &Client, ns: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(300) {
        if matches!(api.get_opt(ns).await, Ok(None)) {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("namespace {ns} still there after 300 s");
}

/// One collector alone on one workload: (objects/s, mean requests/s, peak requests/s).
async fn run(client: &Client, gc: Gc, mode: Mode, scale: f64, ns: &str) -> (f64, f64, Option<f64>) {
    let limit = if gc == Gc::Sweeper { SWEEPER } else { KCM };
    namespace(client, ns).await;
    let running: Running = start(gc, limit);
    probe(client, ns).await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let sampler = tokio::spawn(sample(client.clone(), rx));
    let w: Workload = match mode {
        Mode::Background => background_workload(client, ns, scale).await,
        Mode::Foreground => foreground_workload(client, ns, scale).await,
    };
    let end = Instant::now();
    let _ = tx.send(());
    let samples = sampler.await.expect("request sampler");
    drop(running);
    drop_namespace(client, ns).await;
    wait_gone(client, ns).await;
    let mean = (w.after.all - w.before.all) / w.took.as_secs_f64();
    let peak = peak(&samples, end - w.took, end);
    eprintln!(
        "{gc:?} {} {ns}: {} objects in {:.1}s ({:.2}/s), {} requests, {mean:.1} requests/s (peak over {}s {})",
        limit.name,
        w.objects,
        w.took.as_secs_f64(),
        w.rate(),
        w.after.all - w.before.all,
        PEAK_SPAN.as_secs(),
        show(peak)
    );
    (w.rate(), mean, peak)
}

/// `BENCH cascade.{background,foreground}.equal_requests` and their `.rate` lines.
pub async fn part(client: &Client, scale: f64, run_id: u32) -> Vec<String> {
    let mut lines = Vec::new();
    for (mode, name) in [
        (Mode::Background, "background"),
        (Mode::Foreground, "foreground"),
    ] {
        let s = run(
            client,
            Gc::Sweeper,
            mode,
            scale,
            &format!("bench-eq-s-{name}-{run_id}"),
        )
        .await;
        let k = run(
            client,
            Gc::Kcm,
            mode,
            scale,
            &format!("bench-eq-k-{name}-{run_id}"),
        )
        .await;
        lines.push(format!(
            "BENCH cascade.{name}.equal_requests sweeper={:.2} kcm={:.2} ratio={:.2} sweeper_qps={} kcm_qps={} burst={} unit=objects/s",
            s.0,
            k.0,
            s.0 / k.0,
            SWEEPER.qps,
            KCM.qps,
            KCM.burst
        ));
        lines.push(format!(
            "BENCH cascade.{name}.equal_requests.rate sweeper_rps={:.1} kcm_rps={:.1} sweeper_peak_rps={} kcm_peak_rps={} budget={} unit=requests/s",
            s.1,
            k.1,
            show(s.2),
            show(k.2),
            SWEEPER.qps
        ));
    }
    lines
}
