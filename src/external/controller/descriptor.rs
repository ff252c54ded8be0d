//! The external collector as sweeper's one list of collectors sees it (see crate::catalog): its
//! implementation of the collector interface, crate::collector.

use crate::collector::built::Collector;
use crate::collector::check::{Access, Permission, Preflight};
use crate::collector::{BuildEnv, CollectorDescriptor, Registered};
use crate::config::Gate;
use crate::engine::served::ServedKind;
use crate::external::controller::metrics::ExternalMetrics;
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use serde_json::{Map, Value};
use std::sync::Arc;

pub const NAME: &str = "external";
/// The /status field listing the clusters left alone under Cluster API's contract.
const HELD: &str = "external_held";
/// The gate that switches AWS discovery from the tagging API to describe calls.
pub const ALTERNATIVE_GC_STRATEGY: &str = "AlternativeGCStrategy";

const CAPA: &str = "CAPA (cluster-api-provider-aws v2)";

/// A CAPA kind it reads at v1beta2 (CAPA v2) and does not finalize.
const fn capa(group: &'static str, resource: &'static str) -> ServedKind {
    ServedKind {
        group,
        resource,
        versions: &["v1beta2"],
        project: CAPA,
        finalized: None,
    }
}

/// The kinds it reads: its two, the EKS cluster whose switches count too, the identities, and
/// Cluster API's Cluster (for its contract), stored at v1beta2 and still read at v1beta1.
const KINDS: &[ServedKind] = &[
    ServedKind {
        finalized: Some("CAPA's AWSCluster"),
        ..capa("infrastructure.cluster.x-k8s.io", "awsclusters")
    },
    ServedKind {
        finalized: Some("CAPA's AWSManagedControlPlane"),
        ..capa("controlplane.cluster.x-k8s.io", "awsmanagedcontrolplanes")
    },
    capa("infrastructure.cluster.x-k8s.io", "awsmanagedclusters"),
    capa(
        "infrastructure.cluster.x-k8s.io",
        "awsclusterroleidentities",
    ),
    capa(
        "infrastructure.cluster.x-k8s.io",
        "awsclusterstaticidentities",
    ),
    capa(
        "infrastructure.cluster.x-k8s.io",
        "awsclustercontrolleridentities",
    ),
    ServedKind {
        group: "cluster.x-k8s.io",
        resource: "clusters",
        versions: &["v1beta2", "v1beta1"],
        project: "Cluster API",
        finalized: None,
    },
];

pub struct ExternalDescriptor;
pub static DESCRIPTOR: ExternalDescriptor = ExternalDescriptor;

impl CollectorDescriptor for ExternalDescriptor {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Off by default, as in the CAPA proposal.
    fn gate(&self) -> Gate {
        Gate {
            name: "ExternalResourceGC",
            default: false,
        }
    }

