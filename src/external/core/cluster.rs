//! Which workload cluster an object belongs to, and the names its AWS resources are tagged with.
//!
//! CAPA uses two names for one cluster (pkg/cloud/scope): `Name()`, the owning Cluster API
//! Cluster's name, in the tags of everything CAPA itself creates
//! (`sigs.k8s.io/cluster-api-provider-aws/cluster/<name>`: network, bastion, its groups); and
//! `KubernetesClusterName()`, which the cloud provider (and CAPA's gc after it) puts in
//! `kubernetes.io/cluster/<name>`. For an AWSCluster both are the owning Cluster's name; for an
//! AWSManagedControlPlane the second is `spec.eksClusterName`, or where it is empty the name
//! CAPA's defaulting webhook derives (`<namespace>_<name>`, hashed from 100 bytes on:
//! [`crate::api::capa::default_eks_name`]).
//!
//! **Whose cluster.** The name decides what is deleted, with the controller's credentials, in a
//! management cluster many teams share, so it comes only from what CAPA itself trusts: the owner
//! reference to a `cluster.x-k8s.io` Cluster (CAPA's `util.GetOwnerCluster`; CAPA does nothing for
//! an object without one). The label `cluster.x-k8s.io/cluster-name`, which anyone who may edit
//! the object can set, is never the source: where present it must agree. Before anything is
//! deleted the owner is proven ([`Owning::proof`]): that Cluster, read in the object's namespace,
//! names this object in `spec.infrastructureRef` (AWSCluster) or `spec.controlPlaneRef`
//! (AWSManagedControlPlane). Cluster API's Cluster controller deletes the infrastructure and
//! control plane objects first and keeps the Cluster (its own finalizer) until they are gone, so a
//! legitimate teardown always finds it; `clusterctl move` marks what it deletes
//! (contract.rs), which releases before any proof is asked.

use crate::api::capa::{AWSCluster, AWSManagedControlPlane, ObjectRef};
use crate::external::core::annotations::{
    CAPA_TASKS_ANNOTATION, GC_ANNOTATION, SWEEPER_TASKS_ANNOTATION,
};
use crate::external::core::capi::{self, Capi, CapiError};
use crate::external::core::contract::ClusterState;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use std::collections::BTreeMap;

pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum ClusterNameError {
    #[error(
        "{kind} {namespace}/{name}: no owning Cluster (no owner reference to a cluster.x-k8s.io Cluster; the label {CLUSTER_NAME_LABEL} alone is not proof of a cluster's name)"
    )]
    NoOwner {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error(
        "{kind} {namespace}/{name}: owner references name more than one cluster.x-k8s.io Cluster ({names}); which cluster it is cannot be told"
    )]
    SeveralOwners {
        kind: &'static str,
        namespace: String,
        name: String,
        names: String,
    },
    #[error(
        "{kind} {namespace}/{name}: label {CLUSTER_NAME_LABEL}={label:?} disagrees with its owner Cluster {owner:?}; fix or remove the label"
    )]
    LabelDisagrees {
        kind: &'static str,
        namespace: String,
        name: String,
        label: String,
        owner: String,
    },
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

/// The two names of one cluster's AWS resources (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNames {
    /// The Cluster API Cluster's name: CAPA's own tags (phases 1 and 3).
    pub capi: String,
    /// The name in `kubernetes.io/cluster/<name>` and the cluster's controllers' tags (phase 2):
    /// the EKS cluster name on EKS, else the same as `capi`.
    pub tag: String,
}

impl ClusterNames {
    /// How the names read in messages: one name, or both on EKS.
    pub fn describe(&self) -> String {
        if self.capi == self.tag {
            self.tag.clone()
        } else {
            format!("{} (EKS name {})", self.capi, self.tag)
        }
    }
}

/// The owning Cluster's name, validated: the one Cluster the owner references name, which the
/// label, where present, must agree with.
fn capi_name<K: ResourceExt>(o: &K, kind: &'static str) -> Result<String, ClusterNameError> {
    let namespace = o.namespace().unwrap_or_default();
    let name = o.name_any();
    let owners = owner_clusters(o);
    let owner = match owners.as_slice() {
        [] => {
            return Err(ClusterNameError::NoOwner {
                kind,
                namespace,
                name,
            });
        }
        [one] => one.clone(),
        several => {
            return Err(ClusterNameError::SeveralOwners {
                kind,
                namespace,
                name,
                names: several.join(", "),
            });
        }
    };
    if let Some(label) = o.labels().get(CLUSTER_NAME_LABEL)
        && *label != owner
    {
        return Err(ClusterNameError::LabelDisagrees {
            kind,
            namespace,
            name,
            label: label.clone(),
            owner,
        });
    }
    validate(&owner)
}

