//! The tenant collector against KubeZoo's own Tenant CRD and the objects KubeZoo's tenant
//! controller creates (scripts/fixtures/kubezoo), not against sweeper's idea of them.
//! KubeZoo's Tenant has `spec.id` as an int32, a required `spec.quota`, no status subresource, and
//! labels only the namespaces it creates (`kubezoo.io/tenant`): its ClusterRoles and binding are
//! marked only by `<id>-`.

mod support;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use std::time::Duration;
use support::TestScope;
use support::conformance;
use support::sweeper::{Sweeper, cli, eventually};
use support::tenant::{delete_tenant, exists, has_finalizer};
use sweeper::api::tenant::{SpecId, Tenant};

const T: Duration = Duration::from_secs(90);
const TENANT_GATES: [&str; 2] = ["--feature-gates", "CascadeGC=false,TenantGC=true"];
const SEED_ID: &str = "111111";

/// KubeZoo's fixture (the Tenant first, then what its controller creates) for tenant `id`: the
/// seed's id replaced by `id` in every name and in `spec.id`, shapes unchanged.
fn kubezoo_tenant(id: &str) -> Vec<Value> {
    let text = serde_json::to_string(&conformance::docs("kubezoo/tenant-111111.yaml")).unwrap();
    let docs: Vec<Value> = serde_json::from_str(&text.replace(SEED_ID, id)).unwrap();
    assert_eq!(
        docs[0]["kind"], "Tenant",
        "the fixture starts with the Tenant"
    );
    docs
}

fn resource_of(obj: &Value) -> ApiResource {
    let api_version = obj["apiVersion"].as_str().unwrap();
    let kind = obj["kind"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let plural = format!("{}s", kind.to_lowercase());
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural)
}

fn describe(obj: &Value) -> String {
    format!("{} {}", obj["kind"], obj["metadata"]["name"])
}

async fn create_all(c: &Client, docs: &[Value]) {
    for d in docs {
        let obj: DynamicObject = serde_json::from_value(d.clone()).unwrap();
        Api::<DynamicObject>::all_with(c.clone(), &resource_of(d))
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {}: {e}", describe(d)));
    }
}

async fn present(c: &Client, obj: &Value) -> bool {
    let api = Api::<DynamicObject>::all_with(c.clone(), &resource_of(obj));
    api.get_opt(obj["metadata"]["name"].as_str().unwrap())
        .await
        .unwrap()
        .is_some_and(|o| o.metadata.deletion_timestamp.is_none())
}

