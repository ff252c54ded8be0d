//! A copy of what a worker needs about one object, taken under the graph's read lock so no API
//! call is ever made while holding it.

use super::absent_owners::AbsentOwners;
use super::classify::{ObjectState, OwnerStatus};
use crate::engine::graph::Graph;
use crate::engine::graph::kinds::ResolvedKind;
use crate::engine::graph::node::{CLUSTER, Node, OwnerLink};
use crate::engine::graph::uid::Uid;
use k8s_openapi::api::core::v1::ObjectReference;
use serde_json::json;

pub struct Dependent {
    pub uid: Uid,
    pub blocks: bool,
    pub deleting_dependents: bool,
}

pub struct Snapshot {
    pub uid: Uid,
    pub uid_text: String,
    pub name: String,
    pub namespace: Option<String>,
    pub api_version: String,
    pub kind: String,
    /// `group/version/kind` for metrics and logs.
    pub gvk: String,
    pub resolved: Option<ResolvedKind>,
    pub node: Node,
    pub owners: Vec<(OwnerLink, OwnerStatus)>,
    /// Owner references whose namespace does not match (reported by Event).
    pub invalid_namespace: Vec<String>,
    pub dependents: Vec<Dependent>,
    /// Owner references rendered in full, in order, for rewriting.
    pub owner_refs: Vec<serde_json::Value>,
}

impl Snapshot {
    pub fn take(g: &Graph, absent: &AbsentOwners, uid: &Uid) -> Option<Snapshot> {
        let node = g.get(uid)?;
        let info = g.kinds.info(node.kind);
        let resolved = g.kinds.resolve(node.kind).cloned();
        let dependent_is_namespaced = node.namespace != CLUSTER;
        let mut invalid_namespace = Vec::new();
        let owners = node
            .owners
            .iter()
            .map(|link| {
                let status = owner_status(g, absent, node, link, dependent_is_namespaced);
                if status == OwnerStatus::InvalidNamespace {
                    invalid_namespace.push(link.name.to_string());
                }
                (link.clone(), status)
            })
            .collect();
        let dependents = g
            .dependents(node)
            .map(|d| Dependent {
                uid: d.uid,
                blocks: d.owners.iter().any(|l| l.uid == node.uid && l.blocks()),
                deleting_dependents: d.deleting_dependents(),
            })
            .collect();
        let owner_refs = node.owners.iter().map(|l| owner_ref_json(g, l)).collect();
        Some(Snapshot {
            uid: *uid,
            uid_text: g.uid_text(uid),
            name: node.name.to_string(),
            namespace: g.namespace(node.namespace).map(str::to_string),
            api_version: info.api_version.clone(),
            kind: info.kind.clone(),
            gvk: format!(
                "{}/{}/{}",
                info.group,
                info.api_version.rsplit('/').next().unwrap_or(""),
                info.kind
            ),
            resolved,
            node: node.clone(),
            owners,
            invalid_namespace,
            dependents,
            owner_refs,
        })
    }

    pub fn subject(&self) -> ObjectState {
        ObjectState {
            has_orphan_finalizer: self.node.has(crate::engine::graph::node::flag::ORPHAN),
            has_foreground_finalizer: self.node.has(crate::engine::graph::node::flag::FOREGROUND),
            has_dependents: !self.dependents.is_empty(),
            dependent_deleting_dependents: self.dependents.iter().any(|d| d.deleting_dependents),
        }
    }

    /// `Kind ns/name` (or `Kind name`), for errors.
    pub fn label(&self) -> String {
        crate::engine::meta::object_label(&self.kind, self.namespace.as_deref(), &self.name)
    }

    pub fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version.clone()),
            kind: Some(self.kind.clone()),
            name: Some(self.name.clone()),
            namespace: self.namespace.clone(),
            uid: Some(self.uid_text.clone()),
            ..Default::default()
        }
    }
}

/// An owner link rendered as a full `metadata.ownerReferences` entry, for rewriting the list.
pub fn owner_ref_json(g: &Graph, l: &OwnerLink) -> serde_json::Value {
    let k = g.kinds.info(l.kind);
    json!({
        "apiVersion": k.api_version,
        "kind": k.kind,
        "name": &*l.name,
        "uid": g.uid_text(&l.uid),
        "controller": l.controller(),
        "blockOwnerDeletion": l.blocks(),
    })
}

fn owner_status(
    g: &Graph,
    absent: &AbsentOwners,
    dependent: &Node,
    link: &OwnerLink,
    dependent_is_namespaced: bool,
) -> OwnerStatus {
    let resolved = g.kinds.resolve(link.kind);
    if !dependent_is_namespaced && resolved.is_some_and(|r| r.namespaced) {
        return OwnerStatus::ClusterScopedWithNamespacedOwner;
    }
    // The graph first: a uid observed again (a force-deleted CRD re-created over objects still in
    // etcd) is there, whatever the absent cache remembers of its deletion.
    let node = g.get(&link.uid);
    if node.is_some_and(Node::known_absent)
        || (!node.is_some_and(Node::observed) && absent.contains(&link.uid))
    {
        return OwnerStatus::Dangling;
    }
    match node {
        Some(owner) if owner.observed() => {
            if !g.kinds.same_group_kind(owner.kind, link.kind) || *owner.name != *link.name {
                // Same uid, different identity: the reference does not describe this object.
                return OwnerStatus::Dangling;
            }
            if dependent_is_namespaced
                && owner.namespace != CLUSTER
                && owner.namespace != dependent.namespace
            {
                return OwnerStatus::InvalidNamespace;
            }
            if owner.deleting_dependents() {
                OwnerStatus::Waiting
            } else if owner.completing_cascade() {
                OwnerStatus::Dangling
            } else {
                OwnerStatus::Solid
            }
        }
        _ => match resolved {
            None => OwnerStatus::UnknownKind,
            Some(_) => OwnerStatus::Pending,
        },
    }
}