pub fn for_aws_cluster(c: &AWSCluster) -> Result<ClusterNames, ClusterNameError> {
    let capi = capi_name(c, "AWSCluster")?;
    Ok(ClusterNames {
        tag: capi.clone(),
        capi,
    })
}

/// An EKS control plane's names. Without an owning Cluster sweeper cannot tell which network
/// CAPA made for it, so that is bad input as for an AWSCluster (CAPA itself does nothing for a
/// control plane whose Cluster has not claimed it).
pub fn for_control_plane(c: &AWSManagedControlPlane) -> Result<ClusterNames, ClusterNameError> {
    // An empty name reads as CAPA's default, derived as its defaulting webhook derives it: the
    // name CAPA gives the object on its next update through the webhook (CAPA's controller has no
    // other name to make an EKS cluster with). Another object claiming that name holds both
    // (the collision rule), as for a name the spec states.
    let tag = validate(&c.eks_name())?;
    Ok(ClusterNames {
        capi: capi_name(c, "AWSManagedControlPlane")?,
        tag,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Capi(#[from] CapiError),
    #[error("Cluster {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error(
        "Cluster {namespace}/{name} references neither an AWSManagedControlPlane nor an AWSCluster"
    )]
    NoAwsRef { namespace: String, name: String },
    #[error("cannot read {kind} {namespace}/{name}: {source}")]
    Read {
        kind: String,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot annotate {kind} {namespace}/{name}: {source}")]
    Patch {
        kind: String,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The ref of `kind` among `refs`, with a non-empty name.
fn pick<'a>(refs: &[&'a Option<ObjectRef>], kind: &str) -> Option<(&'a ObjectRef, String)> {
    refs.iter().find_map(|r| {
        let r = r.as_ref()?;
        let name = r.name.as_deref().filter(|n| !n.is_empty())?;
        (r.kind.as_deref() == Some(kind)).then(|| (r, name.to_string()))
    })
}

/// The object that carries a cluster's GC annotations, as CAPA reads them: the
/// AWSManagedControlPlane when the control plane is EKS, else the AWSCluster. (clusterawsadm
/// annotates the infrastructure ref, on EKS the AWSManagedCluster; the collector honours that
/// one too, see [`managed_cluster_annotations`], but CAPA's own gc reads only the control plane,
/// so that is where sweeper writes.)
pub async fn gc_target(
    client: &Client,
    namespace: &str,
    cluster: &str,
) -> Result<(ApiResource, String), ResolveError> {
    let refs = capi::read_cluster(client, namespace, cluster)
        .await?
        .ok_or_else(|| ResolveError::NotFound {
            namespace: namespace.into(),
            name: cluster.into(),
        })?;
    let (target, name) = pick(&[&refs.control_plane_ref], "AWSManagedControlPlane")
        .or_else(|| pick(&[&refs.infrastructure_ref], "AWSCluster"))
        .ok_or_else(|| ResolveError::NoAwsRef {
            namespace: namespace.into(),
            name: cluster.into(),
        })?;
    let ar = capi::resolve_ref(client, target).await?;
    Ok((ar, name))
}

/// The distinct names of the cluster.x-k8s.io Clusters among `o`'s owner references, in order.
pub(crate) fn owner_clusters<K: ResourceExt>(o: &K) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in o.owner_references() {
        if r.kind == "Cluster"
            && r.api_version.starts_with("cluster.x-k8s.io/")
            && !names.contains(&r.name)
        {
            names.push(r.name.clone());
        }
    }
    names
}

/// The CAPI Cluster an object belongs to: its owner reference to a cluster.x-k8s.io Cluster (the
/// first, when several; [`ClusterNames`] refuses several). Never the label: see the module doc.
pub fn owning_cluster<K: ResourceExt>(o: &K) -> Option<String> {
    owner_clusters(o).into_iter().next()
}

/// Whether the Cluster's refs name the object `kind`/`name` as CAPA's kind for it: the
/// infrastructure ref for an AWSCluster, the control plane ref for an AWSManagedControlPlane. A
/// ref that names a group must name the kind's own. Pure.
pub fn references(refs: &capi::ClusterRefs, kind: &str, name: &str) -> bool {
    let r = match kind {
        "AWSCluster" => refs.infrastructure_ref.as_ref(),
        "AWSManagedControlPlane" => refs.control_plane_ref.as_ref(),
        _ => None,
    };
    r.is_some_and(|r| {
        r.kind.as_deref() == Some(kind)
            && r.name.as_deref() == Some(name)
            && capi::ref_group_version(r)
                .is_none_or(|(group, _)| Some(group.as_str()) == capi::known_group(kind))
    })
}

/// What one Cluster reference names, for messages.
fn shown(r: Option<&ObjectRef>) -> String {
    r.map_or("nothing".into(), |r| {
        format!(
            "{} {}",
            r.kind.as_deref().unwrap_or("?"),
            r.name.as_deref().unwrap_or("?")
        )
    })
}

/// Why an object's owner Cluster does not prove whose cluster it is ([`Owning::proof`]); the
/// text goes on the object's condition.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OwnerNotProven {
    #[error(
        "no owner reference to a cluster.x-k8s.io Cluster (a {CLUSTER_NAME_LABEL} label alone proves nothing)"
    )]
    NoOwner,
    #[error(
        "its owner Cluster {namespace}/{cluster} does not reference it ({field} names {names})"
    )]
    NotReferenced {
        namespace: String,
        cluster: String,
        field: &'static str,
        names: String,
    },
    #[error(
        "its owner Cluster {namespace}/{cluster} does not exist (Cluster API keeps the Cluster until its infrastructure is gone; without it nothing proves whose resources these are)"
    )]
    Missing { namespace: String, cluster: String },
    /// The read's error as text: a kube error is neither `Clone` nor `PartialEq`, and the proof
    /// is kept with the admitted object.
    #[error("its owner Cluster {namespace}/{cluster} cannot be read: {error}")]
    Unreadable {
        namespace: String,
        cluster: String,
        error: String,
    },
}

