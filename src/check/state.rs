//! Leader election and the pause switch: is some replica leading, and is anything paused.
//!
//! A Lease not renewed within its duration means no replica leads: nothing is collected. A
//! collector paused by `sweeper pause` deletes nothing until `sweeper resume`; that is an
//! operator's choice, so it is shown (‼, with who paused it and why), not failed.

use super::{Config, Line, kube_message};
use crate::engine::pause::{self, Paused};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

const LEADER: &str = "leader";
const PAUSE: &str = "pause";

/// The leader line, from the Lease (None: there is none) at `now`.
pub fn judge_lease(
    ns: &str,
    name: &str,
    lease: Option<&Lease>,
    now: k8s_openapi::jiff::Timestamp,
) -> Line {
    let at = format!("{ns}/{name}");
    let Some(spec) = lease.and_then(|l| l.spec.as_ref()) else {
        return Line::fail(
            LEADER,
            format!("no Lease {at}: no replica has ever led"),
            "is sweeper running with --leader-elect (Helm: leaderElection.enabled) in this namespace? \
             kubectl -n <namespace> get pods,events",
        );
    };
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let Some((age, duration)) = super::lease_age(spec, now) else {
        return Line::fail(
            LEADER,
            format!("Lease {at} was never renewed: no replica leads"),
            "kubectl -n <namespace> logs deploy/sweeper",
        );
    };
    if holder.is_empty() {
        Line::fail(
            LEADER,
            format!("Lease {at} is released and not taken ({age}s ago): no replica leads"),
            "kubectl -n <namespace> get pods: are the replicas running?",
        )
    } else if age > duration {
        Line::fail(
            LEADER,
            format!(
                "Lease {at} held by {holder:?} expired: last renewed {age}s ago (duration {duration}s); no replica leads"
            ),
            "kubectl -n <namespace> get pods, and the leader's logs: it stopped renewing",
        )
    } else {
        Line::pass(
            LEADER,
            format!("{holder:?} leads (Lease {at} renewed {age}s ago)"),
        )
    }
}

/// The scan line from the Lease's annotation (see [`super::scan`]).
fn scan_line(
    ns: &str,
    name: &str,
    lease: Option<&Lease>,
    told: std::time::Duration,
    now: k8s_openapi::jiff::Timestamp,
) -> Line {
    match super::scan::read(lease) {
        Ok(state) => super::scan::judge_scan(state.as_ref(), told, now),
        Err(e) => Line::warn(
            "scan",
            format!(
                "the annotation {} on Lease {ns}/{name} does not read: {e}",
                super::scan::ANNOTATION
            ),
            "only the leader writes it; sweeper status shows the scan's state",
        ),
    }
}

/// Without leader election there is no Lease to publish the scan's state on.
fn scan_without_lease(told: std::time::Duration) -> Line {
    if told.is_zero() {
        return super::scan::judge_scan(None, told, k8s_openapi::jiff::Timestamp::now());
    }
    Line::warn(
        "scan",
        format!(
            "--scan-interval {}s with leader election off: the scan's state is published on the leader Lease only",
            told.as_secs()
        ),
        "sweeper status (its scan lines), or the SweeperScanStale alert",
    )
}

/// The pause lines, from the switch's data (None: no switch, nothing paused).
pub fn judge_pause(ns: &str, paused: &Paused, warnings: &[String]) -> Vec<Line> {
    let mut lines = Vec::new();
    if paused.is_empty() {
        lines.push(Line::pass(PAUSE, "no collector is paused"));
    }
    for (collector, r) in paused {
        let by =
            r.by.as_deref()
                .map(|b| format!(" by {b}"))
                .unwrap_or_default();
        let why = r
            .reason
            .as_deref()
            .map(|w| format!(": {w}"))
            .unwrap_or_default();
        lines.push(Line::warn(
            PAUSE,
            format!(
                "{collector} is paused since {}{by}{why}; it deletes nothing",
                r.since
            ),
            format!("sweeper resume -n {ns} --collector {collector}, when it may delete again"),
        ));
    }
    for w in warnings {
        lines.push(Line::warn(
            PAUSE,
            format!("ConfigMap {ns}/{}: {w}", pause::CONFIGMAP),
            "fix the key with sweeper pause / resume rather than by hand",
        ));
    }
    lines
}

pub async fn check(client: &kube::Client, cfg: &Config) -> Vec<Line> {
    let mut lines = Vec::new();
    match &cfg.lease {
        None => lines.push(Line::pass(
            LEADER,
            "leader election is off: a single replica collects",
        )),
        Some((ns, name, _)) => {
            let api: Api<Lease> = Api::namespaced(client.clone(), ns);
            match api.get_opt(name).await {
                Ok(l) => {
                    let now = k8s_openapi::jiff::Timestamp::now();
                    lines.push(judge_lease(ns, name, l.as_ref(), now));
                    if cfg.enabled("external") {
                        lines.push(scan_line(ns, name, l.as_ref(), cfg.scan_interval, now));
                    }
                }
                Err(e) => lines.push(Line::fail(
                    LEADER,
                    format!("cannot read the Lease {ns}/{name}: {}", kube_message(&e)),
                    "see the rbac section",
                )),
            }
        }
    }
    if cfg.lease.is_none() && cfg.enabled("external") {
        lines.push(scan_without_lease(cfg.scan_interval));
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &cfg.namespace);
    // Read as the service reads it: a list of the one ConfigMap (its role lists, it does not get).
    let lp =
        kube::api::ListParams::default().fields(&format!("metadata.name={}", pause::CONFIGMAP));
    match api.list(&lp).await {
        Ok(list) => {
            let data = list
                .items
                .into_iter()
                .next()
                .and_then(|cm| cm.data)
                .unwrap_or_default();
            let (mut paused, warnings) = pause::parse(&data, &crate::catalog::names());
            // `all` names every collector; only the enabled ones' pause changes anything.
            paused.retain(|c, _| cfg.enabled(c));
            lines.extend(judge_pause(&cfg.namespace, &paused, &warnings));
        }
        Err(e) => lines.push(Line::fail(
            PAUSE,
            format!(
                "cannot read the pause switch {}/{}: {}",
                cfg.namespace,
                pause::CONFIGMAP,
                kube_message(&e)
            ),
            "see the rbac section",
        )),
    }
    lines
}
