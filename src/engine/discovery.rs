//! Discovery of every resource the collectors may have to watch and delete.
//!
//! Like the upstream garbage collector we take each group's preferred version and keep the
//! resources that support list, watch and delete. Unlike `kube::Discovery::run`, one failing group
//! (an aggregated API whose backend is down, a group we may not read) does not fail the whole
//! refresh: it is reported in [`DiscoveryReport::failed`] and retried on the next refresh.

mod aggregated;

use kube::Client;
use kube::core::GroupVersion;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope, verbs};

/// Groups and kinds never collected: events are high-churn and short-lived (upstream ignores them).
const IGNORED: [(&str, &str); 2] = [("", "Event"), ("events.k8s.io", "Event")];

/// One deletable resource type.
#[derive(Clone, Debug)]
pub struct DeletableResource {
    pub resource: ApiResource,
    pub namespaced: bool,
}

impl DeletableResource {
    /// `group/version/kind` with an empty group for core, the form used in logs and queries.
    pub fn gvk_string(&self) -> String {
        format!(
            "{}/{}/{}",
            self.resource.group, self.resource.version, self.resource.kind
        )
    }
}

/// A group that could not be discovered this time.
#[derive(Debug, Clone)]
pub struct FailedGroup {
    pub group_version: String,
    pub error: String,
}

#[derive(Debug, Default, Clone)]
pub struct DiscoveryReport {
    pub resources: Vec<DeletableResource>,
    pub failed: Vec<FailedGroup>,
}

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// Without the group list nothing can be discovered; this one is fatal for the refresh.
    #[error("cannot list API groups from the API server: {0}")]
    ListGroups(#[source] kube::Error),
}

/// Whether a resource with these capabilities is something a collector can handle.
pub fn is_deletable(resource: &ApiResource, caps: &ApiCapabilities) -> bool {
    caps.supports_operation(verbs::LIST)
        && caps.supports_operation(verbs::WATCH)
        && caps.supports_operation(verbs::DELETE)
        && !IGNORED
            .iter()
            .any(|(g, k)| resource.group == *g && resource.kind == *k)
}

/// Runs one discovery pass: two calls where the API server serves aggregated discovery
/// (Kubernetes 1.26+), else one for the group list and one per group version.
pub async fn discover_deletable(client: &Client) -> Result<DiscoveryReport, DiscoveryError> {
    let started = std::time::Instant::now();
    let groups = match aggregated::discover(client)
        .await
        .map_err(DiscoveryError::ListGroups)?
    {
        aggregated::Answer::Aggregated(report) => {
            tracing::debug!(
                ms = started.elapsed().as_millis() as u64,
                "aggregated discovery"
            );
            return Ok(report);
        }
        aggregated::Answer::Classic(groups) => groups,
    };
    let mut targets: Vec<GroupVersion> = vec![GroupVersion::gv("", "v1")];
    for g in groups.groups {
        let version = g
            .preferred_version
            .as_ref()
            .map(|v| v.version.clone())
            .or_else(|| g.versions.first().map(|v| v.version.clone()));
        if let Some(version) = version {
            targets.push(GroupVersion::gv(&g.name, &version));
        }
    }

    let mut report = DiscoveryReport::default();
    for gv in targets {
        match discovery::pinned_group(client, &gv).await {
            Ok(group) => {
                for (resource, caps) in group.recommended_resources() {
                    if is_deletable(&resource, &caps) {
                        report.resources.push(DeletableResource {
                            namespaced: caps.scope == Scope::Namespaced,
                            resource,
                        });
                    }
                }
            }
            Err(e) => {
                tracing::warn!(group_version = %gv.api_version(), error = %e, "API group failed discovery; skipped until the next refresh");
                report.failed.push(FailedGroup {
                    group_version: gv.api_version(),
                    error: e.to_string(),
                });
            }
        }
    }
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "discovery, group by group"
    );
    Ok(report)
}

/// Asks the refresh loop for a discovery now instead of at the next interval. A watch whose list
/// answers 404 (its CRD deleted after the last discovery) asks: otherwise it retries until the
/// next refresh drops it, and holds the cascade's first sync (so /readyz) for up to a whole
/// interval. Requests coalesce; refreshes they cause are at least [`REFRESH_NOW_GAP`] apart.
#[derive(Clone, Default)]
pub struct RefreshNow(pub(crate) std::sync::Arc<tokio::sync::Notify>);