/// An object's owning Cluster, read once for one reconcile: Cluster API's contract and, on EKS,
/// the AWSManagedCluster's opt-out are both answered from this one read.
pub enum Owning {
    /// The object names no owning Cluster.
    NoOwner,
    /// Cluster `namespace/name` and what reading it found (`Ok(None)`: not found, or Cluster API
    /// not installed).
    Read {
        namespace: String,
        name: String,
        /// Boxed: a kube error is large, and most objects read one.
        read: Box<Result<Option<capi::ClusterRefs>, CapiError>>,
    },
}

impl Owning {
    /// Reads `o`'s owning Cluster (no call when it names none).
    pub async fn read<K: ResourceExt>(capi: &Capi, o: &K) -> Owning {
        let Some(name) = owning_cluster(o) else {
            return Owning::NoOwner;
        };
        let namespace = o.namespace().unwrap_or_default();
        let read = Box::new(capi.read_cluster(&namespace, &name).await);
        Owning::Read {
            namespace,
            name,
            read,
        }
    }

    /// Whether the owner is proven for the object `kind`/`name` (see the module doc): `Err` says
    /// why not, for the object's condition.
    pub fn proof(&self, kind: &str, name: &str) -> Result<(), OwnerNotProven> {
        let Owning::Read {
            namespace,
            name: cluster,
            read,
        } = self
        else {
            return Err(OwnerNotProven::NoOwner);
        };
        let at = |namespace: &str, cluster: &str| (namespace.to_string(), cluster.to_string());
        match read.as_ref() {
            Ok(Some(refs)) if references(refs, kind, name) => Ok(()),
            Ok(Some(refs)) => {
                let (field, named) = if kind == "AWSManagedControlPlane" {
                    ("spec.controlPlaneRef", refs.control_plane_ref.as_ref())
                } else {
                    ("spec.infrastructureRef", refs.infrastructure_ref.as_ref())
                };
                let (namespace, cluster) = at(namespace, cluster);
                Err(OwnerNotProven::NotReferenced {
                    namespace,
                    cluster,
                    field,
                    names: shown(named),
                })
            }
            Ok(None) => {
                let (namespace, cluster) = at(namespace, cluster);
                Err(OwnerNotProven::Missing { namespace, cluster })
            }
            Err(e) => {
                let (namespace, cluster) = at(namespace, cluster);
                Err(OwnerNotProven::Unreadable {
                    namespace,
                    cluster,
                    error: e.to_string(),
                })
            }
        }
    }

    /// The owning Cluster as Cluster API's contract needs it (see contract.rs): paused or not,
    /// gone, or unreadable. Not-found is `Gone`; any other failure is `Unreadable`, and the caller
    /// fails closed.
    pub fn state(&self) -> ClusterState {
        let Owning::Read {
            namespace,
            name,
            read,
        } = self
        else {
            return ClusterState::NoOwner;
        };
        let name = format!("{namespace}/{name}");
        match read.as_ref() {
            Ok(Some(refs)) if refs.paused => ClusterState::Paused { name },
            Ok(Some(_)) => ClusterState::Running { name },
            Ok(None) => ClusterState::Gone { name },
            Err(e) => ClusterState::Unreadable {
                name,
                error: e.to_string(),
            },
        }
    }
}

/// Another object's label and annotations.
pub type LinkedAnnotations = (String, BTreeMap<String, String>);

