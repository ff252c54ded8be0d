//! Finding what a tenant owns. The name prefix `<id>-` is the authority (KubeZoo labels only the
//! namespaces it creates, not its ClusterRoles and binding), so every strategy finds every
//! listable cluster-scoped `<id>-` object:
//! - `index` (default): answered from the engine's name-ordered index of cluster-scoped objects
//!   (engine::name_index, kept by metadata watches), with no list call. A kind the index cannot
//!   answer (not listed yet, watch failing) and the kinds in `--tenant-scan-kinds` are listed
//!   and prefix-scanned instead. Before a teardown may end, [`confirm`] proves that nothing the
//!   tenant had when the teardown began is left: from the index for the kinds whose watch has
//!   reached the teardown's starting revision, by a full list for the others. No label is needed
//!   (KubeZoo sets none); `label`, the name of the old default, is accepted as an alias.
//! - `scan`: list every cluster-scoped kind and keep names starting with `<id>-` (KubeZoo's way;
//!   cost grows with the whole cluster).
//!
//! Only names decide: an object whose name lacks `<id>-` is never the tenant's, whatever its
//! labels. A kind that can't be listed (Forbidden, a failing API group) is reported and skipped; the rest is still found.

mod first_lists;

use super::id::TenantId;
use crate::config::TenantGcStrategy;
use crate::engine::discovery::DeletableResource;
use crate::engine::name_index::{IndexedObject, NameIndex, NotIndexed};
use futures::StreamExt;
use kube::api::{DynamicObject, ListParams, PartialObjectMeta};
use kube::discovery::ApiResource;
use kube::{Api, Client};
use std::time::Duration;

/// Kinds listed at once.
const LIST_CONCURRENCY: usize = 8;

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
pub struct TenantInventory {
    /// CustomResourceDefinitions whose spec.group starts with `<id>-`.
    pub crds: Vec<Found>,
    /// Every other cluster-scoped object named `<id>-...` (namespaces included).
    pub objects: Vec<Found>,
    /// Objects listed to find them (the cost the strategies differ in).
    pub listed: u64,
    pub errors: Vec<InventoryError>,
}

impl TenantInventory {
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
        .filter(|r| !is_crd_kind(r))
        .filter(|r| !id.owns(&r.resource.group))
        .collect()
}

/// Every object of `ar`, metadata only, in pages, read from etcd (no resourceVersion: a quorum
/// read, never the watch cache, so it is not older than the index it stands in for).
async fn list_names(
    client: &Client,
    ar: &ApiResource,
) -> Result<(Vec<PartialObjectMeta<DynamicObject>>, u64), InventoryError> {
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), ar);
    let mut lp = ListParams::default().limit(500);
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
    strategy: TenantGcStrategy,
    scan_kinds: &[String],
    index: &NameIndex,
) -> TenantInventory {
    if strategy == TenantGcStrategy::Index {
        first_lists::wait(index, resources, id, scan_kinds).await;
    }
    gather(client, id, resources, |r, prefix| {
        (strategy == TenantGcStrategy::Index && !scan_kinds.contains(&r.resource.plural))
            .then(|| index.with_prefix(r, prefix))
    })
    .await
}

/// How long [`confirm`] waits for the index to show this pass's deletes before it lists the
/// kinds concerned instead (the watch normally delivers them within milliseconds).
const CONFIRM_WAIT: Duration = Duration::from_secs(2);

/// The last word before a teardown may end (`index` strategy): everything the tenant had when
/// the teardown began is gone. `since` is the revision the teardown began at (the deleting
/// Tenant's own, [`super::pass::teardown_revision`], or etcd's read with quorum); a kind whose
/// watch has delivered that revision or a later one holds every object the kind had then, so the
/// index answers for it ([`NameIndex::fresh_prefix`]). Every other kind is listed in full from
/// etcd and prefix-scanned, as `scan` does. The kinds a teardown deleted from have delivered those
/// deletes; an idle kind is current as of the index's epoch (engine::name_index), which after a
/// restart is newer than the teardown's start: then nothing is listed at all.
///
/// What it vouches for is what `scan` vouches for: every `<id>-` object that existed when the
/// teardown began (and every one created since that the watch delivered) has been seen. An
/// object created in the last milliseconds before the release escapes both, as it does
/// KubeZoo's own scan. `gone` are the objects this pass deleted outright: the index is waited
/// for until it no longer holds them, so they are not reported as left.
///
/// Tried and dropped: (1) a label-selected quorum list of every kind (the label as an
/// accelerator): on a 1.20 API server it reads every object of the kind from etcd to filter them,
/// so it cost as much as a scan (0.30 s against 0.22 s for 10,180 objects) and did not see
/// unlabelled objects anyway; (2) lists with `resourceVersion=R, resourceVersionMatch=NotOlderThan`
/// (served from the watch cache): on 1.20 an idle kind's watch cache never reaches R (no
/// progress notifications), so each such list waited 3 s and failed.
pub async fn confirm(
    client: &Client,
    id: &TenantId,
    resources: &[DeletableResource],
    scan_kinds: &[String],
    index: &NameIndex,
    since: Option<u64>,
    gone: &[Found],
) -> TenantInventory {
    let Some(since) = since else {
        // No revision to be fresh against: every kind is listed.
        return gather(client, id, resources, |_, _| None).await;
    };
    wait_for_index(index, since, gone).await;
    gather(client, id, resources, |r, prefix| {
        (!scan_kinds.contains(&r.resource.plural)).then(|| index.fresh_prefix(r, prefix, since))
    })
    .await
}

