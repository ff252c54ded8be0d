//! The tenant collector as sweeper's one list of collectors sees it (see crate::collectors).

use super::metrics::TenantMetrics;
use super::teardown::TeardownSettings;
use crate::collectors::{BuildEnv, Gate, Registered, Spec};
use crate::engine::collector::Collector;
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use serde_json::{Map, Value};
use std::sync::Arc;

pub const NAME: &str = "tenant";

pub struct TenantSpec;
pub static SPEC: TenantSpec = TenantSpec;

impl Spec for TenantSpec {
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

    fn register(&self, registry: &mut Registry) -> Arc<dyn Registered> {
        let metrics = TenantMetrics::default();
        metrics.register(registry);
        Arc::new(metrics)
    }

    fn render(&self, status: &Map<String, Value>) -> Option<String> {
        crate::collectors::teardowns::render(NAME, status)
    }
}

impl Registered for TenantMetrics {
    fn status(&self) -> Map<String, Value> {
        crate::collectors::teardowns::status(NAME, &self.teardown)
    }

    fn build<'a>(&'a self, env: BuildEnv<'a>) -> BoxFuture<'a, Box<dyn Collector>> {
        Box::pin(async move {
            let args = env.args;
            let settings = TeardownSettings {
                strategy: args.tenant_gc_strategy,
                scan_kinds: args.tenant_scan_kinds.clone(),
                dry_run: args.tenant_dry_run,
                delete_concurrency: args.tenant_delete_concurrency as usize,
                archive: env.archives.archiver(&env.client, &env.fence, NAME),
            };
            Box::new(super::controller::TenantCollector::new(
                env.client,
                settings,
                self.clone(),
                env.discovery.clone(),
                env.teardowns.clone(),
                env.invalid_objects.clone(),
                env.fence,
            )) as Box<dyn Collector>
        })
    }
}
