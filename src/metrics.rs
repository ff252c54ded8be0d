//! Prometheus metrics. Every name is prefixed `sweeper_`; collectors register their own families
//! on the shared registry through [`Metrics::registry_mut`] before the server starts.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    pub group: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InvalidObjectLabels {
    pub collector: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CollectorLabels {
    pub collector: String,
}

/// `sweeper_paused{collector}`: 1 while the collector is paused (written by the engine's pause
/// switch; declared here so metrics need nothing from the engine).
pub type PausedGauge = Family<CollectorLabels, Gauge>;

/// Metrics owned by the service itself (collector metrics live beside their collectors).
#[derive(Clone, Default)]
pub struct ServiceMetrics {
    /// Resources that support list, watch and delete, as of the last discovery.
    pub discovered_resources: Gauge,
    /// API groups that failed discovery, by group, counted per refresh.
    pub discovery_failures: Family<GroupLabels, Counter>,
    /// Completed discovery refreshes.
    pub discovery_refreshes: Counter,
    /// 1 while this replica holds the leader lease (always 1 without leader election).
    pub leader_is_leader: Gauge,
    /// Mutating requests refused because this replica did not hold the lease.
    pub leader_fenced_requests: Counter,
    /// 1 while a collector is paused (`sweeper pause`), by collector.
    pub paused: PausedGauge,
    /// Objects a collector could not decode (each new version of a bad object counts once).
    pub invalid_objects: Family<InvalidObjectLabels, Counter>,
    /// How long each collector's oldest teardown in progress has run, in seconds (0 with none).
    pub teardown_oldest_seconds: Family<CollectorLabels, Gauge>,
}

pub struct Metrics {
    registry: Registry,
    pub service: ServiceMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sweeper");
        let service = ServiceMetrics::default();
        registry.register(
            "discovered_resources",
            "Resources supporting list, watch and delete found by the last discovery",
            service.discovered_resources.clone(),
        );
        registry.register(
            "discovery_failures",
            "API groups that failed discovery, by group",
            service.discovery_failures.clone(),
        );
        registry.register(
            "discovery_refreshes",
            "Completed discovery refreshes",
            service.discovery_refreshes.clone(),
        );
        registry.register(
            "leader_is_leader",
            "1 while this replica holds the leader lease (always 1 without leader election)",
            service.leader_is_leader.clone(),
        );
        registry.register(
            "leader_fenced_requests",
            "Kubernetes writes refused because this replica did not hold the leader lease",
            service.leader_fenced_requests.clone(),
        );
        registry.register(
            "paused",
            "1 while the collector is paused by `sweeper pause` (or its switch is not read yet)",
            service.paused.clone(),
        );
        registry.register(
            "invalid_objects",
            "Objects a collector could not decode, by collector and kind (reported on the object, never acted on)",
            service.invalid_objects.clone(),
        );
        registry.register(
            "teardown_oldest_seconds",
            "How long the collector's oldest teardown in progress has run since its object was deleted, in seconds (0 with none; the same on a new leader after a failover)",
            service.teardown_oldest_seconds.clone(),
        );
        Self { registry, service }
    }

    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// OpenMetrics text exposition of every registered family.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_carries_the_sweeper_prefix() {
        let m = Metrics::new();
        m.service.discovered_resources.set(7);
        m.service
            .discovery_failures
            .get_or_create(&GroupLabels {
                group: "metrics.k8s.io".into(),
            })
            .inc();
        let text = m.encode().unwrap();
        assert!(text.contains("sweeper_discovered_resources 7"), "{text}");
        assert!(
            text.contains("sweeper_discovery_failures_total{group=\"metrics.k8s.io\"} 1"),
            "{text}"
        );
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            assert!(
                line.starts_with("sweeper_"),
                "unprefixed metric line: {line}"
            );
        }
    }
}
