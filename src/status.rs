//! `sweeper status`: what each collector is doing, from the running service (GET /status).

use crate::collector::Registered;
use crate::engine::leader::Role;
use crate::engine::teardown_registry::{TeardownRegistry, TeardownStatus};
use crate::server::AppState;
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Handles on the gauges the status reads (clones share the same values).
#[derive(Clone)]
pub struct StatusSources {
    pub app: AppState,
    /// Every collector (enabled or not), in the collectors' list's order.
    pub collectors: Vec<Arc<dyn Registered>>,
    pub leader: LeaderSource,
    pub teardowns: TeardownRegistry,
    pub pause: crate::engine::pause::Switch,
    /// The scheduled leak scan (`--scan-interval`; nothing while it is off).
    pub scan: crate::external::commands::scan::status::LastScan,
}

/// This replica's part in leader election.
#[derive(Clone)]
pub struct LeaderSource {
    pub enabled: bool,
    pub identity: Option<String>,
    pub role: tokio::sync::watch::Receiver<Role>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct LeaderStatus {
    pub enabled: bool,
    /// `leader`, `standby`, `starting` or `lost`.
    pub role: String,
    pub identity: Option<String>,
    /// Who leads, as far as a standby knows.
    pub holder: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct StatusReport {
    pub ready: bool,
    pub not_ready: Vec<String>,
    /// Why a component is not ready, where it says (e.g. `tenant: watch failing: ...`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub not_ready_reasons: std::collections::BTreeMap<String, String>,
    pub leader: LeaderStatus,
    /// Each collector's own fields (`cascade`, `tenant_teardowns_in_progress`, ...), at the top
    /// level as they always were.
    #[serde(flatten)]
    pub collectors: serde_json::Map<String, serde_json::Value>,
    /// Every teardown in progress, with its phase.
    pub teardowns: Vec<TeardownStatus>,
    /// Paused collectors (`sweeper pause`), with who, when and why; `null` until the switch has
    /// been read (every collector counts as paused until then).
    #[serde(default)]
    pub paused: Option<crate::engine::pause::Paused>,
    /// The scheduled leak scan's last report, in short, and its last error; absent while
    /// `--scan-interval` is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan: Option<crate::external::commands::scan::status::ScanStatus>,
}

pub fn snapshot(s: &StatusSources) -> StatusReport {
    StatusReport {
        ready: s.app.is_ready(),
        not_ready: s.app.not_ready().into_iter().map(String::from).collect(),
        not_ready_reasons: s.app.reasons(),
        leader: {
            let role = s.leader.role.borrow().clone();
            LeaderStatus {
                enabled: s.leader.enabled,
                role: role.name().into(),
                identity: s.leader.identity.clone(),
                holder: match role {
                    Role::Standby { holder } => holder,
                    Role::Leading => s.leader.identity.clone(),
                    _ => None,
                },
            }
        },
        collectors: s.collectors.iter().flat_map(|c| c.status()).collect(),
        teardowns: s.teardowns.list(),
        paused: s.pause.current(),
        scan: s.scan.get(),
    }
}

async fn status(State(s): State<StatusSources>) -> Json<StatusReport> {
    Json(snapshot(&s))
}

pub fn router(sources: StatusSources) -> Router {
    Router::new()
        .route("/status", get(status))
        .with_state(sources)
}

/// The table `sweeper status` prints.
pub fn render(s: &StatusReport) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "ready: {}{}\n",
        s.ready,
        if s.not_ready.is_empty() {
            String::new()
        } else {
            format!(" (waiting for {})", s.not_ready.join(", "))
        }
    ));
    for (component, reason) in &s.not_ready_reasons {
        out.push_str(&format!("  {component}: {reason}\n"));
    }
    match &s.paused {
        None => out.push_str("paused: every collector (the pause switch is not read yet)\n"),
        Some(p) => {
            for (collector, r) in p {
                out.push_str(&format!(
                    "paused: {collector} since {}{}{}\n",
                    if r.since.is_empty() { "?" } else { &r.since },
                    r.by.as_deref()
                        .map(|b| format!(" by {b}"))
                        .unwrap_or_default(),
                    r.reason
                        .as_deref()
                        .map(|x| format!(": {x}"))
                        .unwrap_or_default()
                ));
            }
        }
    }
    if s.leader.enabled {
        out.push_str(&format!(
            "leader election: {} (identity {}, leader {})\n",
            s.leader.role,
            s.leader.identity.as_deref().unwrap_or("?"),
            s.leader.holder.as_deref().unwrap_or("unknown")
        ));
    }
    for spec in crate::catalog::ALL {
        if let Some(line) = spec.render(&s.collectors) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    if let Some(scan) = &s.scan {
        out.push_str(&crate::external::commands::scan::status::render(scan));
        out.push('\n');
    }
    if !s.teardowns.is_empty() {
        out.push_str(&format!(
            "\n{:<9} {:<44} {:<34} {:>6} {:>8}  {}\n",
            "COLLECTOR", "OBJECT", "PHASE", "PASSES", "RUNNING", "DETAIL"
        ));
        for t in &s.teardowns {
            out.push_str(&format!(
                "{:<9} {:<44} {:<34} {:>6} {:>7.0}s  {}\n",
                t.collector, t.object, t.phase, t.passes, t.running_seconds, t.detail
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn snapshot_reads_the_shared_gauges() {
        let cascade = crate::cascade::metrics::CascadeMetrics::default();
        let tenant = crate::tenant::metrics::TenantMetrics::default();
        let sources = StatusSources {
            app: AppState::new(Metrics::new()),
            collectors: vec![Arc::new(cascade.clone()), Arc::new(tenant.clone())],
            leader: LeaderSource {
                enabled: true,
                identity: Some("pod-a".into()),
                role: tokio::sync::watch::channel(Role::Standby {
                    holder: Some("pod-b".into()),
                })
                .1,
            },
            teardowns: TeardownRegistry::default(),
            pause: crate::engine::pause::Switch::new(&crate::catalog::names(), Default::default()),
            scan: crate::external::commands::scan::status::LastScan::scheduled(
                std::time::Duration::from_secs(600),
            ),
        };
        sources.teardowns.begin("external", "AWSCluster ns/c1");
        sources.teardowns.update(
            "external",
            "AWSCluster ns/c1",
            "phase 2: external resources".into(),
            "3 remaining".into(),
        );
        sources.app.expect("cascade");
        cascade.objects_tracked.set(42);
        tenant.teardown.in_progress.set(2);
        let s = snapshot(&sources);
        assert!(!s.ready);
        assert_eq!(s.not_ready, vec!["cascade"]);
        assert_eq!(s.collectors["cascade"]["objects_tracked"], 42);
        // The answer keeps its shape: the CLI reads it back (JSON) and renders the same lines.
        let wire: StatusReport = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(wire, s);
        assert_eq!(wire.collectors["tenant_teardowns_in_progress"], 2);
        let text = render(&wire);
        assert!(
            text.contains("42 objects tracked")
                && text.contains("2 teardowns")
                && text.contains("waiting for cascade")
                && text.contains("standby (identity pod-a, leader pod-b)")
                && text.contains("phase 2: external resources")
                && text.contains("leak scan: every 600s; no report on this replica yet")
                && !text.contains("external: "),
            "{text}"
        );
    }
}
