//! The external collector as sweeper's one list of collectors sees it (see crate::collectors): its
//! implementation of the collector interface, crate::spec.

use super::metrics::ExternalMetrics;
use crate::config::Gate;
use crate::engine::collector::Collector;
use crate::spec::{BuildEnv, Registered, Spec};
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use serde_json::{Map, Value};
use std::sync::Arc;

pub const NAME: &str = "external";
/// The /status field listing the clusters left alone under Cluster API's contract.
const HELD: &str = "external_held";
/// The gate that switches AWS discovery from the tagging API to describe calls.
pub const ALTERNATIVE_GC_STRATEGY: &str = "AlternativeGCStrategy";

pub struct ExternalSpec;
pub static SPEC: ExternalSpec = ExternalSpec;

impl Spec for ExternalSpec {
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

    fn register(&self, registry: &mut Registry) -> Arc<dyn Registered> {
        let metrics = ExternalMetrics::default();
        metrics.register(registry);
        Arc::new(metrics)
    }

    /// The teardowns line, then one line per cluster left alone under Cluster API's contract.
    fn render(&self, status: &Map<String, Value>) -> Option<String> {
        let mut out = crate::spec::teardowns::render(NAME, status)?;
        let held: Vec<super::held::HeldStatus> = status
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
        let mut status = crate::spec::teardowns::status(NAME, &self.teardown);
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
                NAME,
                &[crate::archive::record_kind::RecordKind::ConfigMap],
            );
            // AWS calls pass the same fence as the collector's Kubernetes writes.
            let gate = env.fence.clone();
            // sweeper's own configuration is only the base (endpoint, default region, its own
            // credentials): each cluster gets a session of its own region and identity.
            let sessions = Arc::new(sweeper_aws::session::SessionCache::new(
                sweeper_aws::load_config().await,
                Some(sweeper_aws::fence::Fence(Arc::new(move || gate.permits()))),
            ));
            let ctx = super::collector::ExternalCtx::new(
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
            Box::new(super::collector::ExternalCollector::new(
                ctx,
                env.teardowns.clone(),
                env.fence,
            )) as Box<dyn Collector>
        })
    }
}
