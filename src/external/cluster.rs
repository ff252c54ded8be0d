//! Which workload cluster an object belongs to, and the name its AWS resources are tagged with.
//! AWSCluster: the owning CAPI Cluster's name (label `cluster.x-k8s.io/cluster-name`, else the
//! owner reference to a `Cluster`). AWSManagedControlPlane: `spec.eksClusterName`.

use crate::api::capa::{AWSCluster, AWSManagedControlPlane, Cluster, ObjectRef};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};

pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum ClusterNameError {
    #[error(
        "{kind} {namespace}/{name}: no owning Cluster (neither label {CLUSTER_NAME_LABEL} nor an owner reference to a cluster.x-k8s.io Cluster)"
    )]
    NoOwner {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("AWSManagedControlPlane {namespace}/{name}: spec.eksClusterName is not set")]
    NoEksName { namespace: String, name: String },
    #[error(
        "cluster name {0:?} is not usable in an AWS tag key (1-253 characters, no '/', ',', '=' or whitespace)"
    )]
    Invalid(String),
}

fn validate(name: &str) -> Result<String, ClusterNameError> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && !name
            .chars()
            .any(|c| c == '/' || c == ',' || c == '=' || c.is_whitespace());
    if ok {
        Ok(name.to_string())
    } else {
        Err(ClusterNameError::Invalid(name.to_string()))
    }
}

pub fn for_aws_cluster(c: &AWSCluster) -> Result<String, ClusterNameError> {
    if let Some(n) = c.labels().get(CLUSTER_NAME_LABEL) {
        return validate(n);
    }
    let owner = c
        .owner_references()
        .iter()
        .find(|o| o.kind == "Cluster" && o.api_version.starts_with("cluster.x-k8s.io/"));
    match owner {
        Some(o) => validate(&o.name),
        None => Err(ClusterNameError::NoOwner {
            kind: "AWSCluster",
            namespace: c.namespace().unwrap_or_default(),
            name: c.name_any(),
        }),
    }
}

pub fn for_control_plane(c: &AWSManagedControlPlane) -> Result<String, ClusterNameError> {
    match c.spec.eks_cluster_name.as_deref() {
        Some(n) => validate(n),
        None => Err(ClusterNameError::NoEksName {
            namespace: c.namespace().unwrap_or_default(),
            name: c.name_any(),
        }),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("cannot read Cluster {namespace}/{name}: {source}")]
    Read {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "Cluster {namespace}/{name} references neither an AWSManagedControlPlane nor an AWSCluster"
    )]
    NoAwsRef { namespace: String, name: String },
    #[error("cannot annotate {kind} {namespace}/{name}: {source}")]
    Patch {
        kind: String,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The object that carries a cluster's GC annotations, as clusterawsadm decides it: the
/// AWSManagedControlPlane when the control plane is EKS, else the AWSCluster.
pub async fn gc_target(
    client: &Client,
    namespace: &str,
    cluster: &str,
) -> Result<(ApiResource, String), ResolveError> {
    let api: Api<Cluster> = Api::namespaced(client.clone(), namespace);
    let c = api
        .get(cluster)
        .await
        .map_err(|source| ResolveError::Read {
            namespace: namespace.into(),
            name: cluster.into(),
            source,
        })?;
    let pick = |r: &Option<ObjectRef>, kind: &str| {
        r.as_ref()
            .filter(|r| r.kind.as_deref() == Some(kind))
            .cloned()
    };
    let target = pick(&c.spec.control_plane_ref, "AWSManagedControlPlane")
        .or_else(|| pick(&c.spec.infrastructure_ref, "AWSCluster"))
        .ok_or_else(|| ResolveError::NoAwsRef {
            namespace: namespace.into(),
            name: cluster.into(),
        })?;
    let api_version = target.api_version.unwrap_or_default();
    let kind = target.kind.unwrap_or_default();
    let (group, version) = api_version
        .split_once('/')
        .unwrap_or(("", api_version.as_str()));
    let plural = format!("{}s", kind.to_lowercase());
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, &kind), &plural);
    let name = target
        .name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ResolveError::NoAwsRef {
            namespace: namespace.into(),
            name: cluster.into(),
        })?;
    Ok((ar, name))
}

/// Sets (Some) or removes (None) annotations on the cluster's GC target.
pub async fn annotate(
    client: &Client,
    namespace: &str,
    cluster: &str,
    values: &[(&str, Option<String>)],
) -> Result<String, ResolveError> {
    let (ar, name) = gc_target(client, namespace, cluster).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    let annotations: serde_json::Map<String, serde_json::Value> = values
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                v.clone().map(Into::into).unwrap_or(serde_json::Value::Null),
            )
        })
        .collect();
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| ResolveError::Patch {
            kind: ar.kind.clone(),
            namespace: namespace.into(),
            name: name.clone(),
            source,
        })?;
    Ok(format!("{} {namespace}/{name}", ar.kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn label_wins_then_owner_reference() {
        let mut c = AWSCluster::new("infra", Default::default());
        c.metadata.namespace = Some("ns".into());
        assert!(matches!(
            for_aws_cluster(&c),
            Err(ClusterNameError::NoOwner { .. })
        ));
        c.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "cluster.x-k8s.io/v1beta1".into(),
            kind: "Cluster".into(),
            name: "c1".into(),
            uid: "u".into(),
            ..Default::default()
        }]);
        assert_eq!(for_aws_cluster(&c).unwrap(), "c1");
        c.metadata.labels = Some([(CLUSTER_NAME_LABEL.to_string(), "c2".to_string())].into());
        assert_eq!(for_aws_cluster(&c).unwrap(), "c2");
    }

    #[test]
    fn eks_name_comes_from_the_spec_and_is_validated() {
        let mut cp = AWSManagedControlPlane::new("cp", Default::default());
        assert!(matches!(
            for_control_plane(&cp),
            Err(ClusterNameError::NoEksName { .. })
        ));
        cp.spec.eks_cluster_name = Some("eks-1".into());
        assert_eq!(for_control_plane(&cp).unwrap(), "eks-1");
        cp.spec.eks_cluster_name = Some("a/b".into());
        assert!(matches!(
            for_control_plane(&cp),
            Err(ClusterNameError::Invalid(_))
        ));
        cp.spec.eks_cluster_name = Some(String::new());
        assert!(matches!(
            for_control_plane(&cp),
            Err(ClusterNameError::Invalid(_))
        ));
    }
}
