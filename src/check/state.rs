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
                Ok(l) => lines.push(judge_lease(
                    ns,
                    name,
                    l.as_ref(),
                    k8s_openapi::jiff::Timestamp::now(),
                )),
                Err(e) => lines.push(Line::fail(
                    LEADER,
                    format!("cannot read the Lease {ns}/{name}: {}", kube_message(&e)),
                    "see the rbac section",
                )),
            }
        }
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
