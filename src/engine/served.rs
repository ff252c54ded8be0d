//! Whether the kinds each enabled collector acts on are served at all.
//!
//! A collector turned on where its kind's CRD is missing (TenantGC without KubeZoo, the external
//! collector without CAPA) has a watch that fails with a bare 404 forever: the pod never becomes
//! ready, and the kubelet's probe event shows only the status code. This check names the missing
//! CRD, the project it belongs to and the gate that turns the collector off, once per change at
//! error level in the log and, until it is served, as the reason of the `crds` readiness
//! component (/readyz, /status, `sweeper status`). It reads discovery's report, so it costs no
//! API call, and it follows each refresh: installing the CRD later makes the pod ready.

use crate::engine::discovery::DiscoveryReport;
use crate::engine::health::Health;
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The readiness component this check reports on.
pub const COMPONENT: &str = "crds";

/// A kind a collector cannot work without, by group and plural resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServedKind {
    pub group: &'static str,
    pub resource: &'static str,
    /// Whose CRD it is, for the message: "KubeZoo's Tenant".
    pub owner: &'static str,
}

impl ServedKind {
    /// The CRD's name: `<resource>.<group>`.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.resource, self.group)
    }
}

/// An enabled collector and the kinds it needs.
#[derive(Clone, Debug)]
pub struct Needs {
    pub collector: &'static str,
    pub gate: &'static str,
    pub kinds: &'static [ServedKind],
}

/// A kind an enabled collector needs that discovery did not find.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    pub collector: &'static str,
    pub gate: &'static str,
    pub kind: ServedKind,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} is not served ({} CRD is not installed): install it, or turn the collector off \
             (--feature-gates={}=false; Helm: featureGates.{}=false)",
            self.collector,
            self.kind.crd_name(),
            self.kind.owner,
            self.gate,
            self.gate
        )
    }
}

/// The needed kinds `report` does not serve. A kind whose group failed discovery this time is
/// unknown, not missing: the watch's own health speaks for it.
pub fn missing(report: &DiscoveryReport, needs: &[Needs]) -> Vec<Missing> {
    let served = |k: &ServedKind| {
        report
            .resources
            .iter()
            .any(|r| r.resource.group == k.group && r.resource.plural == k.resource)
    };
    let unknown = |k: &ServedKind| {
        report
            .failed
            .iter()
            .any(|f| f.group_version.split('/').next() == Some(k.group))
    };
    needs
        .iter()
        .flat_map(|n| {
            n.kinds.iter().map(|k| Missing {
                collector: n.collector,
                gate: n.gate,
                kind: *k,
            })
        })
        .filter(|m| !served(&m.kind) && !unknown(&m.kind))
        .collect()
}