impl RefreshNow {
    pub fn request(&self) {
        self.0.notify_one();
    }
}

/// The least time between two refreshes a [`RefreshNow`] asked for: a resource discovery keeps
/// listing while its list answers 404 (an API server behind the others) asks again at each
/// retry, and a refresh costs a call per group version on servers without aggregated discovery.
pub const REFRESH_NOW_GAP: std::time::Duration = std::time::Duration::from_secs(2);

/// Refreshes discovery every `interval`, and when `now` asks, and publishes each report.
/// Readiness means "connected and discovered at least once".
pub async fn refresh_loop(
    client: kube::Client,
    state: super::health::Health,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    interval: std::time::Duration,
    now: RefreshNow,
    publish: tokio::sync::watch::Sender<Option<std::sync::Arc<DiscoveryReport>>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
            _ = now.0.notified() => {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep_until(last + REFRESH_NOW_GAP) => {}
                }
                // The interval counts from this refresh.
                ticker.reset();
            }
        }
        last = tokio::time::Instant::now();
        match discover_deletable(&client).await {
            Ok(report) => {
                record(&metrics.service, &report);
                let changed = publish
                    .borrow()
                    .as_ref()
                    .is_none_or(|old| !same_resources(old, &report));
                if changed {
                    publish.send_replace(Some(std::sync::Arc::new(report)));
                }
                state.set_ready("discovery", true);
            }
            Err(e) => tracing::warn!(error = %e, "discovery failed; retrying at the next refresh"),
        }
    }
}

/// Whether two reports say the same thing (same resources, same failed groups): an unchanged
/// report is not republished, so watches are not reconciled for nothing.
fn same_resources(a: &DiscoveryReport, b: &DiscoveryReport) -> bool {
    let key = |r: &DiscoveryReport| {
        let mut v: Vec<String> = r
            .resources
            .iter()
            .map(|d| format!("{}/{}", d.gvk_string(), d.resource.plural))
            .chain(
                r.failed
                    .iter()
                    .map(|f| format!("failed:{}", f.group_version)),
            )
            .collect();
        v.sort();
        v
    };
    key(a) == key(b)
}

fn record(m: &crate::metrics::ServiceMetrics, report: &DiscoveryReport) {
    m.discovered_resources.set(report.resources.len() as i64);
    m.discovery_refreshes.inc();
    for failed in &report.failed {
        m.discovery_failures
            .get_or_create(&crate::metrics::GroupLabels {
                group: failed.group_version.clone(),
            })
            .inc();
    }
    let namespaced = report.resources.iter().filter(|r| r.namespaced).count();
    tracing::debug!(
        resources = report.resources.len(),
        namespaced,
        cluster_scoped = report.resources.len() - namespaced,
        failed_groups = report.failed.len(),
        "discovered deletable resources"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::discovery::ApiCapabilities;

    fn caps(verbs: &[&str]) -> ApiCapabilities {
        ApiCapabilities {
            scope: Scope::Namespaced,
            subresources: vec![],
            operations: verbs.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn ar(group: &str, kind: &str) -> ApiResource {
        ApiResource {
            group: group.into(),
            version: "v1".into(),
            api_version: if group.is_empty() {
                "v1".into()
            } else {
                format!("{group}/v1")
            },
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
        }
    }

    #[test]
    fn needs_list_watch_and_delete() {
        let all = caps(&["list", "watch", "delete", "get"]);
        assert!(is_deletable(&ar("", "ConfigMap"), &all));
        assert!(!is_deletable(
            &ar("", "ConfigMap"),
            &caps(&["list", "watch", "get"])
        ));
        assert!(!is_deletable(
            &ar("", "ConfigMap"),
            &caps(&["list", "delete"])
        ));
    }

    #[test]
    fn events_are_ignored_in_both_groups() {
        let all = caps(&["list", "watch", "delete"]);
        assert!(!is_deletable(&ar("", "Event"), &all));
        assert!(!is_deletable(&ar("events.k8s.io", "Event"), &all));
        assert!(is_deletable(&ar("example.com", "Event"), &all));
    }
}
