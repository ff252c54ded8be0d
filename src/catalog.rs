//! The one list of collectors, and what each one tells the rest of sweeper about itself.
//!
//! `run` (building and starting), `/status` and `sweeper status`, the pause switch, readiness's
//! served kinds, `sweeper check` (CRDs, permissions, further sections), `sweeper uninstall` and
//! the CLI's `--collector` and `--feature-gates` all iterate [`ALL`] and ask each [`CollectorDescriptor`].
//! Adding a collector is a folder with its code and a [`CollectorDescriptor`] (crate::collector), and one line in
//! [`ALL`]; nothing else names collectors.

use crate::collector::CollectorDescriptor;
use crate::config::Gate;
use crate::engine::served::{Needs, ServedKind};

/// Every collector, in the order they are built, started and shown.
pub static ALL: [&dyn CollectorDescriptor; 3] = [
    &crate::cascade::descriptor::DESCRIPTOR,
    &crate::tenant::descriptor::DESCRIPTOR,
    &crate::external::controller::descriptor::DESCRIPTOR,
];

/// The kinds whose objects can hold the finalizers of these collectors (each one's finalized
/// [`CollectorDescriptor::kinds`]), or None when one of them finalizes objects of every kind (cascade's
/// `sweeper.dev/cascade-complete`) or is not a collector. `sweeper uninstall --collector` reads
/// only these, so the chart's pre-delete hook needs no more than the role those collectors ran
/// with.
pub fn finalized_kinds<'a>(
    collectors: impl IntoIterator<Item = &'a str>,
) -> Option<Vec<ServedKind>> {
    let mut kinds = Vec::new();
    for name in collectors {
        let spec = ALL.iter().find(|s| s.name() == name)?;
        if spec.finalizes_every_kind() {
            return None;
        }
        kinds.extend(spec.kinds().iter().filter(|k| k.finalized.is_some()));
    }
    Some(kinds)
}

/// What `engine::served` checks for these enabled collectors: each one that finalizes a kind of
/// another project's cannot work while that kind is not served. The cascade collector works on
/// whatever is served.
pub fn served_needs<'a>(enabled: impl IntoIterator<Item = &'a str>) -> Vec<Needs> {
    enabled
        .into_iter()
        .filter_map(|name| {
            let spec = ALL.iter().find(|s| s.name() == name)?;
            let kinds = spec.kinds();
            kinds.iter().any(|k| k.finalized.is_some()).then(|| Needs {
                collector: spec.name(),
                gate: spec.gate().name,
                kinds,
            })
        })
        .collect()
}

/// The collectors' names, in [`ALL`]'s order (the pause switch's keys, `--collector` values).
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|s| s.name()).collect()
}

/// Every feature gate, in the list's order: each collector's own, then the further ones it
/// declares. What `--feature-gates` accepts (crate::config knows no gate by name).
pub fn gates() -> Vec<Gate> {
    ALL.iter()
        .flat_map(|s| std::iter::once(s.gate()).chain(s.further_gates().iter().copied()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FeatureGates;
    use prometheus_client::registry::Registry;

    #[test]
    fn every_gate_is_known_with_its_default() {
        let g = FeatureGates::defaults(&gates());
        assert_eq!(
            g.to_string(),
            "CascadeGC=true,TenantGC=false,ExternalResourceGC=false,AlternativeGCStrategy=false"
        );
        let g = FeatureGates::parse(
            "CascadeGC=false,TenantGC=true,ExternalResourceGC=TRUE,AlternativeGCStrategy=true",
            &gates(),
        )
        .unwrap();
        assert!(
            !g.enabled("CascadeGC")
                && g.enabled("TenantGC")
                && g.enabled("ExternalResourceGC")
                && g.enabled("AlternativeGCStrategy")
        );
        let err = FeatureGates::parse("CascadeGc=true", &gates()).unwrap_err();
        assert!(err.to_string().contains("ExternalResourceGC"), "{err}");
    }

    #[test]
    fn names_and_gates_are_unique() {
        let mut names = names();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ALL.len(), "two collectors share a name");
        let mut gates: Vec<_> = ALL.iter().map(|s| s.gate().name).collect();
        gates.sort();
        gates.dedup();
        assert_eq!(gates.len(), ALL.len(), "two collectors share a gate");
    }

    #[test]
    fn served_kinds_name_collectors_and_follow_their_gates() {
        let needs = served_needs(["cascade", "tenant", "external"]);
        let gates: Vec<_> = needs.iter().map(|n| (n.collector, n.gate)).collect();
        assert_eq!(
            gates,
            [("tenant", "TenantGC"), ("external", "ExternalResourceGC")]
        );
        assert!(served_needs(["cascade"]).is_empty());
    }

    #[test]
    fn finalized_kinds_are_the_served_ones_and_cascade_means_every_kind() {
        let external: Vec<_> = finalized_kinds(["external"])
            .unwrap()
            .iter()
            .map(|k| k.crd_name())
            .collect();
        assert_eq!(
            external,
            [
                "awsclusters.infrastructure.cluster.x-k8s.io",
                "awsmanagedcontrolplanes.controlplane.cluster.x-k8s.io"
            ]
        );
        assert_eq!(finalized_kinds(["tenant", "external"]).unwrap().len(), 3);
        assert!(finalized_kinds(["external", "cascade"]).is_none());
    }

    #[test]
    fn every_collector_reports_a_status_it_can_render() {
        for spec in ALL {
            let mut registry = Registry::default();
            let registered = spec.register(&mut registry);
            let status = registered.status();
            assert!(!status.is_empty(), "{} reports no status", spec.name());
            let line = spec
                .render(&status)
                .unwrap_or_else(|| panic!("{} cannot render its own status", spec.name()));
            assert!(line.starts_with(spec.name()), "{line}");
        }
    }
}