/// The AWSManagedCluster a control plane's owning Cluster references as its infrastructure, and
/// its annotations: where `clusterawsadm gc disable` puts the opt-out on EKS. `Ok(None)` when there
/// is none (no owning Cluster, Cluster gone, infrastructure not an AWSManagedCluster, kind not
/// served, object gone). Any other failure is an error: the caller must not delete without
/// knowing whether the user opted out. `owning`: the owning Cluster if this reconcile already
/// read it (`None`: read it now).
pub async fn managed_cluster_annotations(
    capi: &Capi,
    cp: &AWSManagedControlPlane,
    owning: Option<Owning>,
) -> Result<Option<LinkedAnnotations>, ResolveError> {
    let owning = match owning {
        Some(o) => o,
        None => Owning::read(capi, cp).await,
    };
    match owning {
        Owning::NoOwner => Ok(None),
        Owning::Read {
            namespace, read, ..
        } => match (*read)? {
            Some(refs) => managed_cluster_in(capi, &namespace, &refs).await,
            None => Ok(None),
        },
    }
}

/// The AWSManagedCluster the Cluster `namespace/cluster` references as its infrastructure, with
/// its label and annotations (see [`managed_cluster_annotations`]).
pub async fn managed_cluster_of(
    client: &Client,
    namespace: &str,
    cluster: &str,
) -> Result<Option<LinkedAnnotations>, ResolveError> {
    let capi = Capi::new(client.clone());
    let Some(refs) = capi.read_cluster(namespace, cluster).await? else {
        return Ok(None);
    };
    managed_cluster_in(&capi, namespace, &refs).await
}

/// The AWSManagedCluster the Cluster's `refs` name as its infrastructure (see
/// [`managed_cluster_annotations`]). A NotFound through a kind resolved earlier is checked
/// against fresh discovery before it counts as no AWSManagedCluster.
async fn managed_cluster_in(
    capi: &Capi,
    namespace: &str,
    refs: &capi::ClusterRefs,
) -> Result<Option<LinkedAnnotations>, ResolveError> {
    let Some((r, name)) = pick(&[&refs.infrastructure_ref], "AWSManagedCluster") else {
        return Ok(None);
    };
    let (mut ar, kept) = match capi.resolve_ref(r).await {
        Ok(found) => found,
        Err(CapiError::NotServed { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut obj = get_managed(capi, namespace, &ar, &name).await?;
    if obj.is_none() && kept {
        match capi.re_resolve(r, &ar).await {
            Ok(Some(fresh)) => {
                ar = fresh;
                obj = get_managed(capi, namespace, &ar, &name).await?;
            }
            Ok(None) | Err(CapiError::NotServed { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(obj.map(|o| {
        (
            format!("{} {namespace}/{name}", ar.kind),
            o.metadata.annotations.unwrap_or_default(),
        )
    }))
}

async fn get_managed(
    capi: &Capi,
    namespace: &str,
    ar: &ApiResource,
    name: &str,
) -> Result<Option<DynamicObject>, ResolveError> {
    let api: Api<DynamicObject> = Api::namespaced_with(capi.client().clone(), namespace, ar);
    api.get_opt(name)
        .await
        .map_err(|source| ResolveError::Read {
            kind: ar.kind.clone(),
            namespace: namespace.into(),
            name: name.into(),
            source,
        })
}

/// Sets (Some) or removes (None) annotations on the cluster's GC target. Returns the target
/// (`Kind namespace/name`) and, on EKS, a note for the user: where sweeper wrote, and what the
/// AWSManagedCluster (where clusterawsadm writes) says too, since that also counts.
pub async fn annotate(
    client: &Client,
    namespace: &str,
    cluster: &str,
    values: &[(&str, Option<String>)],
) -> Result<(String, Option<String>), ResolveError> {
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
    let target = format!("{} {namespace}/{name}", ar.kind);
    if ar.kind != "AWSManagedControlPlane" {
        return Ok((target, None));
    }
    let mut note = String::from(
        "EKS: written on the AWSManagedControlPlane, where CAPA's gc reads it. clusterawsadm writes \
         the AWSManagedCluster instead; sweeper honours both (\"false\" on either opts out, tasks \
         set on both objects are intersected).",
    );
    match managed_cluster_of(client, namespace, cluster).await {
        Ok(Some((label, ann))) => {
            let set: Vec<String> = [
                GC_ANNOTATION,
                SWEEPER_TASKS_ANNOTATION,
                CAPA_TASKS_ANNOTATION,
            ]
            .iter()
            .filter_map(|k| ann.get(*k).map(|v| format!("{k}={v}")))
            .collect();
            if !set.is_empty() {
                note.push_str(&format!(" {label} also has {}.", set.join(", ")));
            }
        }
        Ok(None) => {}
        Err(e) => note.push_str(&format!(" (could not read the AWSManagedCluster: {e})")),
    }
    Ok((target, Some(note)))
}

#[cfg(test)]
mod tests;
