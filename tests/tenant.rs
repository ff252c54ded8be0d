//! The tenant collector against the real kube-apiserver, with the namespace controller on.

mod support;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, PostParams};
use kube::{Api, Client};
use std::time::Duration;
use support::TestScope;
use support::sweeper::{Sweeper, eventually};
use support::tenant::*;
use sweeper::api::tenant::Tenant;

const T: Duration = Duration::from_secs(60);
const TENANT_GATES: [&str; 2] = ["--feature-gates", "CascadeGC=false,TenantGC=true"];

async fn namespace_with_content(c: &Client, name: &str) {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("content".into());
    Api::<ConfigMap>::namespaced(c.clone(), name)
        .create(&PostParams::default(), &cm)
        .await
        .expect("create content");
}

/// A cluster-scoped CRD in group `<prefix>.example.com` with one custom resource.
async fn crd_with_resource(c: &Client, group: &str) {
    let ar = support::objects::schemaless_crd(c, group, "Gadget", "Cluster", T).await;
    let api: Api<DynamicObject> = Api::all_with(c.clone(), &ar);
    let obj = DynamicObject::new("g1", &ar);
    // The new resource may take a moment to be served.
    let created = eventually(T, || async {
        api.create(&PostParams::default(), &obj).await.is_ok()
    })
    .await;
    assert!(created, "custom resource created");
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn deleting_a_tenant_removes_all_of_its_objects_and_nothing_else() {
    let scope = TestScope::new("tenant").await;
    let c = scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let (a, b) = ids();
    // Tenant a: labelled and unlabelled objects of several kinds, a CRD with a resource, namespaces.
    cluster_role(&c, &format!("{a}-reader"), Some(&a)).await;
    cluster_role(&c, &format!("{a}-unlabelled"), None).await;
    priority_class(&c, &format!("{a}-high"), Some(&a)).await;
    priority_class(&c, &format!("{a}-unlabelled"), None).await;
    namespace_with_content(&c, &format!("{a}-ns1")).await;
    namespace_with_content(&c, &format!("{a}-ns2")).await;
    crd_with_resource(&c, &format!("{a}-shop.example.com")).await;
    // Must survive: the sibling tenant, a name sharing the prefix without the separator, a
    // system object, a mislabelled object.
    cluster_role(&c, &format!("{b}-reader"), Some(&b)).await;
    namespace_with_content(&c, &format!("{b}-ns1")).await;
    crd_with_resource(&c, &format!("{b}-shop.example.com")).await;
    cluster_role(&c, &format!("{a}x-reader"), None).await;
    cluster_role(&c, &format!("system-{a}-reader"), None).await;
    cluster_role(&c, &format!("mislabelled-{a}"), Some(&a)).await;

    // Default settings: the unlabelled ClusterRole and PriorityClass must go too (KubeZoo labels
    // nothing it creates; the label is an accelerator, never the filter).
    let _gc = Sweeper::start_scoped(&scope, &TENANT_GATES).await;
    tenant(&scope, &a).await;
    tenant(&scope, &b).await;
    assert!(
        eventually(T, || has_finalizer(&c, &a)).await,
        "finalizer added to {a}"
    );
    assert!(
        eventually(T, || has_finalizer(&c, &b)).await,
        "finalizer added to {b}"
    );

    delete_tenant(&c, &a).await;
    let released = eventually(T, || async {
        !exists(&Api::<Tenant>::all(c.clone()), &a).await
    })
    .await;
    assert!(released, "tenant {a} torn down and its finalizer released");

    let roles: Api<ClusterRole> = Api::all(c.clone());
    let nss: Api<Namespace> = Api::all(c.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let pcs: Api<PriorityClass> = Api::all(c.clone());
    assert!(!exists(&roles, &format!("{a}-reader")).await);
    assert!(!exists(&roles, &format!("{a}-unlabelled")).await);
    assert!(!exists(&pcs, &format!("{a}-high")).await);
    assert!(
        !exists(&pcs, &format!("{a}-unlabelled")).await,
        "an unlabelled object of any kind goes under the default strategy"
    );
    assert!(
        !exists(&nss, &format!("{a}-ns1")).await,
        "namespaces are gone before the finalizer goes"
    );
    assert!(!exists(&nss, &format!("{a}-ns2")).await);
    assert!(!exists(&crds, &format!("gadgets.{a}-shop.example.com")).await);

    assert!(
        exists(&roles, &format!("{b}-reader")).await,
        "the sibling tenant is untouched"
    );
    assert!(exists(&nss, &format!("{b}-ns1")).await);
    assert!(exists(&crds, &format!("gadgets.{b}-shop.example.com")).await);
    assert!(
        exists(&roles, &format!("{a}x-reader")).await,
        "a shared prefix without the separator is not the tenant's"
    );
    assert!(exists(&roles, &format!("system-{a}-reader")).await);
    assert!(
        exists(&roles, &format!("mislabelled-{a}")).await,
        "a label alone never makes an object deletable"
    );
    assert!(has_finalizer(&c, &b).await);

    // Tear down the rest through the collector too.
    delete_tenant(&c, &b).await;
    let gone = eventually(T, || async {
        !exists(&Api::<Tenant>::all(c.clone()), &b).await
    })
    .await;
    assert!(gone);
    assert!(!exists(&crds, &format!("gadgets.{b}-shop.example.com")).await);
    for n in [
        format!("{a}x-reader"),
        format!("system-{a}-reader"),
        format!("mislabelled-{a}"),
    ] {
        let _ = roles.delete(&n, &Default::default()).await;
    }
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn invalid_tenant_id_gets_an_event_and_a_condition_and_deletes_nothing() {
    let scope = TestScope::new("tenantbad").await;
    let c = scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let (a, _) = ids();
    let bad = a[..5].to_string(); // five characters: invalid
    cluster_role(&c, &format!("{bad}-reader"), Some(&bad)).await;
    let _gc = Sweeper::start_scoped(&scope, &TENANT_GATES).await;
    let api: Api<Tenant> = Api::all(c.clone());
    // KubeZoo's CRD requires an int32 id and a quota; the id agrees with the (too short) name.
    let spec = sweeper::api::tenant::TenantSpec {
        id: Some(sweeper::api::tenant::SpecId::Int(bad.parse().unwrap())),
        quota: Some(serde_json::json!({})),
    };
    let mut t = Tenant::new(&bad, spec);
    t.metadata.labels = Some(scope.tenant_labels());
    api.create(&PostParams::default(), &t).await.unwrap();
    let with_status = support::tenant::crd_has_status(&c).await;
    let flagged = !with_status
        || eventually(T, || async {
            api.get_opt(&bad)
                .await
                .unwrap()
                .and_then(|t| t.status)
                .is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == "IdValid"
                            && c.status == "False"
                            && c.message.as_deref().unwrap_or("").contains(&bad)
                    })
                })
        })
        .await;
    assert!(
        flagged,
        "status condition IdValid=False names the bad id (where the CRD keeps a status)"
    );
    let evented = eventually(T, || {
        support::objects::any_event(&c, "default", |e| {
            e.reason.as_deref() == Some("InvalidTenantId")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(bad.as_str())
        })
    })
    .await;
    assert!(evented, "a Warning Event InvalidTenantId");
    assert!(
        !has_finalizer(&c, &bad).await,
        "no finalizer on an invalid tenant"
    );
    api.delete(&bad, &Default::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let roles: Api<ClusterRole> = Api::all(c.clone());
    assert!(
        exists(&roles, &format!("{bad}-reader")).await,
        "an invalid id is never used as a prefix"
    );
    let _ = roles
        .delete(&format!("{bad}-reader"), &Default::default())
        .await;
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn killed_mid_teardown_then_restarted_finishes_it() {
    let scope = TestScope::new("tenantcrash").await;
    let c = scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let (a, b) = ids();
    let roles: Api<ClusterRole> = Api::all(c.clone());
    futures::stream::iter(0..300)
        .map(|i| {
            let c = c.clone();
            let a = a.clone();
            async move { cluster_role(&c, &format!("{a}-r{i}"), Some(&a)).await }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    cluster_role(&c, &format!("{b}-keep"), Some(&b)).await;
    let count = || async {
        roles
            .list_metadata(
                &kube::api::ListParams::default().labels(&format!("kubezoo.io/tenant={a}")),
            )
            .await
            .unwrap()
            .items
            .len()
    };
    let mut gc = Sweeper::start_scoped(
        &scope,
        &[
            "--feature-gates",
            "CascadeGC=false,TenantGC=true",
            "--kube-api-qps",
            "20",
            "--kube-api-burst",
            "20",
        ],
    )
    .await;
    tenant(&scope, &a).await;
    assert!(eventually(T, || has_finalizer(&c, &a)).await);
    delete_tenant(&c, &a).await;
    // `/status` shows the pass's progress while it runs (issue #52): objects left and deleted so
    // far, read twice mid-pass, the deleted count growing and the left count shrinking.
    let progress = || async {
        let (_, body) = gc.get("/status").await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let p = &v[::sweeper::tenant::progress::FIELD][a.as_str()];
        (
            p["left"].as_u64().unwrap_or(0),
            p["deleted"].as_u64().unwrap_or(0),
        )
    };
    let mid_pass = |(left, deleted): (u64, u64)| left > 0 && deleted > 0;
    assert!(
        eventually(T, || async { mid_pass(progress().await) }).await,
        "/status shows the pass's progress: {:?}",
        progress().await
    );
    let first = progress().await;
    assert!(
        eventually(T, || async {
            let now = progress().await;
            mid_pass(now) && now.1 > first.1 && now.0 < first.0
        })
        .await,
        "the progress moves while the pass runs: {first:?}, then {:?}",
        progress().await
    );
    assert!(
        eventually(T, || async { count().await < 290 }).await,
        "teardown started"
    );
    gc.kill();
    let left = count().await;
    assert!(left > 0, "killed mid-way ({left} left)");
    assert!(
        has_finalizer(&c, &a).await,
        "the finalizer holds while objects remain"
    );
    // Scoped, as the first one was: no other test's sweeper sees this Tenant, so what finishes
    // the teardown is this restart.
    let _gc = Sweeper::start_scoped(&scope, &TENANT_GATES).await;
    let done = eventually(T, || async {
        !exists(&Api::<Tenant>::all(c.clone()), &a).await
    })
    .await;
    assert!(
        done,
        "the restarted collector finished and released the tenant"
    );
    assert_eq!(count().await, 0);
    assert!(exists(&roles, &format!("{b}-keep")).await);
    let _ = roles
        .delete(&format!("{b}-keep"), &Default::default())
        .await;
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_kind_that_cannot_be_listed_is_reported_and_holds_the_finalizer_until_allowed() {
    let scope = TestScope::new("tenantforbid").await;
    let c = scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let (a, _) = ids();
    let user = format!("restricted-{a}");
    restricted_role(&c, &user, Some("priorityclasses")).await;
    cluster_role(&c, &format!("{a}-reader"), Some(&a)).await;
    priority_class(&c, &format!("{a}-high"), Some(&a)).await;
    let kubeconfig = impersonating_kubeconfig(&user);
    let _gc = Sweeper::start_scoped_with_kubeconfig(&scope, &TENANT_GATES, &kubeconfig).await;
    tenant(&scope, &a).await;
    assert!(eventually(T, || has_finalizer(&c, &a)).await);
    delete_tenant(&c, &a).await;
    let roles: Api<ClusterRole> = Api::all(c.clone());
    assert!(
        eventually(T, || async {
            !exists(&roles, &format!("{a}-reader")).await
        })
        .await,
        "the rest is still deleted"
    );
    let reported = eventually(T, || async {
        if support::tenant::crd_has_status(&c).await {
            tenant_status(&c, &a).await.is_some_and(|s| {
                s.phase.as_deref() == Some("Blocked")
                    && s.last_error
                        .as_deref()
                        .unwrap_or("")
                        .contains("priorityclasses")
            })
        } else {
            support::tenant::reported(&c, &a, "priorityclasses").await
        }
    })
    .await;
    assert!(
        reported,
        "the forbidden kind is named in the status (or, on KubeZoo's CRD, a Warning Event): {:?}",
        support::objects::warnings_about(&c, &a).await
    );
    assert!(
        has_finalizer(&c, &a).await,
        "the finalizer stays while a kind cannot be checked"
    );
    assert!(exists(&Api::<PriorityClass>::all(c.clone()), &format!("{a}-high")).await);

    restricted_role(&c, &user, None).await;
    let released = eventually(T, || async {
        !exists(&Api::<Tenant>::all(c.clone()), &a).await
    })
    .await;
    assert!(released, "once allowed, the teardown completes");
    assert!(!exists(&Api::<PriorityClass>::all(c.clone()), &format!("{a}-high")).await);
    let _ = roles
        .delete(&format!("{user}-role"), &Default::default())
        .await;
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_group_failing_discovery_holds_the_finalizer_but_not_the_deletes() {
    let scope = TestScope::new("tenantdisc").await;
    let c = scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let (a, _) = ids();
    cluster_role(&c, &format!("{a}-reader"), Some(&a)).await;
    let group = format!("{a}.broken.sweeper.dev");
    let broken = support::objects::BrokenApiGroup::create(&c, &group).await;
    let _gc = Sweeper::start_scoped(&scope, &TENANT_GATES).await;
    tenant(&scope, &a).await;
    assert!(eventually(T, || has_finalizer(&c, &a)).await);
    delete_tenant(&c, &a).await;
    let roles: Api<ClusterRole> = Api::all(c.clone());
    assert!(
        eventually(T, || async {
            !exists(&roles, &format!("{a}-reader")).await
        })
        .await,
        "discoverable kinds are torn down"
    );
    let reported = eventually(T, || support::tenant::reported(&c, &a, &group)).await;
    assert!(
        reported,
        "the failing group is named in the status (or, on KubeZoo's CRD, a Warning Event): {:?}",
        support::objects::warnings_about(&c, &a).await
    );
    assert!(has_finalizer(&c, &a).await);
    broken.remove().await.unwrap();
    let released = eventually(T, || async {
        !exists(&Api::<Tenant>::all(c.clone()), &a).await
    })
    .await;
    assert!(
        released,
        "with the group back (gone), the finalizer is released"
    );
}

/// The `index` strategy's last check: kinds whose watch has passed the teardown's starting
/// revision are answered by the index, the others are listed in full; and what exists but a
/// stale or missing index does not show is still found.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn the_last_check_lists_only_what_the_index_cannot_vouch_for_and_misses_nothing() {
    use sweeper::config::TenantGcStrategy;
    use sweeper::engine::name_index::{IndexWatches, NameIndex, current_revision};
    use sweeper::tenant::id::TenantId;
    use sweeper::tenant::inventory::{confirm, find};
    use sweeper::tenant::metrics::TenantMetrics;
    use sweeper::tenant::pass::{PassSettings, pass};
    let scope = TestScope::new("tenant-check").await;
    let c = scope.client.clone();
    let (a, b) = ids();
    for n in ["x", "y"] {
        cluster_role(&c, &format!("{a}-{n}"), None).await;
        priority_class(&c, &format!("{a}-{n}"), None).await;
    }
    cluster_role(&c, &format!("{b}-keep"), None).await;
    let resources = sweeper::engine::discovery::discover_deletable(&c)
        .await
        .expect("discovery")
        .resources;
    let index = NameIndex::default();
    let mut watches = IndexWatches::new(c.clone(), index.clone());
    watches.reconcile(&resources);
    let id = TenantId::parse(&a, None).unwrap();
    let seen_all = eventually(T, || async {
        find(&c, &id, &resources, TenantGcStrategy::Index, &[], &index)
            .await
            .objects
            .len()
            == 4
    })
    .await;
    assert!(seen_all, "the index holds the tenant's four objects");
    let everything = find(&c, &id, &resources, TenantGcStrategy::Scan, &[], &index)
        .await
        .listed;

    // A teardown: its deletes move ClusterRoles and PriorityClasses past the starting revision,
    // so the last check lists only the kinds it never touched.
    let settings = PassSettings {
        strategy: TenantGcStrategy::Index,
        scan_kinds: vec![],
        dry_run: false,
        delete_concurrency: 4,
        archive: None,
    };
    let metrics = TenantMetrics::default();
    let report = pass(&c, &id, &resources, &settings, &metrics, &index, None).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.deleted, 4);
    assert!(report.since.is_some(), "the starting revision was read");
    assert!(report.done, "everything went at once and the check agrees");
    let roles: Api<ClusterRole> = Api::all(c.clone());
    assert!(!exists(&roles, &format!("{a}-x")).await);
    assert!(
        exists(&roles, &format!("{b}-keep")).await,
        "the sibling tenant sharing a prefix is untouched"
    );
    let roles_now = roles
        .list_metadata(&Default::default())
        .await
        .unwrap()
        .items
        .len() as u64;
    // Other tests create objects meanwhile: the margin is half the ClusterRoles, not all of them.
    assert!(
        everything.saturating_sub(report.listed) >= roles_now / 2,
        "the check listed {} objects of the {everything} a scan lists: the ClusterRoles \
         ({roles_now}) should have been answered by the index",
        report.listed
    );

    // An object the index cannot vouch for is found by listing: one created now, checked against
    // an index that watches nothing, against this one with a revision no kind has reached, and
    // with no revision at all.
    let late = current_revision(&c).await;
    cluster_role(&c, &format!("{a}-late"), None).await;
    let mut listed_all = 0;
    for (label, idx, since) in [
        ("no index", NameIndex::default(), late),
        (
            "a revision no kind has reached",
            index.clone(),
            late.map(|r| r + 1_000_000),
        ),
        ("no revision", index.clone(), None),
    ] {
        let check = confirm(&c, &id, &resources, &[], &idx, since, &[]).await;
        let names: Vec<&str> = check.objects.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, vec![format!("{a}-late")], "{label}");
        listed_all = listed_all.max(check.listed);
    }
    // Once the index has delivered the new object (after `late`), it answers for ClusterRoles.
    let delivered = eventually(T, || async {
        let check = confirm(&c, &id, &resources, &[], &index, late, &[]).await;
        check.objects.iter().any(|f| f.name == format!("{a}-late"))
            && listed_all.saturating_sub(check.listed) >= roles_now / 2
    })
    .await;
    assert!(
        delivered,
        "the fresh index answers for ClusterRoles without a list"
    );
    roles
        .delete(&format!("{a}-late"), &Default::default())
        .await
        .unwrap();
    roles
        .delete(&format!("{b}-keep"), &Default::default())
        .await
        .unwrap();
    drop(watches);
}
