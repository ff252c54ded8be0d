//! Tenant fixtures shared by the tenant collector's tests: ids, Tenant objects, cluster-scoped
//! objects with or without the tenant label, and a restricted identity.

use super::TestScope;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::PostParams;
use kube::{Api, Client, ResourceExt};
use std::collections::BTreeMap;
use std::time::Duration;
use sweeper::api::tenant::{Tenant, TenantStatus};

/// A random 6-digit tenant id and a sibling sharing its first five digits. Numeric, as KubeZoo's
/// are: its Tenant CRD (which the test environment installs as it is) makes `spec.id` an int32,
/// and the id must equal the object's name.
pub fn ids() -> (String, String) {
    let base = 10_000 + rand::random::<u32>() % 89_999;
    (format!("{base}1"), format!("{base}2"))
}

/// Tenant `id`, in `scope` (labelled for it, so only that test's sweeper sees it).
pub async fn tenant(scope: &TestScope, id: &str) -> Tenant {
    let api: Api<Tenant> = Api::all(scope.client.clone());
    let mut t = Tenant::new(
        id,
        sweeper::api::tenant::TenantSpec {
            // KubeZoo's CRD requires both: an int32 id (equal to the numeric name) and a quota.
            id: Some(sweeper::api::tenant::SpecId::Int(
                id.parse().expect("tenant ids are numeric (ids())"),
            )),
            quota: Some(serde_json::json!({})),
        },
    );
    t.metadata.labels = Some(scope.tenant_labels());
    api.create(&PostParams::default(), &t)
        .await
        .expect("create tenant")
}

pub fn labels(id: Option<&str>) -> Option<BTreeMap<String, String>> {
    id.map(|i| BTreeMap::from([("kubezoo.io/tenant".to_string(), i.to_string())]))
}

pub async fn cluster_role(c: &Client, name: &str, label: Option<&str>) {
    let mut r = ClusterRole::default();
    r.metadata.name = Some(name.into());
    r.metadata.labels = labels(label);
    Api::<ClusterRole>::all(c.clone())
        .create(&PostParams::default(), &r)
        .await
        .expect("create clusterrole");
}

pub async fn priority_class(c: &Client, name: &str, label: Option<&str>) {
    let mut p = PriorityClass {
        value: 10,
        ..Default::default()
    };
    p.metadata.name = Some(name.into());
    p.metadata.labels = labels(label);
    Api::<PriorityClass>::all(c.clone())
        .create(&PostParams::default(), &p)
        .await
        .expect("create priorityclass");
}

pub async fn exists<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.expect("get").is_some()
}

pub async fn has_finalizer(c: &Client, id: &str) -> bool {
    Api::<Tenant>::all(c.clone())
        .get_opt(id)
        .await
        .unwrap()
        .is_some_and(|t| t.finalizers().contains(&"kubezoo.io/tenant".to_string()))
}

/// Deletes the Tenant object (the collector's finalizer then holds it until the teardown is done).
pub async fn delete_tenant(c: &Client, id: &str) {
    Api::<Tenant>::all(c.clone())
        .delete(id, &Default::default())
        .await
        .unwrap();
}

/// The tenant's status, if it exists and has one.
pub async fn tenant_status(c: &Client, id: &str) -> Option<TenantStatus> {
    Api::<Tenant>::all(c.clone())
        .get_opt(id)
        .await
        .unwrap()
        .and_then(|t| t.status)
}

/// Grants `user` everything except reading the resource `withheld` (a plural, if any): no `list`
/// and no `watch`. Both, because a watch alone reads a kind whole: the index's streaming list
/// (engine::name_index) needs only `watch`, and a kind it can read is not one it cannot check.
pub async fn restricted_role(c: &Client, user: &str, withheld: Option<&str>) {
    use k8s_openapi::api::rbac::v1::{PolicyRule, Subject};
    let report = sweeper::engine::discovery::discover_deletable(c)
        .await
        .unwrap();
    let mut rules = vec![PolicyRule {
        api_groups: Some(vec!["*".into()]),
        resources: Some(vec!["*".into()]),
        verbs: vec!["get", "create", "update", "patch", "delete"]
            .into_iter()
            .map(String::from)
            .collect(),
        ..Default::default()
    }];
    for r in report.resources {
        if Some(r.resource.plural.as_str()) == withheld {
            continue;
        }
        rules.push(PolicyRule {
            api_groups: Some(vec![r.resource.group.clone()]),
            resources: Some(vec![r.resource.plural.clone()]),
            verbs: vec!["list".into(), "watch".into()],
            ..Default::default()
        });
    }
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{user}-role")),
            ..Default::default()
        },
        rules: Some(rules),
        ..Default::default()
    };
    let roles: Api<ClusterRole> = Api::all(c.clone());
    let _ = roles
        .delete(&format!("{user}-role"), &Default::default())
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("create restricted role");
    let binding = k8s_openapi::api::rbac::v1::ClusterRoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{user}-binding")),
            ..Default::default()
        },
        role_ref: k8s_openapi::api::rbac::v1::RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: format!("{user}-role"),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: user.into(),
            ..Default::default()
        }]),
    };
    let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(c.clone())
        .create(&PostParams::default(), &binding)
        .await;
}

/// A kubeconfig that impersonates `user` (the admin may impersonate anyone).
pub fn impersonating_kubeconfig(user: &str) -> String {
    let facts = super::EnvFacts::load();
    let text = std::fs::read_to_string(facts.get("KUBECONFIG")).unwrap();
    let text = text.replacen("  user:\n", &format!("  user:\n    as: {user}\n"), 1);
    let path = std::env::temp_dir().join(format!("kubeconfig-{user}"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Whether the installed Tenant CRD has a status subresource. KubeZoo's own has none (the test
/// environment installs it as it is), so sweeper's status writes are refused there and a user sees
/// the Warning Events alone; sweeper's stand-in CRD (1.20 fallback) has one.
pub async fn crd_has_status(c: &Client) -> bool {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    Api::<CustomResourceDefinition>::all(c.clone())
        .get("tenants.tenant.kubezoo.io")
        .await
        .expect("read the Tenant CRD")
        .spec
        .versions
        .iter()
        .any(|v| v.subresources.as_ref().is_some_and(|s| s.status.is_some()))
}

/// Whether what a user can see of tenant `id` names `needle`: its status' last error where the
/// CRD keeps a status, and on KubeZoo's own CRD (no status subresource) a Warning Event on it.
pub async fn reported(c: &Client, id: &str, needle: &str) -> bool {
    if crd_has_status(c).await {
        tenant_status(c, id)
            .await
            .is_some_and(|s| s.last_error.as_deref().unwrap_or("").contains(needle))
    } else {
        super::objects::warnings_about(c, id)
            .await
            .iter()
            .any(|w| w.contains(needle))
    }
}
