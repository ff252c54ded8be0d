//! `sweeper_tenant_*` metrics.

use crate::config::TenantGcStrategy;
use crate::engine::finalizer_controller::TeardownMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StrategyLabels {
    pub strategy: String,
}

#[derive(Clone)]
pub struct TenantMetrics {
    /// In progress, duration, completed, reconcile failures: declared by the engine.
    pub teardown: TeardownMetrics,
    pub deleted_objects: Family<KindLabels, Counter>,
    pub errors: Family<KindLabels, Counter>,
    pub listed_objects: Family<StrategyLabels, Counter>,
    pub invalid_tenants: Counter,
    /// Each teardown's objects left and deleted so far (`/status`, not a metric: per tenant).
    pub progress: super::progress::TeardownProgress,
}

impl Default for TenantMetrics {
    fn default() -> Self {
        TenantMetrics {
            teardown: TeardownMetrics::new([0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0]),
            deleted_objects: Family::default(),
            errors: Family::default(),
            listed_objects: Family::default(),
            invalid_tenants: Counter::default(),
            progress: Default::default(),
        }
    }
}

impl TenantMetrics {
    pub fn register(&self, r: &mut Registry) {
        let r = r.sub_registry_with_prefix("tenant");
        self.teardown.register(r, "tenants");
        r.register(
            "deleted_objects",
            "Tenant objects deleted, by kind",
            self.deleted_objects.clone(),
        );
        r.register(
            "errors",
            "Failed lists or deletes during tenant teardown, by kind",
            self.errors.clone(),
        );
        r.register(
            "listed_objects",
            "Objects listed to find tenant objects, by strategy",
            self.listed_objects.clone(),
        );
        r.register(
            "invalid_tenants",
            "Tenants refused for an invalid id",
            self.invalid_tenants.clone(),
        );
    }

    pub fn listed(&self, s: TenantGcStrategy, n: u64) {
        let strategy = format!("{s:?}").to_lowercase();
        self.listed_objects
            .get_or_create(&StrategyLabels { strategy })
            .inc_by(n);
    }

    pub fn deleted(&self, kind: &str) {
        self.deleted_objects
            .get_or_create(&KindLabels { kind: kind.into() })
            .inc();
    }

    pub fn error(&self, kind: &str) {
        self.errors
            .get_or_create(&KindLabels { kind: kind.into() })
            .inc();
    }
}
