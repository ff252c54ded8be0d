//! `sweeper check`: a preflight and health check, in the manner of `linkerd check` and
//! `cilium status`. One line per check, ✔ / ‼ / ✖, a hint under every line that is not ✔, and a
//! non-zero exit when any check fails. It also runs as the Helm chart's `helm test`, in a pod with
//! sweeper's own service account and environment, so it sees what the service would see.
//!
//! It takes the same flags and environment as `sweeper run` (the chart gives the test pod the
//! Deployment's env), so "the enabled collectors" and "sweeper's namespace" mean what they mean for
//! the running service. It reads and never writes: SelfSubjectAccessReviews are the only creates,
//! and the AWS check calls nothing but `sts:GetCallerIdentity` (through the identity chain).
//!
//! Each check gathers facts with a few reads, then a pure function of those facts makes the line
//! (unit-tested in `tests.rs`); tests/check.rs runs every check against the real test environment,
//! one passing and one failing case each.
//!
//! ‼ (warn) is for "cannot tell" and for a state an operator chose (a pause): it is shown, with
//! its hint, but does not fail the check, because a preflight that fails on what it cannot see
//! would be switched off.

pub mod archive;
pub mod aws;
pub mod capa;
pub mod crds;
pub mod kube_gc;
pub mod names;
pub mod rbac;
pub mod scan;
pub mod state;
#[cfg(test)]
mod tests;

pub use crate::collector::check::Preflight;
use crate::config::FeatureGates;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// ✔
    Pass,
    /// ‼ shown with its hint; does not fail the run.
    Warn,
    /// ✖ fails the run (exit 1).
    Fail,
}

impl Status {
    fn glyph(self) -> &'static str {
        match self {
            Status::Pass => "✔",
            Status::Warn => "‼",
            Status::Fail => "✖",
        }
    }
}

/// One line of the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Line {
    /// The section: `kubernetes-api`, `crds`, `rbac`, …
    pub category: &'static str,
    pub status: Status,
    pub message: String,
    /// What to do about it (every line that is not ✔ has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Line {
    pub fn pass(category: &'static str, message: impl Into<String>) -> Self {
        Line {
            category,
            status: Status::Pass,
            message: message.into(),
            hint: None,
        }
    }

    pub fn warn(
        category: &'static str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Self::hinted(category, Status::Warn, message.into(), hint.into())
    }

    pub fn fail(
        category: &'static str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Self::hinted(category, Status::Fail, message.into(), hint.into())
    }

    fn hinted(category: &'static str, status: Status, message: String, hint: String) -> Self {
        Line {
            category,
            status,
            message,
            hint: Some(hint),
        }
    }
}

/// Every line, in the order the checks ran.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub success: bool,
    pub checks: Vec<Line>,
}

impl Report {
    pub fn new(checks: Vec<Line>) -> Self {
        Report {
            success: !checks.iter().any(|l| l.status == Status::Fail),
            checks,
        }
    }

    /// The lines of one category (tests and the JSON reader's convenience).
    pub fn category(&self, name: &str) -> Vec<&Line> {
        self.checks.iter().filter(|l| l.category == name).collect()
    }

    /// The table: a heading per category, a line per check, the hint indented under it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut current = "";
        for line in &self.checks {
            if line.category != current {
                if !current.is_empty() {
                    out.push('\n');
                }
                current = line.category;
                let _ = writeln!(out, "{current}\n{}", "-".repeat(current.chars().count()));
            }
            let _ = writeln!(out, "{} {}", line.status.glyph(), line.message);
            if let Some(hint) = &line.hint {
                let _ = writeln!(out, "    hint: {hint}");
            }
        }
        let failed = self
            .checks
            .iter()
            .filter(|l| l.status == Status::Fail)
            .count();
        let warned = self
            .checks
            .iter()
            .filter(|l| l.status == Status::Warn)
            .count();
        out.push('\n');
        if failed == 0 {
            let _ = writeln!(
                out,
                "Status check results are ✔ ({} checks, {warned} with a warning)",
                self.checks.len()
            );
        } else {
            let _ = writeln!(
                out,
                "Status check results are ✖ ({failed} of {} checks failed, {warned} with a warning)",
                self.checks.len()
            );
        }
        out
    }
}

/// What the checks need to know, from `sweeper run`'s flags and `check`'s own.
#[derive(Clone, Debug)]
pub struct Config {
    pub gates: FeatureGates,
    /// Sweeper's own namespace (pause switch, archive of cluster-scoped objects), resolved as
    /// `sweeper run` resolves it.
    pub namespace: String,
    /// CAPA's namespace: its Deployment and the Secrets of static identities.
    pub capa_namespace: String,
    /// The Lease, when leader election is on: namespace, name, duration.
    pub lease: Option<(String, String, Duration)>,
    /// Whether deleted objects are archived (`--archive` other than `none`).
    pub archive: bool,
    /// The archive's budget: records over this many bytes in all fail the check.
    pub archive_budget_bytes: u64,
    /// Where the control plane's own pods and Leases are (kube-system).
    pub control_plane_namespace: String,
    /// Only the cluster objects of this namespace for the AWS identity check (empty: all).
    pub cluster_namespace: String,
    /// The external collector's selector: only the clusters it takes are checked.
    pub external_selector: crate::engine::selector::LabelFilter,
    /// Whether the external collector runs in dry run (`--external-dry-run`): the hand-over step.
    pub external_dry_run: bool,
    /// `--scan-interval` (zero: not told); the leader's own, published on its Lease, wins.
    pub scan_interval: Duration,
}

