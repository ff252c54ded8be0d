//! The tenant collector as sweeper's one list of collectors sees it (see crate::catalog): its
//! implementation of the collector interface, crate::collector.

use super::metrics::TenantMetrics;
use super::pass::PassSettings;
use crate::collector::built::Collector;
use crate::collector::check::{self, Access, Permission, Preflight};
use crate::collector::{BuildEnv, CollectorDescriptor, Registered};
use crate::config::Gate;
use crate::engine::served::ServedKind;
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use serde_json::{Map, Value};
use std::sync::Arc;

pub const NAME: &str = "tenant";

// The Tenant CRD's own spec is `api::tenant::TenantSpec`; this is the collector's descriptor.
pub struct TenantDescriptor;
pub static DESCRIPTOR: TenantDescriptor = TenantDescriptor;

impl CollectorDescriptor for TenantDescriptor {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Off by default: it adds finalizers to `Tenant` objects.
    fn gate(&self) -> Gate {
        Gate {
            name: "TenantGC",
            default: false,
        }
    }

    fn kinds(&self) -> &'static [ServedKind] {
        &[ServedKind {
            group: "tenant.kubezoo.io",
            resource: "tenants",
            versions: &["v1alpha1"],
            project: "KubeZoo",
            finalized: Some("KubeZoo's Tenant"),
        }]
    }

    /// A tenant's objects are of every kind discovery finds.
    fn permissions(&self, access: Access<'_>) -> Vec<Permission> {
        check::every_kind(access)
    }

    fn preflights(&self) -> &'static [Preflight] {
        &[Preflight::Archive]
    }

    fn register(&self, registry: &mut Registry) -> Arc<dyn Registered> {
        let metrics = TenantMetrics::default();
        metrics.register(registry);
        Arc::new(metrics)
    }

    /// The teardowns line, then each teardown's objects left and deleted so far.
    fn render(&self, status: &Map<String, Value>) -> Option<String> {
        let mut out = crate::collector::teardowns::render(NAME, status)?;
        out.push_str(&super::progress::render(status));
        Some(out)
    }
}

impl Registered for TenantMetrics {
    fn status(&self) -> Map<String, Value> {
        let mut status = crate::collector::teardowns::status(NAME, &self.teardown);
        status.insert(
            super::progress::FIELD.into(),
            serde_json::to_value(self.progress.list()).unwrap_or_default(),
        );
        status
    }

    fn build<'a>(&'a self, env: BuildEnv<'a>) -> BoxFuture<'a, Box<dyn Collector>> {
        Box::pin(async move {
            let config = env.config;
            let settings = PassSettings {
                strategy: config.tenant_gc_strategy,
                scan_kinds: config.tenant_scan_kinds.clone(),
                dry_run: config.tenant_dry_run,
                delete_concurrency: config.tenant_delete_concurrency as usize,
                archive: env.archive_hub.archiver(&env.client, &env.fence, NAME),
            };
            Box::new(
                super::reconciler::TenantCollector::new(
                    env.client,
                    settings,
                    self.clone(),
                    env.discovery.clone(),
                    env.teardowns.clone(),
                    env.invalid_objects.clone(),
                    env.fence,
                )
                .with_scope(config.tenant_scope_selector.clone()),
            ) as Box<dyn Collector>
        })
    }
}
