//! Whether a kind discovery no longer serves can still have objects.
//!
//! Upstream's garbage collector retries an owner whose kind it cannot map forever: it cannot tell
//! "not discovered yet" from "gone". So when a CRD is deleted before the collector saw one of its
//! custom resources' deletions (the watch ends with the CRD; a busy collector may never have
//! listed the kind at all), the dependents of those custom resources are kept forever, and the
//! stale owners in the graph keep them "solid".
//!
//! Here the API server itself answers. Objects of `group`/`kind` can only exist if something
//! serves the kind: a built-in API group, an aggregated API server, or a CRD. So a kind is
//! **gone** only when, read live (never from our discovery, which may lag):
//! - the group is not built in (core, or an APIService labelled `automanaged=onstart`),
//! - no APIService of the group points at an aggregated server (no `automanaged` label: it may be
//!   down, and its objects come back with it),
//! - and no CustomResourceDefinition, terminating or not, defines `group`/`kind` (a terminating
//!   CRD's custom resources are still being deleted: their deletions are watched as usual).
//!
//! A CRD is deleted only after all its custom resources are, so "no CRD defines it" means none of
//! them exists; one re-created later has new uids, which no old reference names. The question is
//! asked only about a kind discovery served since sweeper started: an owner of a kind never seen
//! served is "unknown" (a typo, a group not installed yet) and kept, as upstream keeps it. Anything else
//! (a read fails, an unknown label value) answers "may exist": the caller keeps retrying, and
//! nothing is deleted on doubt.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};

/// The label kube-aggregator's autoregister controller puts on the APIServices it manages.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing can serve the kind: no object of it exists.
    Gone,
    /// Something may still serve it (the reason, for the log and the retry error).
    MayExist(&'static str),
}

/// One APIService of the group, as far as the verdict needs it.
#[derive(Clone, Debug)]
pub struct ApiServiceFact {
    /// The `automanaged` label: `onstart` (built in), `true` (a CRD group), absent (aggregated).
    pub automanaged: Option<String>,
}

/// The decision, given what the API server said (pure, unit-tested).
pub fn verdict(
    group: &str,
    kind: &str,
    services: &[ApiServiceFact],
    crds: &[(String, String)],
) -> Verdict {
    if group.is_empty() {
        return Verdict::MayExist("the core group is built in");
    }
    for s in services {
        match s.automanaged.as_deref() {
            Some("true") => {}
            Some("onstart") => return Verdict::MayExist("the group is built in"),
            _ => return Verdict::MayExist("an aggregated API server serves the group"),
        }
    }
    if crds.iter().any(|(g, k)| g == group && k == kind) {
        return Verdict::MayExist("a CustomResourceDefinition still defines the kind");
    }
    Verdict::Gone
}

/// Asks the API server (see the module docs). Calls: one metadata list of APIServices, one of
/// CRDs, and one GET per CRD of the group.
pub async fn check(client: &Client, group: &str, kind: &str) -> Result<Verdict, kube::Error> {
    if group.is_empty() {
        return Ok(verdict(group, kind, &[], &[]));
    }
    let suffix = format!(".{group}");
    let ar = ApiResource {
        group: "apiregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiregistration.k8s.io/v1".into(),
        kind: "APIService".into(),
        plural: "apiservices".into(),
    };
    let services: Vec<ApiServiceFact> = Api::<DynamicObject>::all_with(client.clone(), &ar)
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        // APIService names are `<version>.<group>`.
        .filter(|s| {
            s.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.ends_with(&suffix))
        })
        .map(|s| ApiServiceFact {
            automanaged: s
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(AUTOMANAGED).cloned()),
        })
        .collect();
    if let Verdict::MayExist(why) = verdict(group, kind, &services, &[]) {
        return Ok(Verdict::MayExist(why));
    }
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crds = Vec::new();
    // CRD names are `<plural>.<group>`: only the group's own CRDs are read in full.
    for m in crd_api.list_metadata(&ListParams::default()).await?.items {
        let Some(name) = m.metadata.name.filter(|n| n.ends_with(&suffix)) else {
            continue;
        };
        if let Some(crd) = crd_api.get_opt(&name).await? {
            crds.push((crd.spec.group.clone(), crd.spec.names.kind.clone()));
            if let Some(accepted) = crd.status.and_then(|s| s.accepted_names) {
                crds.push((crd.spec.group, accepted.kind));
            }
        }
    }
    Ok(verdict(group, kind, &services, &crds))
}

/// The API group of an `apiVersion` (`""` for the core group's `v1`).
pub fn group_of(api_version: &str) -> &str {
    api_version
        .rsplit_once('/')
        .map(|(g, _)| g)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(label: Option<&str>) -> ApiServiceFact {
        ApiServiceFact {
            automanaged: label.map(str::to_string),
        }
    }

    #[test]
    fn a_kind_no_crd_defines_in_a_crd_group_is_gone() {
        assert_eq!(
            verdict("w.example.com", "Widget", &[svc(Some("true"))], &[]),
            Verdict::Gone
        );
        // The group's last CRD went, and its APIService with it.
        assert_eq!(verdict("w.example.com", "Widget", &[], &[]), Verdict::Gone);
        // Another kind of the group is still defined.
        let other = [("w.example.com".to_string(), "Gadget".to_string())];
        assert_eq!(
            verdict("w.example.com", "Widget", &[svc(Some("true"))], &other),
            Verdict::Gone
        );
    }

    #[test]
    fn a_defined_built_in_or_aggregated_kind_may_exist() {
        let defined = [("w.example.com".to_string(), "Widget".to_string())];
        assert!(matches!(
            verdict("w.example.com", "Widget", &[svc(Some("true"))], &defined),
            Verdict::MayExist(_)
        ));
        assert!(matches!(
            verdict("apps", "Deplyoment", &[svc(Some("onstart"))], &[]),
            Verdict::MayExist(_)
        ));
        assert!(matches!(
            verdict("metrics.k8s.io", "PodMetrics", &[svc(None)], &[]),
            Verdict::MayExist(_)
        ));
        assert!(matches!(
            verdict("w.example.com", "Widget", &[svc(Some("other"))], &[]),
            Verdict::MayExist(_)
        ));
        assert!(matches!(verdict("", "Pod", &[], &[]), Verdict::MayExist(_)));
    }

    #[test]
    fn group_of_api_versions() {
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("cluster.x-k8s.io/v1beta1"), "cluster.x-k8s.io");
    }
}
