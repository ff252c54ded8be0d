//! Reading Cluster API's Cluster at the version the server serves, and resolving its references.
//!
//! Cluster API stores Cluster as v1beta2, whose refs are `{apiGroup, kind, name}`; v1beta1 (refs
//! `{apiVersion, kind, name, namespace}`) is still served but deprecated, and without Cluster
//! API's conversion webhook a v1beta2 object read at v1beta1 keeps its v1beta2 refs. So: read
//! v1beta2 when served (v1beta1 otherwise), accept both ref shapes, and find the referenced
//! kind's version and plural by discovery rather than trusting (or guessing) them.

mod cached;

pub use cached::Capi;

use crate::api::capa::ObjectRef;
use kube::api::{ApiResource, DynamicObject};
use kube::discovery::{self, ApiGroup};
use kube::{Api, Client};

pub const GROUP: &str = "cluster.x-k8s.io";
/// The Cluster versions sweeper reads, most preferred first.
pub const CLUSTER_VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];

#[derive(Debug, thiserror::Error)]
pub enum CapiError {
    #[error("cannot discover API group {group}: {source}")]
    Discovery {
        group: String,
        #[source]
        source: kube::Error,
    },
    #[error("the server serves no {kind} in API group {group:?}{}", at.as_deref().map(|v| format!(" (ref asks for {v})")).unwrap_or_default())]
    NotServed {
        group: String,
        kind: String,
        at: Option<String>,
    },
    #[error(
        "a reference to {kind} {name:?} names neither apiGroup nor apiVersion, and {kind} is not a CAPA kind sweeper knows"
    )]
    NoGroup { kind: String, name: String },
    #[error("cannot read Cluster {namespace}/{name}: {source}")]
    Read {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("Cluster {namespace}/{name}: {field} is not a reference: {source}")]
    BadRef {
        namespace: String,
        name: String,
        field: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

/// A Cluster's two references, as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterRefs {
    /// The version the Cluster was read at.
    pub version: String,
    pub infrastructure_ref: Option<ObjectRef>,
    pub control_plane_ref: Option<ObjectRef>,
    /// `spec.paused`: Cluster API's providers do nothing for the cluster while it is set.
    pub paused: bool,
}

/// The group and (when the ref names one) version a ref points at: `apiVersion` wins, else
/// `apiGroup` with the version left to discovery. The core group is "".
pub fn ref_group_version(r: &ObjectRef) -> Option<(String, Option<String>)> {
    match (r.api_version.as_deref(), r.api_group.as_deref()) {
        (Some(av), _) if !av.is_empty() => Some(match av.split_once('/') {
            Some((g, v)) => (g.to_string(), Some(v.to_string())),
            None => (String::new(), Some(av.to_string())),
        }),
        (_, Some(g)) => Some((g.to_string(), None)),
        _ => None,
    }
}

/// The group of the CAPA kinds sweeper resolves refs to, for a ref that names none: a Cluster
/// written at v1beta1 against Cluster API's CRD without its conversion webhook is stored with
/// `{kind, name}` refs only (see [`read_cluster`]). Kind names are unique across CAPA's groups.
pub fn known_group(kind: &str) -> Option<&'static str> {
    match kind {
        "AWSCluster" | "AWSManagedCluster" => Some("infrastructure.cluster.x-k8s.io"),
        "AWSManagedControlPlane" => Some("controlplane.cluster.x-k8s.io"),
        _ => None,
    }
}

/// Group discovery; `Ok(None)` when the server does not serve the group at all.
async fn group(client: &Client, name: &str) -> Result<Option<ApiGroup>, CapiError> {
    match discovery::group(client, name).await {
        Ok(g) => Ok(Some(g)),
        Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup(_))) => Ok(None),
        Err(source) => Err(CapiError::Discovery {
            group: name.to_string(),
            source,
        }),
    }
}

/// `kind` in `group`: at `version` when it is served there, else at the group's preferred
/// version, else at any version serving it (server order).
fn kind_in(group: &ApiGroup, kind: &str, version: Option<&str>) -> Option<ApiResource> {
    let find = |v: &str| {
        group
            .versioned_resources(v)
            .into_iter()
            .map(|(ar, _)| ar)
            .find(|ar| ar.kind == kind)
    };
    version
        .and_then(find)
        .or_else(|| group.preferred_version().and_then(find))
        .or_else(|| group.versions().find_map(find))
}