    /// Discovery by describe calls instead of the Resource Groups Tagging API.
    fn further_gates(&self) -> &'static [Gate] {
        &[Gate {
            name: ALTERNATIVE_GC_STRATEGY,
            default: false,
        }]
    }

    fn kinds(&self) -> &'static [ServedKind] {
        KINDS
    }

    /// A narrow role: its two kinds and their status, reads of what it resolves, and the Secrets
    /// of static identities in CAPA's namespace only.
    fn permissions(&self, access: Access<'_>) -> Vec<Permission> {
        let mut own = Vec::new();
        for (group, resource) in [
            ("infrastructure.cluster.x-k8s.io", "awsclusters"),
            ("controlplane.cluster.x-k8s.io", "awsmanagedcontrolplanes"),
        ] {
            own.extend(Permission::verbs(
                group,
                resource,
                &["get", "list", "watch", "patch"],
                "",
            ));
            own.push(Permission {
                subresource: "status",
                ..Permission::verbs(group, resource, &["patch"], "").remove(0)
            });
        }
        own.extend(Permission::verbs(
            "cluster.x-k8s.io",
            "clusters",
            &["get", "list", "watch"],
            "",
        ));
        for resource in [
            "awsmanagedclusters",
            "awsclustercontrolleridentities",
            "awsclusterroleidentities",
            "awsclusterstaticidentities",
        ] {
            own.extend(Permission::verbs(
                "infrastructure.cluster.x-k8s.io",
                resource,
                &["get"],
                "",
            ));
        }
        own.extend(Permission::verbs("", "namespaces", &["get"], ""));
        own.extend(Permission::verbs(
            "",
            "secrets",
            &["get"],
            access.capa_namespace,
        ));
        own.extend(Permission::verbs("events.k8s.io", "events", &["patch"], ""));
        own
    }

    /// The hand-over from CAPA's own gc, and every cluster identity in use.
    fn preflights(&self) -> &'static [Preflight] {
        &[Preflight::Capa, Preflight::Aws]
    }

    fn register(&self, registry: &mut Registry) -> Arc<dyn Registered> {
        let metrics = ExternalMetrics::default();
        metrics.register(registry);
        Arc::new(metrics)
    }

    /// The teardowns line, then one line per cluster left alone under Cluster API's contract.
    fn render(&self, status: &Map<String, Value>) -> Option<String> {
        let mut out = crate::collector::teardowns::render(NAME, status)?;
        let held: Vec<crate::external::controller::held::HeldStatus> = status
            .get(HELD)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        for h in held {
            out.push_str(&format!(
                "\n  left alone: {} is {}: {}",
                h.object, h.state, h.detail
            ));
        }
        Some(out)
    }
}

impl Registered for ExternalMetrics {
    fn status(&self) -> Map<String, Value> {
        let mut status = crate::collector::teardowns::status(NAME, &self.teardown);
        status.insert(
            HELD.into(),
            serde_json::to_value(self.held.list()).unwrap_or_default(),
        );
        status
    }

    fn build<'a>(&'a self, env: BuildEnv<'a>) -> BoxFuture<'a, Box<dyn Collector>> {
        Box::pin(async move {
            let config = env.config;
            // Its audit records expire too, even when no collector archives. They are all
            // ConfigMaps: it lists no Secrets, so an external-only install needs no Secret access
            // outside CAPA's namespace (deploy/manifests/external-only).
            env.archive_hub.expire_records_of(
                &env.client,
                &env.fence,
                NAME,
                &[crate::archive::record_kind::RecordKind::ConfigMap],
            );
            // AWS calls pass the same fence as the collector's Kubernetes writes.
            let gate = env.fence.clone();
            // sweeper's own configuration is only the base (endpoint, default region, its own
            // credentials): each cluster gets a session of its own region and identity.
            let sessions = Arc::new(
                sweeper_aws::session::SessionCache::new(
                    sweeper_aws::load_config().await,
                    Some(sweeper_aws::fence::AwsFence(Arc::new(move || {
                        gate.permits()
                    }))),
                )
                // Every account's teardowns share one request budget (all its regions).
                .with_account_budget(config.aws_budget()),
            );
            let ctx = crate::external::controller::ExternalCtx::new(
                env.client,
                sessions,
                self.clone(),
                env.gates.enabled(ALTERNATIVE_GC_STRATEGY),
                env.invalid_objects.clone(),
            )
            .with_selector(config.external_gc_selector.clone())
            .with_scope(config.scope_namespaces.clone())
            .with_ebs_snapshot(config.external_ebs_snapshot)
            .with_dry_run(config.external_dry_run)
            .with_audit_ttl(config.archive_ttl)
            .with_audit_namespace(env.sweeper_namespace)
            .with_capa_namespace(config.capa_namespace.clone())
            .with_concurrency(config.external_concurrency);
            Box::new(crate::external::controller::ExternalCollector::new(
                ctx,
                env.teardowns.clone(),
                env.fence,
            )) as Box<dyn Collector>
        })
    }
}
