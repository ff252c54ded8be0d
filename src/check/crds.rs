//! Each enabled collector's kinds are served, at a version sweeper reads.
//!
//! sweeper reads CAPA's kinds at v1beta2 (CAPA v2), Cluster API's Cluster at v1beta2 or v1beta1,
//! and KubeZoo's Tenant at v1alpha1. A CRD that is installed but serves none of those is named with
//! the versions it does serve: that is an upgrade to make, not a CRD to install.

use super::{Config, Line, kube_message};
use crate::engine::client::not_found;
use std::collections::BTreeMap;
use std::sync::LazyLock;

const CATEGORY: &str = "crds";

/// A kind an enabled collector reads, and the versions it can read it at (preferred first): one
/// of its `CollectorDescriptor`'s kinds, with the collector that reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub collector: &'static str,
    pub group: &'static str,
    pub resource: &'static str,
    pub versions: &'static [&'static str],
    /// Whose CRD it is, for the hint.
    pub owner: &'static str,
}

/// Every kind, per collector, in the list's order (crate::catalog::ALL), as each collector's
/// `CollectorDescriptor::kinds` declares them. The cascade collector works on whatever is served.
pub static WANTED: LazyLock<Vec<Wanted>> = LazyLock::new(|| {
    crate::catalog::ALL
        .iter()
        .flat_map(|spec| {
            spec.kinds().iter().map(|k| Wanted {
                collector: spec.name(),
                group: k.group,
                resource: k.resource,
                versions: k.versions,
                owner: k.project,
            })
        })
        .collect()
});

/// What discovery says of one group: the versions it serves and, per version, its resources.
/// `None` for a group the server does not serve at all.
pub type Served = BTreeMap<String, Option<BTreeMap<String, Vec<String>>>>;

/// The line for one wanted kind.
pub fn judge(w: &Wanted, served: &Served) -> Line {
    let crd = format!("{}.{}", w.resource, w.group);
    let install = format!(
        "install {}'s CRDs, or turn the {} collector off (--feature-gates={}=false)",
        w.owner,
        w.collector,
        gate_of(w.collector)
    );
    let Some(Some(versions)) = served.get(w.group) else {
        return Line::fail(
            CATEGORY,
            format!(
                "{}: {crd} is not served (no group {})",
                w.collector, w.group
            ),
            install,
        );
    };
    if let Some(v) = w.versions.iter().find(|v| {
        versions
            .get(**v)
            .is_some_and(|r| r.iter().any(|r| r == w.resource))
    }) {
        return Line::pass(CATEGORY, format!("{}: {crd} is served at {v}", w.collector));
    }
    let other: Vec<&str> = versions
        .iter()
        .filter(|(_, r)| r.iter().any(|r| r == w.resource))
        .map(|(v, _)| v.as_str())
        .collect();
    if other.is_empty() {
        Line::fail(
            CATEGORY,
            format!("{}: {crd} is not served", w.collector),
            install,
        )
    } else {
        Line::fail(
            CATEGORY,
            format!(
                "{}: {crd} is served only at {}; sweeper reads {}",
                w.collector,
                other.join(", "),
                w.versions.join(" or ")
            ),
            format!(
                "upgrade {} to a release that serves {}",
                w.owner, w.versions[0]
            ),
        )
    }
}

fn gate_of(collector: &str) -> &'static str {
    crate::catalog::ALL
        .iter()
        .find(|s| s.name() == collector)
        .map(|s| s.gate().name)
        .unwrap_or("?")
}

/// The kinds the enabled collectors want.
pub async fn check(client: &kube::Client, cfg: &Config) -> Vec<Line> {
    let wanted: Vec<&Wanted> = WANTED.iter().filter(|w| cfg.enabled(w.collector)).collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    check_kinds(client, &wanted).await
}

/// Reads discovery for the groups of `wanted` (one call for the groups, one per served version
/// of each wanted group) and judges each kind.
pub async fn check_kinds(client: &kube::Client, wanted: &[&Wanted]) -> Vec<Line> {
    let groups = match client.list_api_groups().await {
        Ok(g) => g,
        Err(e) => {
            return vec![Line::fail(
                CATEGORY,
                format!("cannot read API discovery: {}", kube_message(&e)),
                "the identity needs the system:discovery role (every authenticated user has it)",
            )];
        }
    };
    let mut served = Served::new();
    let mut lines = Vec::new();
    for w in wanted {
        if served.contains_key(w.group) {
            continue;
        }
        let Some(group) = groups.groups.iter().find(|g| g.name == w.group) else {
            served.insert(w.group.to_string(), None);
            continue;
        };
        let mut versions = BTreeMap::new();
        for v in &group.versions {
            match client.list_api_group_resources(&v.group_version).await {
                Ok(list) => {
                    versions.insert(
                        v.version.clone(),
                        list.resources.into_iter().map(|r| r.name).collect(),
                    );
                }
                // A version listed but gone by now: as if not served.
                Err(e) if not_found(&e) => {}
                Err(e) => lines.push(Line::warn(
                    CATEGORY,
                    format!("cannot read {}: {}", v.group_version, kube_message(&e)),
                    "an aggregated API or a conversion webhook may be down; retry",
                )),
            }
        }
        served.insert(w.group.to_string(), Some(versions));
    }
    lines.extend(wanted.iter().map(|w| judge(w, &served)));
    lines
}
