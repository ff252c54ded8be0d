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
use crate::engine::events::Publisher;
use crate::engine::health::Health;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The readiness component this check reports on.
pub const COMPONENT: &str = "crds";

/// A kind of another project's that a collector reads, as its `CollectorDescriptor` declares it (see
/// `crate::collector::CollectorDescriptor::kinds`): the one description `sweeper check` (served at a version sweeper
/// reads), this readiness check (served at all), and `sweeper uninstall` (where the collector's
/// finalizers can be) all read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServedKind {
    pub group: &'static str,
    /// The plural resource.
    pub resource: &'static str,
    /// The versions sweeper reads it at, preferred first.
    pub versions: &'static [&'static str],
    /// Whose CRD it is, as `sweeper check`'s hint names the project to install or upgrade:
    /// "CAPA (cluster-api-provider-aws v2)".
    pub project: &'static str,
    /// Set when the collector watches this kind and puts its finalizer on its objects: then it
    /// cannot work without it, and this names the kind while it is not served ("CAPA's
    /// AWSCluster"). `None`: only read now and then (an identity, the owning Cluster).
    pub finalized: Option<&'static str>,
}

impl ServedKind {
    /// The CRD's name: `<resource>.<group>`.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.resource, self.group)
    }
}

/// An enabled collector and the kinds it declares (only the finalized ones are needed here).
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
            self.kind.finalized.unwrap_or(self.kind.project),
            self.gate,
            self.gate
        )
    }
}

/// The needed kinds (the finalized ones) `report` does not serve. A kind whose group failed
/// discovery this time is unknown, not missing: the watch's own health speaks for it.
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
            n.kinds
                .iter()
                .filter(|k| k.finalized.is_some())
                .map(|k| Missing {
                    collector: n.collector,
                    gate: n.gate,
                    kind: *k,
                })
        })
        .filter(|m| !served(&m.kind) && !unknown(&m.kind))
        .collect()
}

/// Where the missing kinds are also told as an Event: sweeper's own Pod, so `kubectl describe pod`
/// and `kubectl get events` say why it is not ready (the kubelet's own probe Event shows only
/// "503").
#[derive(Clone)]
pub struct PodEvents {
    pub publisher: Publisher,
    pub pod: ObjectReference,
}

impl PodEvents {
    /// This process's Pod, when it runs in one: its namespace from the service account mount, its
    /// name from `POD_NAME` or the host name (a pod's host name is its name unless the pod spec
    /// sets another). The client should be unfenced: a standby is not ready either, and says why.
    pub fn of_this_pod(client: kube::Client) -> Option<Self> {
        let namespace = crate::engine::leader::default_namespace()?;
        let name = ["POD_NAME", "HOSTNAME"]
            .iter()
            .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))?;
        Some(PodEvents {
            publisher: Publisher::new(client, "sweeper", "Discover"),
            pod: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name),
                namespace: Some(namespace),
                ..Default::default()
            },
        })
    }
}

/// An Event's note is at most 1 KiB: the first kinds' messages, cut at a character boundary.
fn note(missing: &[Missing]) -> String {
    let mut text = missing
        .iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join("; ");
    if text.len() > 1000 {
        let mut cut = 1000;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Follows discovery until shutdown: the `crds` component is ready while every needed kind is
/// served, else failing with each missing kind's message, logged once per change and, in a pod,
/// sent as an Event on the pod (`CRDNotServed`, then `CRDsServed` once they are).
pub async fn check(
    mut discovery: watch::Receiver<Option<Arc<DiscoveryReport>>>,
    health: Health,
    needs: Vec<Needs>,
    events: Option<PodEvents>,
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
                        if let Some(e) = &events {
                            e.publisher
                                .emit(
                                    &e.pod,
                                    EventType::Normal,
                                    "CRDsServed",
                                    "every enabled collector's kinds are served".into(),
                                )
                                .await;
                        }
                    }
                    health.set_ready(COMPONENT, true);
                } else {
                    if let Some(e) = &events {
                        e.publisher
                            .emit(&e.pod, EventType::Warning, "CRDNotServed", note(&now))
                            .await;
                    }
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
        versions: &["v1alpha1"],
        project: "KubeZoo",
        finalized: Some("KubeZoo's Tenant"),
    };
    const AWSCLUSTER: ServedKind = ServedKind {
        group: "infrastructure.cluster.x-k8s.io",
        resource: "awsclusters",
        versions: &["v1beta2"],
        project: "CAPA",
        finalized: Some("CAPA's AWSCluster"),
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

    #[test]
    fn a_kind_only_read_is_never_missing() {
        const CLUSTERS: ServedKind = ServedKind {
            group: "cluster.x-k8s.io",
            resource: "clusters",
            versions: &["v1beta2", "v1beta1"],
            project: "Cluster API",
            finalized: None,
        };
        let needs = [Needs {
            collector: "external",
            gate: "ExternalResourceGC",
            kinds: &[AWSCLUSTER, CLUSTERS],
        }];
        let got = missing(&report(&[], &[]), &needs);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].kind, AWSCLUSTER);
    }

    #[tokio::test]
    async fn the_component_and_the_pods_events_follow_discovery() {
        let (client, server) = crate::testing::MockApi::new();
        server.allow_events();
        let events = PodEvents {
            publisher: Publisher::new(client, "sweeper", "Discover"),
            pod: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some("sweeper-7d9f-abc".into()),
                namespace: Some("sweeper-system".into()),
                ..Default::default()
            },
        };
        let (tx, rx) = watch::channel(None);
        let health = Health::new();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(check(
            rx,
            health.clone(),
            needs(),
            Some(events),
            shutdown.clone(),
        ));
        let missing_tenants = || {
            Some(Arc::new(report(
                &[("infrastructure.cluster.x-k8s.io", "awsclusters")],
                &[],
            )))
        };
        tx.send_replace(missing_tenants());
        let settle = || tokio::time::sleep(std::time::Duration::from_millis(50));
        settle().await;
        assert!(!health.is_ready());
        assert!(
            health.reasons()[COMPONENT].contains("tenants.tenant.kubezoo.io"),
            "{:?}",
            health.reasons()
        );
        // One Warning on the pod, naming the CRD and the gate; the same answer again adds none.
        tx.send_replace(missing_tenants());
        settle().await;
        assert_eq!(server.events(), ["CRDNotServed"]);
        let ev = &server.calls()[0];
        assert_eq!(
            ev.path,
            "/apis/events.k8s.io/v1/namespaces/sweeper-system/events"
        );
        assert_eq!(ev.body["type"], "Warning");
        assert_eq!(ev.body["regarding"]["kind"], "Pod");
        assert_eq!(ev.body["regarding"]["name"], "sweeper-7d9f-abc");
        let note = ev.body["note"].as_str().unwrap();
        assert!(
            note.contains("tenants.tenant.kubezoo.io") && note.contains("TenantGC=false"),
            "{note}"
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
        assert_eq!(server.events(), ["CRDNotServed", "CRDsServed"]);
        shutdown.cancel();
        task.await.unwrap();
    }

    #[test]
    fn a_long_note_is_cut_to_an_events_limit() {
        let many: Vec<Missing> = (0..40)
            .map(|_| Missing {
                collector: "external",
                gate: "ExternalResourceGC",
                kind: AWSCLUSTER,
            })
            .collect();
        let n = note(&many);
        assert!(n.len() <= 1024, "{}", n.len());
        assert!(n.ends_with('…'));
    }
}
