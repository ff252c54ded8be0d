//! A KubeZoo tenant (`111111`, KubeZoo's own example id) with what KubeZoo creates for it: a
//! tenant CRD with custom resources, ClusterRoles and namespaces named `<id>-…` and labelled
//! `kubezoo.io/tenant=<id>`, ConfigMaps inside the namespaces. Tenant `111112` shares the first
//! five characters of the id and must survive. The ids are numbers because KubeZoo's Tenant CRD
//! (installed as it is) makes `spec.id` an int32, and it must equal the object's name.

use crate::kube_util::{self, DEMO_LABEL, Res, is_not_found, labels};
use crate::step::{Item, Observation, StepState};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client, ResourceExt};
use std::collections::BTreeSet;
use std::time::Duration;
use sweeper::api::tenant::{Tenant, TenantSpec};

pub const ID: &str = "111111";
pub const SIBLING: &str = "111112";
const TENANT_LABEL: &str = "kubezoo.io/tenant";
const FINALIZER: &str = "kubezoo.io/tenant";
const NAMESPACES: [&str; 3] = ["web", "api", "db"];
const CONFIGMAPS_PER_NAMESPACE: usize = 4;
const ROLES: [&str; 5] = ["reader", "editor", "admin", "metrics-viewer", "deployer"];
const WIDGETS: usize = 2;

/// How much of the world a tenant gets (the sibling gets one of each).
struct Shape {
    namespaces: &'static [&'static str],
    roles: &'static [&'static str],
}

const FULL: Shape = Shape {
    namespaces: &NAMESPACES,
    roles: &ROLES,
};
const SMALL: Shape = Shape {
    namespaces: &["web"],
    roles: &["reader"],
};

fn group(id: &str) -> String {
    format!("{id}-shop.example.com")
}

fn crd_name(id: &str) -> String {
    format!("widgets.{}", group(id))
}

fn widgets(id: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group(id), "v1", "Widget"),
        "widgets",
    )
}

fn tenant_labels(id: &str) -> Option<std::collections::BTreeMap<String, String>> {
    labels(&[(TENANT_LABEL, id), (DEMO_LABEL, "tenant")])
}

/// Creates both tenants and their objects; returns how many objects.
pub async fn create(c: &Client) -> Res<usize> {
    let a = create_tenant(c, ID, &FULL).await?;
    let b = create_tenant(c, SIBLING, &SMALL).await?;
    Ok(a + b)
}

async fn create_tenant(c: &Client, id: &str, shape: &Shape) -> Res<usize> {
    let mut n = 1;
    let tenant = Tenant::new(
        id,
        TenantSpec {
            id: Some(sweeper::api::tenant::SpecId::Int(
                id.parse()
                    .map_err(|_| format!("tenant id {id} is not a number"))?,
            )),
            quota: Some(serde_json::json!({})),
        },
    );
    kube_util::create(&Api::<Tenant>::all(c.clone()), &tenant).await?;
    n += create_crd_with_widgets(c, id).await?;
    let roles: Api<ClusterRole> = Api::all(c.clone());
    for r in shape.roles {
        let mut role = ClusterRole {
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec![group(id)]),
                resources: Some(vec!["widgets".into()]),
                verbs: vec!["get".into(), "list".into()],
                ..Default::default()
            }]),
            ..Default::default()
        };
        role.metadata.name = Some(format!("{id}-{r}"));
        role.metadata.labels = tenant_labels(id);
        kube_util::create(&roles, &role).await?;
        n += 1;
    }
    for ns in shape.namespaces {
        let name = format!("{id}-{ns}");
        kube_util::create_namespace(c, &name, &[(TENANT_LABEL, id), (DEMO_LABEL, "tenant")])
            .await?;
        let cms: Api<ConfigMap> = Api::namespaced(c.clone(), &name);
        for i in 0..CONFIGMAPS_PER_NAMESPACE {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(format!("{ns}-config-{i}"));
            cm.metadata.labels = tenant_labels(id);
            kube_util::create(&cms, &cm).await?;
        }
        n += 1 + CONFIGMAPS_PER_NAMESPACE;
    }
    Ok(n)
}

async fn create_crd_with_widgets(c: &Client, id: &str) -> Res<usize> {
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "metadata": {"name": crd_name(id), "labels": {TENANT_LABEL: id, DEMO_LABEL: "tenant"}},
        "spec": {"group": group(id), "scope": "Cluster",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))?;
    kube_util::create(&crds, &crd).await?;
    let name = crd_name(id);
    let established = kube::runtime::wait::await_condition(
        crds,
        &name,
        kube::runtime::wait::conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(30), established)
        .await
        .map_err(|_| format!("CRD {} not established in 30s", crd_name(id)))??;
    let ar = widgets(id);
    let api: Api<DynamicObject> = Api::all_with(c.clone(), &ar);
    for i in 0..WIDGETS {
        let obj = DynamicObject::new(&format!("widget-{i}"), &ar);
        // A freshly established resource can take a moment to be served.
        let created = kube_util::eventually(Duration::from_secs(30), || async {
            match api.create(&Default::default(), &obj).await {
                Ok(_) => true,
                Err(kube::Error::Api(s)) if s.code == 409 => true,
                Err(_) => false,
            }
        })
        .await;
        if !created {
            return Err(format!("custom resource {} not created", crd_name(id)).into());
        }
    }
    Ok(1 + WIDGETS)
}