/// Until the index has delivered `since` in every kind of `gone` and holds none of `gone` any
/// more (or holds it as deleting), or [`CONFIRM_WAIT`] has passed.
async fn wait_for_index(index: &NameIndex, since: u64, gone: &[Found]) {
    let deadline = tokio::time::Instant::now() + CONFIRM_WAIT;
    let kind = |f: &Found| DeletableResource {
        resource: f.resource.clone(),
        namespaced: false,
    };
    loop {
        let caught_up = gone.iter().all(|f| {
            let r = kind(f);
            index.is_fresh(&r, since)
                && index
                    .get(&r, &f.name)
                    .is_none_or(|e| e.uid != f.uid || e.deleting)
        });
        if caught_up || tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// An inventory built from what `ask` answers per kind (with `""` as the prefix for the CRD kind,
/// whose names carry the tenant in their group); whatever it does not answer is listed.
async fn gather(
    client: &Client,
    id: &TenantId,
    resources: &[DeletableResource],
    ask: impl Fn(&DeletableResource, &str) -> Option<Result<Vec<(String, IndexedObject)>, NotIndexed>>,
) -> TenantInventory {
    let mut inv = TenantInventory::default();
    let crd_kind = resources.iter().find(|r| is_crd_kind(r));
    // CRDs: their names don't carry the prefix, their group does (`<plural>.<group>`).
    let crds = match crd_kind.and_then(|r| ask(r, "")) {
        Some(Ok(all)) => Ok((
            all.into_iter()
                .map(|(name, e)| (name, e.uid, e.deleting, e.finalizers))
                .collect(),
            0,
        )),
        Some(Err(why)) => {
            tracing::debug!(%why, "CRDs not answered by the index; listing them");
            list_crds(client).await
        }
        None => list_crds(client).await,
    };
    match crds {
        Ok((rows, listed)) => {
            inv.listed += listed;
            let crd_ar = ApiResource::erase::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(&());
            inv.crds = rows
                .into_iter()
                .filter(|(name, ..)| crd_group_owned(id, name))
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
    // What the index answers costs no call; the rest is listed, concurrently (bounded).
    let mut to_list: Vec<DeletableResource> = Vec::new();
    for r in candidate_kinds(resources, id) {
        match ask(r, &id.prefix()) {
            Some(Ok(entries)) => inv
                .objects
                .extend(entries.into_iter().map(|(name, e)| Found {
                    resource: r.resource.clone(),
                    name,
                    uid: e.uid,
                    deleting: e.deleting,
                    finalizers: e.finalizers,
                })),
            Some(Err(why)) => {
                tracing::debug!(%why, "not answered by the index; listing it");
                to_list.push(r.clone());
            }
            None => to_list.push(r.clone()),
        }
    }
    let lists = list_all(client, to_list).await;
    collect(&mut inv, id, lists);
    inv
}

type Listed = (
    DeletableResource,
    Result<(Vec<PartialObjectMeta<DynamicObject>>, u64), InventoryError>,
);

/// Lists `kinds` concurrently (bounded); owned inputs, so the futures borrow nothing.
async fn list_all(client: &Client, kinds: Vec<DeletableResource>) -> Vec<Listed> {
    futures::stream::iter(kinds)
        .map(|r: DeletableResource| {
            let client = client.clone();
            async move {
                let result = list_names(&client, &r.resource).await;
                (r, result)
            }
        })
        .buffer_unordered(LIST_CONCURRENCY)
        .collect()
        .await
}

/// Keeps the tenant's objects of what was listed; reports what could not be.
fn collect(inv: &mut TenantInventory, id: &TenantId, lists: Vec<Listed>) {
    for (r, result) in lists {
        match result {
            Ok((items, listed)) => {
                inv.listed += listed;
                inv.objects.extend(
                    items
                        .iter()
                        .filter(|m| id.owns(m.metadata.name.as_deref().unwrap_or("")))
                        .map(|m| found(&r.resource, m)),
                );
            }
            Err(e) => {
                tracing::warn!(error = %e, tenant = %id, "skipping a kind that cannot be listed");
                inv.errors.push(e);
            }
        }
    }
}

fn is_crd_kind(r: &DeletableResource) -> bool {
    r.resource.group == "apiextensions.k8s.io" && r.resource.kind == "CustomResourceDefinition"
}

/// A CRD named `<plural>.<group>` belongs to the tenant when its group is `<id>-…`.
fn crd_group_owned(id: &TenantId, crd_name: &str) -> bool {
    crd_name
        .split_once('.')
        .is_some_and(|(_, group)| id.owns(group))
}

type CrdRow = (String, String, bool, Vec<String>);

/// Every CRD, metadata only: the group is read from the name, without transferring the (large)
/// schemas.
async fn list_crds(client: &Client) -> Result<(Vec<CrdRow>, u64), InventoryError> {
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