/// The Cluster resources the server serves, most preferred first (v1beta2, then v1beta1); empty
/// when Cluster API is not installed.
pub async fn cluster_resources(client: &Client) -> Result<Vec<ApiResource>, CapiError> {
    let Some(g) = group(client, GROUP).await? else {
        return Ok(Vec::new());
    };
    Ok(CLUSTER_VERSIONS
        .iter()
        .filter_map(|v| {
            g.versioned_resources(v)
                .into_iter()
                .map(|(ar, _)| ar)
                .find(|ar| ar.kind == "Cluster")
        })
        .collect())
}

/// Reads the Cluster `namespace/name` at v1beta2 when served, else v1beta1; `Ok(None)` when it
/// does not exist (or Cluster API is not installed).
///
/// Without Cluster API's conversion webhook the server only relabels versions, and it prunes the
/// fields a version's schema lacks (at write for the storage version, at read for the read one):
/// a Cluster written at v1beta2 reads at v1beta1 without its refs' apiGroup (issue 10 failure #5),
/// and one written at v1beta1 is stored with refs that lost their apiVersion. A ref left with no
/// group is read again at the other served version (a CRD that keeps unknown fields, like
/// sweeper's own, still has it there); [`resolve_ref`] then falls back to the kind.
#[tracing::instrument(skip(client))]
pub async fn read_cluster(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<ClusterRefs>, CapiError> {
    read_over(client, &cluster_resources(client).await?, namespace, name).await
}

/// [`read_cluster`] over the Cluster `resources` discovery found.
async fn read_over(
    client: &Client,
    resources: &[ApiResource],
    namespace: &str,
    name: &str,
) -> Result<Option<ClusterRefs>, CapiError> {
    let mut found: Option<ClusterRefs> = None;
    for ar in resources {
        let Some(refs) = read_at(client, ar, namespace, name).await? else {
            // Gone (or not visible at this version): nothing more to learn.
            return Ok(found);
        };
        let Some(first) = found.as_mut() else {
            found = Some(refs);
            if found.as_ref().is_some_and(ClusterRefs::complete) {
                break;
            }
            continue;
        };
        for (mine, other) in [
            (&mut first.infrastructure_ref, refs.infrastructure_ref),
            (&mut first.control_plane_ref, refs.control_plane_ref),
        ] {
            let lacks_group = mine
                .as_ref()
                .is_some_and(|r| ref_group_version(r).is_none());
            if lacks_group
                && other
                    .as_ref()
                    .is_some_and(|r| ref_group_version(r).is_some())
            {
                *mine = other;
            }
        }
        break;
    }
    Ok(found)
}

impl ClusterRefs {
    /// Every ref present names its group.
    fn complete(&self) -> bool {
        [&self.infrastructure_ref, &self.control_plane_ref]
            .into_iter()
            .flatten()
            .all(|r| ref_group_version(r).is_some())
    }
}

async fn read_at(
    client: &Client,
    ar: &ApiResource,
    namespace: &str,
    name: &str,
) -> Result<Option<ClusterRefs>, CapiError> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, ar);
    let obj = api.get_opt(name).await.map_err(|source| CapiError::Read {
        namespace: namespace.into(),
        name: name.into(),
        source,
    })?;
    let Some(obj) = obj else { return Ok(None) };
    let field = |field: &'static str| -> Result<Option<ObjectRef>, CapiError> {
        let v = &obj.data["spec"][field];
        if v.is_null() {
            return Ok(None);
        }
        serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|source| CapiError::BadRef {
                namespace: namespace.into(),
                name: name.into(),
                field,
                source,
            })
    };
    Ok(Some(ClusterRefs {
        paused: is_paused(&obj.data),
        version: ar.version.clone(),
        infrastructure_ref: field("infrastructureRef")?,
        control_plane_ref: field("controlPlaneRef")?,
    }))
}

/// A Cluster's `spec.paused` (v1beta1 and v1beta2 alike), from its JSON.
pub fn is_paused(cluster: &serde_json::Value) -> bool {
    cluster["spec"]["paused"].as_bool() == Some(true)
}