/// True once sweeper put its finalizer on both tenants (so it is watching them).
pub async fn finalized(c: &Client) -> bool {
    let api: Api<Tenant> = Api::all(c.clone());
    let mut all = true;
    for id in [ID, SIBLING] {
        all &= api
            .get_opt(id)
            .await
            .ok()
            .flatten()
            .is_some_and(|t| t.finalizers().iter().any(|f| f == FINALIZER));
    }
    all
}

pub fn step() -> StepState {
    let mut items = vec![
        Item::new("Tenant", ID),
        Item::new("CustomResourceDefinition", crd_name(ID)),
    ];
    for i in 0..WIDGETS {
        items.push(Item::new("Widget", format!("widget-{i}")));
    }
    for r in ROLES {
        items.push(Item::new("ClusterRole", format!("{ID}-{r}")));
    }
    for ns in NAMESPACES {
        items.push(Item::new("Namespace", format!("{ID}-{ns}")));
    }
    for ns in NAMESPACES {
        for i in 0..CONFIGMAPS_PER_NAMESPACE {
            items.push(Item::new("ConfigMap", format!("{ID}-{ns}/{ns}-config-{i}")));
        }
    }
    StepState::new(format!("tenant {ID}"), items, Some(format!("Tenant/{ID}")))
}

pub async fn delete(c: &Client) -> Res<()> {
    Api::<Tenant>::all(c.clone())
        .delete(ID, &Default::default())
        .await
        .map_err(|e| format!("delete Tenant {ID}: {e}"))?;
    Ok(())
}

/// The names of what exists now, as item keys.
async fn present(c: &Client, id: &str) -> Res<(BTreeSet<String>, Option<Tenant>)> {
    let mut keys = BTreeSet::new();
    let tenant = Api::<Tenant>::all(c.clone()).get_opt(id).await?;
    if tenant.is_some() {
        keys.insert(format!("Tenant/{id}"));
    }
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    if crds.get_metadata_opt(&crd_name(id)).await?.is_some() {
        keys.insert(format!("CustomResourceDefinition/{}", crd_name(id)));
    }
    // With the CRD gone the resource is not served any more: nothing left of it.
    match Api::<DynamicObject>::all_with(c.clone(), &widgets(id))
        .list_metadata(&ListParams::default())
        .await
    {
        Ok(l) => keys.extend(l.items.iter().map(|w| format!("Widget/{}", w.name_any()))),
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    let selector = ListParams::default().labels(&format!("{TENANT_LABEL}={id}"));
    let roles = Api::<ClusterRole>::all(c.clone())
        .list_metadata(&selector)
        .await?;
    keys.extend(
        roles
            .items
            .iter()
            .map(|r| format!("ClusterRole/{}", r.name_any())),
    );
    let nss = Api::<Namespace>::all(c.clone())
        .list_metadata(&selector)
        .await?;
    keys.extend(
        nss.items
            .iter()
            .map(|n| format!("Namespace/{}", n.name_any())),
    );
    for ns in &nss.items {
        let cms = Api::<ConfigMap>::namespaced(c.clone(), &ns.name_any())
            .list_metadata(&selector)
            .await?;
        keys.extend(
            cms.items
                .iter()
                .map(|m| format!("ConfigMap/{}/{}", ns.name_any(), m.name_any())),
        );
    }
    Ok((keys, tenant))
}

pub async fn observe(c: &Client, keys: &[String]) -> Res<Observation> {
    let (present, tenant) = present(c, ID).await?;
    let done = keys
        .iter()
        .filter(|k| !present.contains(*k))
        .cloned()
        .collect();
    let hint = match tenant {
        None => "Tenant gone".to_string(),
        Some(t) => match t.status.as_ref().and_then(|s| s.phase.clone()) {
            Some(p) => format!("Tenant status: {p}"),
            None if t.metadata.deletion_timestamp.is_some() => "Tenant deleting".into(),
            None => "Tenant live".into(),
        },
    };
    Ok(Observation { done, hint })
}

/// The sibling tenant and everything it has.
pub async fn survivors(c: &Client) -> Res<Vec<(String, bool)>> {
    let (present, tenant) = present(c, SIBLING).await?;
    let expected = 1
        + 1
        + WIDGETS
        + SMALL.roles.len()
        + SMALL.namespaces.len() * (1 + CONFIGMAPS_PER_NAMESPACE);
    let live = tenant.is_some_and(|t| t.metadata.deletion_timestamp.is_none());
    Ok(vec![(
        format!(
            "tenant {SIBLING} (id shares \"11111\"): Tenant, CRD, {WIDGETS} Widgets, ClusterRole, Namespace, {CONFIGMAPS_PER_NAMESPACE} ConfigMaps: {}/{expected} present",
            present.len()
        ),
        live && present.len() == expected,
    )])
}

/// Removes both tenants and everything they had (leftovers of an earlier run).
pub async fn clean(c: &Client) -> Res<()> {
    for id in [ID, SIBLING] {
        kube_util::delete_and_release(&Api::<Tenant>::all(c.clone()), id).await?;
        kube_util::delete(
            &Api::<CustomResourceDefinition>::all(c.clone()),
            &crd_name(id),
        )
        .await?;
        for r in ROLES {
            kube_util::delete(&Api::<ClusterRole>::all(c.clone()), &format!("{id}-{r}")).await?;
        }
        for ns in NAMESPACES {
            kube_util::delete(&Api::<Namespace>::all(c.clone()), &format!("{id}-{ns}")).await?;
        }
    }
    Ok(())
}

/// Names of the namespaces `clean` removes (to wait for them).
pub fn namespaces() -> Vec<String> {
    [ID, SIBLING]
        .iter()
        .flat_map(|id| NAMESPACES.iter().map(move |ns| format!("{id}-{ns}")))
        .collect()
}