impl Config {
    pub fn enabled(&self, collector: &str) -> bool {
        crate::catalog::ALL
            .iter()
            .find(|s| s.name() == collector)
            .is_some_and(|s| self.gates.enabled(s.gate().name))
    }

    /// The further sections the enabled collectors ask for (each collector's
    /// `CollectorDescriptor::preflights`).
    pub fn preflights(&self) -> BTreeSet<Preflight> {
        crate::catalog::ALL
            .iter()
            .filter(|s| self.gates.enabled(s.gate().name))
            .flat_map(|s| s.preflights().iter().copied())
            .collect()
    }

    /// The enabled collectors, in the list's order.
    pub fn collectors(&self) -> Vec<&'static str> {
        crate::catalog::ALL
            .iter()
            .filter(|s| self.gates.enabled(s.gate().name))
            .map(|s| s.name())
            .collect()
    }
}

/// Runs every check that applies. When the API server cannot be reached nothing else is tried:
/// every other line would be the same failure.
pub async fn run(
    client: &kube::Client,
    cfg: &Config,
    aws: Option<&sweeper_aws::session::SessionCache>,
) -> Report {
    let mut lines = Vec::new();
    let reached = match client.apiserver_version().await {
        Ok(v) => {
            lines.push(Line::pass(
                "kubernetes-api",
                format!("the API server answers (Kubernetes {})", v.git_version),
            ));
            true
        }
        Err(e) => {
            lines.push(Line::fail(
                "kubernetes-api",
                format!("cannot reach the API server: {e}"),
                "check KUBECONFIG (or the pod's service account) and that the server is up",
            ));
            false
        }
    };
    if !reached {
        return Report::new(lines);
    }
    let collectors = cfg.collectors();
    if collectors.is_empty() {
        lines.push(Line::warn(
            "collectors",
            "no collector is enabled: sweeper would do nothing",
            "turn one on with --feature-gates (Helm: featureGates.*)",
        ));
    } else {
        lines.push(Line::pass(
            "collectors",
            format!("enabled: {}", collectors.join(", ")),
        ));
    }
    lines.extend(crds::check(client, cfg).await);
    lines.extend(rbac::check(client, cfg).await);
    let wanted = cfg.preflights();
    if wanted.contains(&Preflight::Capa) {
        lines.extend(capa::check(client, cfg).await);
    }
    if wanted.contains(&Preflight::Aws) {
        lines.extend(aws::check(client, cfg, aws).await);
    }
    if cfg.enabled("external") {
        lines.extend(names::check(client).await);
    }
    if wanted.contains(&Preflight::KubeGc) {
        lines.extend(kube_gc::check(client, cfg).await);
    }
    lines.extend(state::check(client, cfg).await);
    if cfg.archive && wanted.contains(&Preflight::Archive) {
        lines.extend(archive::check(client, cfg).await);
    }
    Report::new(lines)
}

/// A Lease's renewal age and duration in seconds (a missing duration is client-go's 15 s);
/// `None` when it was never renewed. The leader and kube-gc checks judge freshness by it alike.
pub(crate) fn lease_age(
    spec: &k8s_openapi::api::coordination::v1::LeaseSpec,
    now: k8s_openapi::jiff::Timestamp,
) -> Option<(i64, i64)> {
    let renewed = spec.renew_time.as_ref()?.0;
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    Some((now.duration_since(renewed).as_secs(), duration))
}

/// What a check could not find out, with what it was about; the check's line says so (a line's
/// text is the message: the object is already in the line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// The SelfSubjectAccessReview of `permission` itself failed.
    #[error("{message}")]
    Review { permission: String, message: String },
    /// No answer for `permission` (not among those reviewed).
    #[error("not reviewed")]
    NotReviewed { permission: String },
    #[error("cannot list {plural}: {message}")]
    List { plural: String, message: String },
    /// The identity at `place` does not resolve (its object, allowedNamespaces, Secret).
    #[error("{message}")]
    Identity { place: String, message: String },
    /// The identity at `place` resolved, but no session could be built with it.
    #[error("{message}")]
    Session { place: String, message: String },
}

/// The short form of a kube error for a line: the API's own message when there is one.
pub(crate) fn kube_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        other => other.to_string(),
    }
}

/// Whether `e` is the API server refusing this identity (403).
pub(crate) fn forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403)
}
