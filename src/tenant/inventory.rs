//! Finding what a tenant owns. Two strategies:
//! - `scan`: list every cluster-scoped kind and keep names starting with `<id>-` (KubeZoo's way;
//!   cost grows with the whole cluster).
//! - `label`: list every cluster-scoped kind with the selector `kubezoo.io/tenant=<id>` (the API
//!   server returns only the tenant's objects), plus a prefix scan of the few kinds where
//!   unlabelled tenant objects are expected (`--tenant-scan-kinds`, default: namespaces).
//!
//! Either way the name prefix is the authority: a labelled object whose name lacks `<id>-` is
//! reported, never deleted. A kind that can't be listed (Forbidden, a failing API group) is
//! reported and skipped; the rest is still found.

use super::id::TenantId;
use crate::engine::discovery::DeletableResource;
use futures::StreamExt;
use kube::api::{DynamicObject, ListParams, PartialObjectMeta};
use kube::discovery::ApiResource;
use kube::{Api, Client};

pub const TENANT_LABEL: &str = "kubezoo.io/tenant";

/// Kinds listed at once.
const LIST_CONCURRENCY: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum Strategy {
    /// List every cluster-scoped object and match names (slow, complete for unlabelled objects).
    Scan,
    /// Label-selected lists plus a prefix scan of --tenant-scan-kinds.
    #[default]
    Label,
}

/// One object to delete (or wait for).
#[derive(Clone, Debug)]
pub struct Found {
    pub resource: ApiResource,
    pub name: String,
    pub uid: String,
    pub deleting: bool,
    /// Remaining finalizers, reported when the object is stuck deleting.
    pub finalizers: Vec<String>,
}

impl Found {
    pub fn kind_key(&self) -> String {
        if self.resource.group.is_empty() {
            self.resource.kind.clone()
        } else {
            format!("{}/{}", self.resource.group, self.resource.kind)
        }
    }
}

#[derive(Debug, thiserror::Error, Clone)]
pub enum InventoryError {
    #[error("cannot list {resource}: {message}")]
    List { resource: String, message: String },
}

#[derive(Debug, Default)]
pub struct Inventory {
    /// CustomResourceDefinitions whose spec.group starts with `<id>-`.
    pub crds: Vec<Found>,
    /// Every other cluster-scoped object named `<id>-...` (namespaces included).
    pub objects: Vec<Found>,
    /// Objects listed to find them (the cost the strategies differ in).
    pub listed: u64,
    pub errors: Vec<InventoryError>,
}

impl Inventory {
    pub fn is_empty(&self) -> bool {
        self.crds.is_empty() && self.objects.is_empty()
    }
}

/// Resources the tenant teardown looks at: cluster-scoped kinds, minus the Tenant kind itself,
/// the CRD kind (handled by group), and kinds served by the tenant's own CRDs (removed with them).
pub fn candidate_kinds<'a>(
    resources: &'a [DeletableResource],
    id: &TenantId,
) -> Vec<&'a DeletableResource> {
    resources
        .iter()
        .filter(|r| !r.namespaced)
        .filter(|r| !(r.resource.group == "tenant.kubezoo.io" && r.resource.kind == "Tenant"))
        .filter(|r| {
            !(r.resource.group == "apiextensions.k8s.io"
                && r.resource.kind == "CustomResourceDefinition")
        })
        .filter(|r| !id.owns(&r.resource.group))
        .collect()
}

async fn list_names(
    client: &Client,
    ar: &ApiResource,
    selector: Option<&str>,
) -> Result<(Vec<PartialObjectMeta<DynamicObject>>, u64), InventoryError> {
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), ar);
    let mut lp = ListParams::default().limit(500);
    if let Some(s) = selector {
        // Label-selected lists are served from the API server's watch cache (resourceVersion=0):
        // it filters in memory instead of reading every object of the kind from etcd. A slightly
        // stale answer is safe here: a pass only deletes what it found (uid preconditions), and
        // the teardown ends only when every object found was confirmed gone.
        lp = ListParams::default().labels(s).match_any();
    }
    let mut out = Vec::new();
    let mut listed = 0u64;
    loop {
        let page = api.list(&lp).await.map_err(|e| InventoryError::List {
            resource: format!("{}/{}", ar.group, ar.plural)
                .trim_start_matches('/')
                .to_string(),
            message: e.to_string(),
        })?;
        listed += page.items.len() as u64;
        out.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp.continue_token = Some(c),
            None => break,
        }
    }
    Ok((out, listed))
}

fn found(ar: &ApiResource, m: &PartialObjectMeta<DynamicObject>) -> Found {
    Found {
        resource: ar.clone(),
        name: m.metadata.name.clone().unwrap_or_default(),
        uid: m.metadata.uid.clone().unwrap_or_default(),
        deleting: m.metadata.deletion_timestamp.is_some(),
        finalizers: m.metadata.finalizers.clone().unwrap_or_default(),
    }
}