/// The object as the API server holds it now, terminating or not.
async fn get(c: &Client, obj: &Value) -> Option<Value> {
    let api = Api::<DynamicObject>::all_with(c.clone(), &resource_of(obj));
    api.get_opt(obj["metadata"]["name"].as_str().unwrap())
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

async fn stored(c: &Client, obj: &Value) -> bool {
    get(c, obj).await.is_some()
}

/// Equal, an empty list or map counting as absent (the API server drops empty `rules`).
fn same(live: &Value, want: &Value) -> bool {
    let empty = |v: &Value| {
        v.is_null()
            || v.as_array().is_some_and(|a| a.is_empty())
            || v.as_object().is_some_and(|o| o.is_empty())
    };
    (empty(live) && empty(want)) || live == want
}

/// Two numeric ids sharing their first five digits (KubeZoo's ids are numbers).
fn numeric_ids() -> (String, String) {
    let base = 10_000 + rand::random::<u32>() % 89_999;
    (format!("{base}1"), format!("{base}2"))
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn kubezoos_own_tenant_is_torn_down_completely_under_the_default_settings() {
    let scope = TestScope::new("ctenant").await;
    let c = scope.client.clone();
    conformance::install_crd(&c, "kubezoo/tenants.tenant.kubezoo.io.yaml").await;
    let (a, b) = numeric_ids();
    let (mut docs_a, mut docs_b) = (kubezoo_tenant(&a), kubezoo_tenant(&b));
    // The test's scope label on each Tenant, for its scoped sweeper: a label on the Tenant says
    // nothing about its objects (KubeZoo's RBAC objects stay unlabelled), so the defaults are still
    // what runs.
    for docs in [&mut docs_a, &mut docs_b] {
        docs[0]["metadata"]["labels"] = serde_json::json!(scope.tenant_labels());
    }
    create_all(&c, &docs_a).await;
    create_all(&c, &docs_b).await;

    // Default settings: nothing tells sweeper about KubeZoo's unlabelled ClusterRoles.
    let gc = Sweeper::start_scoped(&scope, &TENANT_GATES).await;
    for id in [&a, &b] {
        assert!(
            eventually(T, || has_finalizer(&c, id)).await,
            "KubeZoo's tenant {id} (integer spec.id) gets the finalizer"
        );
    }
    delete_tenant(&c, &a).await;
    let released = eventually(T, || async {
        !exists(&Api::<Tenant>::all(c.clone()), &a).await
    })
    .await;
    assert!(released, "tenant {a} torn down and its finalizer released");
    for obj in &docs_a[1..] {
        assert!(
            !present(&c, obj).await,
            "{} of the deleted tenant is gone",
            describe(obj)
        );
    }
    for obj in &docs_b {
        assert!(
            present(&c, obj).await,
            "{} of the other tenant (sharing 5 digits) is untouched",
            describe(obj)
        );
    }
    assert!(
        gc.metric("sweeper_invalid_objects_total{collector=\"tenant\",kind=\"Tenant\"}")
            .await
            == 0.0,
        "KubeZoo's tenants decode"
    );

    // Undo: `sweeper restore --tenant` brings KubeZoo's unlabelled objects back as they were,
    // and nothing of the tenant sharing its prefix. Restore never overwrites, so it waits until
    // the namespace controller has finished with the tenant's namespaces.
    for obj in &docs_a[1..] {
        assert!(
            eventually(T, || async { !stored(&c, obj).await }).await,
            "{} is gone for good before the restore",
            describe(obj)
        );
    }
    let (ok, out, err) = cli(&["restore", "--tenant", &a]);
    assert!(ok, "restore --tenant {a}: {out}\n{err}");
    for obj in &docs_a[1..] {
        let live = get(&c, obj).await;
        let live = live.unwrap_or_else(|| panic!("{} restored: {out}", describe(obj)));
        for (field, want) in obj.as_object().unwrap() {
            if ["apiVersion", "kind", "metadata"].contains(&field.as_str()) {
                continue;
            }
            assert!(
                same(&live[field], want),
                "{}: restored {field} {} equals KubeZoo's {want}",
                describe(obj),
                live[field]
            );
        }
    }
    assert!(
        !out.contains(&b),
        "the tenant sharing the prefix is not in the restore: {out}"
    );

    // Tear the other one down through the collector as well.
    delete_tenant(&c, &b).await;
    let gone = eventually(T, || async {
        !exists(&Api::<Tenant>::all(c.clone()), &b).await
    })
    .await;
    assert!(gone, "tenant {b} torn down too");
    drop(gc);
    // What was restored of `a` belongs to no tenant any more.
    for obj in &docs_a[1..] {
        let api = Api::<DynamicObject>::all_with(c.clone(), &resource_of(obj));
        let _ = api
            .delete(
                obj["metadata"]["name"].as_str().unwrap(),
                &Default::default(),
            )
            .await;
    }
    support::objects::install_sweeper_crds(&c).await;
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn sweepers_tenant_crd_accepts_kubezoos_tenant() {
    let scope = TestScope::new("ctenantcrd").await;
    let c = scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let (a, _) = numeric_ids();
    let seed = &kubezoo_tenant(&a)[0];
    // The seed's own object, as KubeZoo writes it: `spec: {id: <int>, quota: {...}}`.
    let t: Tenant = serde_json::from_value(seed.clone()).expect("decodes as sweeper's Tenant");
    assert_eq!(t.spec.id, Some(SpecId::Int(a.parse().unwrap())));
    let created = Api::<Tenant>::all(c.clone())
        .create(&PostParams::default(), &t)
        .await
        .expect("sweeper's shipped Tenant CRD accepts KubeZoo's tenant");
    assert_eq!(created.spec.quota, t.spec.quota, "spec.quota is kept");
    let _ = Api::<Tenant>::all(c.clone())
        .delete(&created.name_any(), &Default::default())
        .await;
}