/// Follows discovery until shutdown: the `crds` component is ready while every needed kind is
/// served, else failing with each missing kind's message, logged once per change.
pub async fn check(
    mut discovery: watch::Receiver<Option<Arc<DiscoveryReport>>>,
    health: Health,
    needs: Vec<Needs>,
    shutdown: CancellationToken,
) {
    let mut last: Option<Vec<Missing>> = None;
    loop {
        let report = discovery.borrow_and_update().clone();
        if let Some(report) = report {
            let now = missing(&report, &needs);
            if last.as_ref() != Some(&now) {
                if now.is_empty() {
                    if last.is_some() {
                        tracing::info!("every enabled collector's kinds are served");
                    }
                    health.set_ready(COMPONENT, true);
                } else {
                    for m in &now {
                        tracing::error!(
                            collector = m.collector,
                            crd = %m.kind.crd_name(),
                            gate = m.gate,
                            "collector's kinds are not served: {m}"
                        );
                    }
                    let reason = now.iter().map(|m| m.to_string()).collect::<Vec<_>>();
                    health.set_failing(COMPONENT, reason.join("; "));
                }
                last = Some(now);
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = discovery.changed() => if changed.is_err() { return },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::discovery::{DeletableResource, FailedGroup};
    use kube::discovery::ApiResource;

    const TENANT: ServedKind = ServedKind {
        group: "tenant.kubezoo.io",
        resource: "tenants",
        owner: "KubeZoo's Tenant",
    };
    const AWSCLUSTER: ServedKind = ServedKind {
        group: "infrastructure.cluster.x-k8s.io",
        resource: "awsclusters",
        owner: "CAPA's AWSCluster",
    };

    fn report(served: &[(&str, &str)], failed: &[&str]) -> DiscoveryReport {
        DiscoveryReport {
            resources: served
                .iter()
                .map(|(group, plural)| DeletableResource {
                    resource: ApiResource {
                        group: group.to_string(),
                        version: "v1".into(),
                        api_version: format!("{group}/v1"),
                        kind: "X".into(),
                        plural: plural.to_string(),
                    },
                    namespaced: true,
                })
                .collect(),
            failed: failed
                .iter()
                .map(|gv| FailedGroup {
                    group_version: gv.to_string(),
                    error: "503".into(),
                })
                .collect(),
        }
    }

    fn needs() -> Vec<Needs> {
        vec![
            Needs {
                collector: "tenant",
                gate: "TenantGC",
                kinds: &[TENANT],
            },
            Needs {
                collector: "external",
                gate: "ExternalResourceGC",
                kinds: &[AWSCLUSTER],
            },
        ]
    }

    #[test]
    fn a_kind_not_served_is_missing_and_its_message_names_the_crd_and_the_gate() {
        let got = missing(
            &report(&[("infrastructure.cluster.x-k8s.io", "awsclusters")], &[]),
            &needs(),
        );
        assert_eq!(got.len(), 1);
        let text = got[0].to_string();
        for want in [
            "tenant: tenants.tenant.kubezoo.io is not served",
            "KubeZoo's Tenant CRD is not installed",
            "--feature-gates=TenantGC=false",
            "featureGates.TenantGC=false",
        ] {
            assert!(text.contains(want), "{want:?} in {text}");
        }
    }

    #[test]
    fn served_kinds_and_groups_that_failed_discovery_are_not_missing() {
        let all = report(
            &[
                ("tenant.kubezoo.io", "tenants"),
                ("infrastructure.cluster.x-k8s.io", "awsclusters"),
            ],
            &[],
        );
        assert_eq!(missing(&all, &needs()), vec![]);
        // A group whose discovery failed may still serve the kind: unknown, not missing.
        let failed = report(
            &[("infrastructure.cluster.x-k8s.io", "awsclusters")],
            &["tenant.kubezoo.io/v1alpha1"],
        );
        assert_eq!(missing(&failed, &needs()), vec![]);
        // Another kind of the same group does not count.
        let other = report(
            &[
                ("tenant.kubezoo.io", "quotas"),
                ("infrastructure.cluster.x-k8s.io", "awsclusters"),
            ],
            &[],
        );
        assert_eq!(missing(&other, &needs()).len(), 1);
    }

    #[tokio::test]
    async fn the_component_follows_discovery() {
        let (tx, rx) = watch::channel(None);
        let health = Health::new();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(check(rx, health.clone(), needs(), shutdown.clone()));
        tx.send_replace(Some(Arc::new(report(
            &[("infrastructure.cluster.x-k8s.io", "awsclusters")],
            &[],
        ))));
        let settle = || tokio::time::sleep(std::time::Duration::from_millis(50));
        settle().await;
        assert!(!health.is_ready());
        assert!(
            health.reasons()[COMPONENT].contains("tenants.tenant.kubezoo.io"),
            "{:?}",
            health.reasons()
        );
        // The CRD installed: found at the next refresh.
        tx.send_replace(Some(Arc::new(report(
            &[
                ("tenant.kubezoo.io", "tenants"),
                ("infrastructure.cluster.x-k8s.io", "awsclusters"),
            ],
            &[],
        ))));
        settle().await;
        assert!(health.is_ready(), "{:?}", health.not_ready());
        shutdown.cancel();
        task.await.unwrap();
    }
}
