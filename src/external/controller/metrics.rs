//! `sweeper_external_*` metrics.

use crate::engine::finalizer_controller::TeardownMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    pub service: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AccountLabels {
    pub account: String,
}

#[derive(Clone)]
pub struct ExternalMetrics {
    /// Seconds teardowns' AWS calls waited on their account's request budget
    /// (`--aws-account-qps`), by account (few: the fleet's accounts).
    pub budget_wait: Family<AccountLabels, Counter<f64, AtomicU64>>,
    /// What `budget_wait` last took from each account's budget (its total only grows).
    budget_seen: Arc<Mutex<HashMap<String, f64>>>,
    /// Teardown passes that could not start because the cluster's identity or session was
    /// refused (nothing was looked up or deleted), by reason.
    pub identity_refused: Family<ReasonLabels, Counter>,
    /// Discovered resources ignored because their ARN names another partition, region or
    /// account than the cluster's session.
    pub foreign_ignored: Counter,
    pub deleted: Family<ResourceLabels, Counter>,
    /// `--external-dry-run`: AWS resources a teardown would delete, counted when a cluster's
    /// plan is new or changes (not on every re-plan of the same resources).
    pub would_delete: Family<ResourceLabels, Counter>,
    pub errors: Family<ResourceLabels, Counter>,
    pub invalid_objects: Counter,
    /// In progress, duration, completed, reconcile failures: declared by the engine.
    pub teardown: TeardownMetrics,
    /// Clusters left alone under Cluster API's contract (also in `sweeper status`).
    pub held: crate::external::controller::held::Held,
}

impl Default for ExternalMetrics {
    fn default() -> Self {
        ExternalMetrics {
            budget_wait: Family::default(),
            budget_seen: Arc::default(),
            identity_refused: Family::default(),
            foreign_ignored: Counter::default(),
            deleted: Family::default(),
            would_delete: Family::default(),
            errors: Family::default(),
            invalid_objects: Counter::default(),
            teardown: TeardownMetrics::new([
                1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0,
            ]),
            held: Default::default(),
        }
    }
}

impl ExternalMetrics {
    pub fn register(&self, r: &mut Registry) {
        let r = r.sub_registry_with_prefix("external");
        self.teardown.register(r, "clusters' AWS resources");
        r.register(
            "clusters_held",
            "Cluster objects sweeper leaves alone under Cluster API's contract, by state (paused, marked for move, externally managed, cluster unreadable)",
            self.held.gauge.clone(),
        );
        r.register(
            "aws_budget_wait_seconds",
            "Seconds teardowns' AWS calls waited on their account's request budget (--aws-account-qps), by account",
            self.budget_wait.clone(),
        );
        r.register(
            "deleted",
            "AWS resources deleted, by service and kind",
            self.deleted.clone(),
        );
        r.register(
            "would_delete",
            "Dry run: AWS resources a teardown would delete, by service and kind (counted when a cluster's plan changes)",
            self.would_delete.clone(),
        );
        r.register(
            "errors",
            "AWS resources that failed to delete in a pass, by service and kind",
            self.errors.clone(),
        );
        r.register(
            "invalid_objects",
            "Passes refused for a bad annotation or cluster name",
            self.invalid_objects.clone(),
        );
        r.register(
            "identity_refused",
            "Teardown passes refused before any AWS call: the cluster's identity or session was refused, by reason",
            self.identity_refused.clone(),
        );
        r.register(
            "foreign_resources_ignored",
            "Discovered AWS resources ignored because their ARN names another partition, region or account than the cluster's session",
            self.foreign_ignored.clone(),
        );
    }

    /// Adds what calls waited on `budget` since last asked (after each pass of its account).
    pub fn count_budget_wait(&self, budget: &sweeper_aws::budget::Budget) {
        let total = budget.waited_seconds();
        let mut seen = self
            .budget_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let last = seen.entry(budget.account().to_string()).or_default();
        if total > *last {
            self.budget_wait
                .get_or_create(&AccountLabels {
                    account: budget.account().to_string(),
                })
                .inc_by(total - *last);
            *last = total;
        }
    }

    pub fn labels(service: &str, kind: &str) -> ResourceLabels {
        ResourceLabels {
            service: service.into(),
            kind: kind.into(),
        }
    }
}

/// Counts what a pass did into the metrics: deleted and left by service and kind, resources of
/// another partition, region or account ignored.
pub fn count(report: &sweeper_aws::phases::PassReport, m: &ExternalMetrics) {
    for p in &report.phases {
        for d in &p.deleted {
            m.deleted
                .get_or_create(&ExternalMetrics::labels(&d.service, &d.kind))
                .inc();
        }
        for (r, _) in &p.remaining {
            m.errors
                .get_or_create(&ExternalMetrics::labels(&r.service, &r.kind))
                .inc();
        }
        m.foreign_ignored.inc_by(p.foreign.len() as u64);
    }
}