/// Finds the tenant's CRDs and cluster-scoped objects.
pub async fn find(
    client: &Client,
    id: &TenantId,
    resources: &[DeletableResource],
    strategy: Strategy,
    scan_kinds: &[String],
) -> Inventory {
    let mut inv = Inventory::default();
    // CRDs: always a full list (their names don't carry the prefix; their group does). Cheap:
    // CRDs number in the hundreds at most.
    let crd_ar = ApiResource::erase::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(&());
    match list_crds(client, id).await {
        Ok((crds, listed)) => {
            inv.listed += listed;
            inv.crds = crds
                .into_iter()
                .map(|(name, uid, deleting, finalizers)| Found {
                    resource: crd_ar.clone(),
                    name,
                    uid,
                    deleting,
                    finalizers,
                })
                .collect();
        }
        Err(e) => inv.errors.push(e),
    }
    let selector = format!("{TENANT_LABEL}={id}");
    // Kinds are listed concurrently (bounded); owned inputs, so the futures borrow nothing.
    let kinds: Vec<DeletableResource> = candidate_kinds(resources, id)
        .into_iter()
        .cloned()
        .collect();
    let lists: Vec<(DeletableResource, bool, Result<_, InventoryError>)> =
        futures::stream::iter(kinds)
            .map(|r: DeletableResource| {
                let scan = strategy == Strategy::Scan || scan_kinds.contains(&r.resource.plural);
                let (client, selector) = (client.clone(), selector.clone());
                async move {
                    let result =
                        list_names(&client, &r.resource, (!scan).then_some(selector.as_str()))
                            .await;
                    (r, scan, result)
                }
            })
            .buffer_unordered(LIST_CONCURRENCY)
            .collect()
            .await;
    for (r, scan, result) in lists {
        match result {
            Ok((items, listed)) => {
                inv.listed += listed;
                for m in &items {
                    let name = m.metadata.name.as_deref().unwrap_or("");
                    if id.owns(name) {
                        inv.objects.push(found(&r.resource, m));
                    } else if !scan {
                        tracing::warn!(resource = %r.gvk_string(), name, tenant = %id, "labelled for the tenant but not named <id>-...: not deleted");
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, tenant = %id, "skipping a kind that cannot be listed");
                inv.errors.push(e);
            }
        }
    }
    inv
}

type CrdRow = (String, String, bool, Vec<String>);

/// The tenant's CRDs. Metadata only: a CRD's name is `<plural>.<group>`, so the group is read
/// from the name without transferring the (large) schemas.
async fn list_crds(client: &Client, id: &TenantId) -> Result<(Vec<CrdRow>, u64), InventoryError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<PartialObjectMeta<CustomResourceDefinition>> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| InventoryError::List {
            resource: "apiextensions.k8s.io/customresourcedefinitions".into(),
            message: e.to_string(),
        })?;
    let listed = list.items.len() as u64;
    let rows = list
        .items
        .into_iter()
        .filter(|c| {
            c.metadata
                .name
                .as_deref()
                .and_then(|n| n.split_once('.'))
                .is_some_and(|(_, group)| id.owns(group))
        })
        .map(|c| {
            (
                c.metadata.name.unwrap_or_default(),
                c.metadata.uid.unwrap_or_default(),
                c.metadata.deletion_timestamp.is_some(),
                c.metadata.finalizers.unwrap_or_default(),
            )
        })
        .collect();
    Ok((rows, listed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::discovery::ApiResource;

    fn res(group: &str, kind: &str, namespaced: bool) -> DeletableResource {
        DeletableResource {
            resource: ApiResource {
                group: group.into(),
                version: "v1".into(),
                api_version: if group.is_empty() {
                    "v1".into()
                } else {
                    format!("{group}/v1")
                },
                kind: kind.into(),
                plural: format!("{}s", kind.to_lowercase()),
            },
            namespaced,
        }
    }

    #[test]
    fn candidates_are_cluster_scoped_and_exclude_tenants_crds_and_tenant_kinds() {
        let id = TenantId::parse("abc123", None).unwrap();
        let all = vec![
            res("", "Namespace", false),
            res("", "ConfigMap", true),
            res("rbac.authorization.k8s.io", "ClusterRole", false),
            res("tenant.kubezoo.io", "Tenant", false),
            res("apiextensions.k8s.io", "CustomResourceDefinition", false),
            res("abc123-example.com", "Thing", false),
            res("abc123x-example.com", "Other", false),
        ];
        let kinds: Vec<&str> = candidate_kinds(&all, &id)
            .iter()
            .map(|r| r.resource.kind.as_str())
            .collect();
        assert_eq!(kinds, vec!["Namespace", "ClusterRole", "Other"]);
    }
}