/// The resource a ref points at, its version and plural found by discovery (the ref's own
/// version when the server serves it, else the group's preferred one).
pub async fn resolve_ref(client: &Client, r: &ObjectRef) -> Result<ApiResource, CapiError> {
    discover_ref(client, &ref_key(r)?).await
}

/// What a ref asks for: its group (named, else the CAPA kind's own), kind, and version if named.
type RefKey = (String, String, Option<String>);

fn ref_key(r: &ObjectRef) -> Result<RefKey, CapiError> {
    let kind = r.kind.clone().unwrap_or_default();
    let Some((group_name, version)) =
        ref_group_version(r).or_else(|| known_group(&kind).map(|g| (g.to_string(), None)))
    else {
        return Err(CapiError::NoGroup {
            kind,
            name: r.name.clone().unwrap_or_default(),
        });
    };
    Ok((group_name, kind, version))
}

async fn discover_ref(client: &Client, key: &RefKey) -> Result<ApiResource, CapiError> {
    let (group_name, kind, version) = key;
    let not_served = || CapiError::NotServed {
        group: group_name.clone(),
        kind: kind.clone(),
        at: version.clone(),
    };
    let g = group(client, group_name).await?.ok_or_else(not_served)?;
    kind_in(&g, kind, version.as_deref()).ok_or_else(not_served)
}

/// Unit tests' MockApi answers for Cluster API's discovery, shared by the Capi cache's tests and
/// the external collector's admission tests.
#[cfg(test)]
pub(crate) mod mocked {
    use crate::testing::MockApi;
    use http::Method;
    use serde_json::{Value, json};

    /// `/apis` and each version's resource list, Cluster API serving `versions` (the first
    /// preferred), its one kind `Cluster`; each answered once, or any number of times
    /// (`repeatedly`).
    pub(crate) fn discovery(server: &MockApi, versions: &[&str], repeatedly: bool) {
        let gv = |v: &str| json!({"groupVersion": format!("cluster.x-k8s.io/{v}"), "version": v});
        let all: Vec<Value> = versions.iter().map(|v| gv(v)).collect();
        let expect = |path: &str| {
            let e = server.expect(Method::GET, path);
            if repeatedly { e.repeatedly() } else { e }
        };
        expect("/apis").respond(
            200,
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": "cluster.x-k8s.io", "versions": all, "preferredVersion": gv(versions[0])}]}),
        );
        for v in versions {
            expect(&format!("/apis/cluster.x-k8s.io/{v}")).respond(
                200,
                json!({"kind": "APIResourceList", "apiVersion": "v1",
                       "groupVersion": format!("cluster.x-k8s.io/{v}"),
                       "resources": [{"name": "clusters", "singularName": "cluster",
                                      "namespaced": true, "kind": "Cluster",
                                      "verbs": ["get", "list", "watch"]}]}),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_of_both_shapes_give_group_and_version() {
        let v1beta1: ObjectRef = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster",
            "name": "c", "namespace": "ns"}))
        .unwrap();
        assert_eq!(
            ref_group_version(&v1beta1),
            Some((
                "infrastructure.cluster.x-k8s.io".into(),
                Some("v1beta2".into())
            ))
        );
        let v1beta2: ObjectRef = serde_json::from_value(serde_json::json!({
            "apiGroup": "controlplane.cluster.x-k8s.io", "kind": "AWSManagedControlPlane", "name": "c"}))
        .unwrap();
        assert_eq!(
            ref_group_version(&v1beta2),
            Some(("controlplane.cluster.x-k8s.io".into(), None))
        );
        // What failure #5 read: neither field. No group means no guess (it built /api//...).
        let neither = ObjectRef {
            kind: Some("AWSCluster".into()),
            name: Some("c".into()),
            ..Default::default()
        };
        assert_eq!(ref_group_version(&neither), None);
        assert_eq!(
            known_group("AWSCluster"),
            Some("infrastructure.cluster.x-k8s.io")
        );
        assert_eq!(
            known_group("AWSManagedControlPlane"),
            Some("controlplane.cluster.x-k8s.io")
        );
        assert_eq!(known_group("KubeadmControlPlane"), None);
        let core = ObjectRef {
            api_version: Some("v1".into()),
            ..Default::default()
        };
        assert_eq!(
            ref_group_version(&core),
            Some((String::new(), Some("v1".into())))
        );
    }
}
