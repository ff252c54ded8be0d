//! The cascade collector across kinds and scopes: custom resources, CRD deletion, cross-namespace
//! and cluster-scoped owner references, unknown owner kinds, new CRDs without a restart, the
//! `sweeper.dev/cascade-complete` finalizer, and the graph queries.

mod support;

use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::PropagationPolicy::Background;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, ResourceExt};
use std::time::Duration;
use support::TestScope;
use support::objects::*;
use support::sweeper::{Sweeper, eventually};

const T: Duration = Duration::from_secs(30);
const SETTLE: Duration = Duration::from_secs(3);

fn widget_ref(
    w: &DynamicObject,
    ar: &ApiResource,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    fake_ref(&ar.kind, &ar.api_version, &w.name_any(), &w.uid().unwrap())
}

async fn widget(
    api: &Api<DynamicObject>,
    ar: &ApiResource,
    name: &str,
    owners: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
) -> DynamicObject {
    let mut w = DynamicObject::new(name, ar);
    if !owners.is_empty() {
        w.metadata.owner_references = Some(owners);
    }
    api.create(&PostParams::default(), &w)
        .await
        .expect("create widget")
}

/// A running sweeper, then a namespaced `Widget` CRD created after it (so only discovery finds it).
struct WidgetWorld {
    _scope: TestScope,
    _gc: Sweeper,
    ns: String,
    c: kube::Client,
    ar: ApiResource,
    widgets: Api<DynamicObject>,
}

/// Returns once sweeper is proven to serve the new kind: a probe widget's dependent went with it
/// (a fixed sleep proves nothing on a loaded machine).
async fn widget_world(prefix: &str) -> WidgetWorld {
    let mut scope = TestScope::new(prefix).await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    let gc = Sweeper::start(&[]).await;
    let group = format!("{}.test.sweeper.dev", scope.name);
    let ar = schemaless_crd(&c, &group, "Widget", "Namespaced", T).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(c.clone(), &ns, &ar);
    let probe = widget(&widgets, &ar, "probe", vec![]).await;
    configmap(&c, &ns, "probe-dep", vec![widget_ref(&probe, &ar)]).await;
    widgets.delete("probe", &Default::default()).await.unwrap();
    assert!(
        cm_gone(&c, &ns, "probe-dep", T).await,
        "sweeper discovered and watches the new kind"
    );
    WidgetWorld {
        _scope: scope,
        _gc: gc,
        ns,
        c,
        ar,
        widgets,
    }
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn custom_resources_and_mixed_relationships_cascade() {
    let mut s = TestScope::new("crmix").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    let group = format!("{}.test.sweeper.dev", s.name);
    let ar = schemaless_crd(&c, &group, "Widget", "Namespaced", T).await;
    let _gc = Sweeper::start(&[]).await; // started after the CRD: it is discovered at start
    let widgets: Api<DynamicObject> = Api::namespaced_with(c.clone(), &ns, &ar);
    let owner = widget(&widgets, &ar, "owner", vec![]).await;
    // custom resource -> core dependent, and core -> custom resource dependent
    let cm_dep = configmap(&c, &ns, "cm-of-widget", vec![widget_ref(&owner, &ar)]).await;
    widget(
        &widgets,
        &ar,
        "widget-of-cm",
        vec![owner_ref(&cm_dep, None)],
    )
    .await;
    widget(
        &widgets,
        &ar,
        "widget-of-widget",
        vec![widget_ref(&owner, &ar)],
    )
    .await;
    let keep = widget(&widgets, &ar, "keep", vec![]).await;
    widgets.delete("owner", &Default::default()).await.unwrap();
    assert!(cm_gone(&c, &ns, "cm-of-widget", T).await);
    let gone = eventually(T, || async {
        widgets.get_opt("widget-of-cm").await.unwrap().is_none()
            && widgets.get_opt("widget-of-widget").await.unwrap().is_none()
    })
    .await;
    assert!(gone, "dependents of both kinds collected, two levels deep");
    assert!(
        widgets
            .get_opt("keep")
            .await
            .unwrap()
            .is_some_and(|k| k.uid() == keep.uid())
    );
    delete_crd(&c, &ar).await;
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn crd_deletion_cascades_to_dependents_of_its_custom_resources() {
    // The CRD is created after sweeper started: collected only if discovery picks it up.
    let w = widget_world("crddel").await;
    let (c, ns, ar, widgets) = (&w.c, w.ns.as_str(), &w.ar, &w.widgets);
    let owner = widget(widgets, ar, "owner", vec![]).await;
    configmap(c, ns, "dep", vec![widget_ref(&owner, ar)]).await;
    configmap(c, ns, "bystander", vec![]).await;
    delete_crd(c, ar).await;
    assert!(
        cm_gone(c, ns, "dep", T).await,
        "the custom resource went with its CRD; its dependent follows"
    );
    assert!(cm(c, ns, "bystander").await.is_some());
}

/// A CRD deleted, its custom resources went with it; an owner reference to one of them that no
/// watch ever reports deleted (made after the CRD went, or missed as the watch ended) names an
/// absent owner: the API server confirms no CRD defines the kind. A kind never served is still
/// "unknown": kept.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn owners_of_a_kind_whose_crd_is_gone_are_absent_but_unknown_kinds_are_kept() {
    let w = widget_world("kindgone").await;
    let (c, ns, ar) = (&w.c, w.ns.as_str(), &w.ar);
    delete_crd(c, ar).await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(c.clone());
    let crd_name = format!("{}.{}", ar.plural, ar.group);
    assert!(
        eventually(T, || async {
            crds.get_opt(&crd_name).await.unwrap().is_none()
        })
        .await,
        "the CRD is deleted"
    );
    let gone = fake_ref(
        "Widget",
        &ar.api_version,
        "w",
        "61111111-2222-4333-8444-555555555555",
    );
    let never = fake_ref(
        "Widget",
        &format!("never-{}/v1", ar.group),
        "w",
        "71111111-2222-4333-8444-555555555555",
    );
    let keeper = configmap(c, ns, "keeper", vec![]).await;
    configmap(c, ns, "dep-of-gone", vec![gone.clone()]).await;
    configmap(c, ns, "dep-of-never", vec![never]).await;
    configmap(c, ns, "solid", vec![gone, owner_ref(&keeper, None)]).await;
    assert!(
        cm_gone(c, ns, "dep-of-gone", T).await,
        "an owner whose kind no CRD defines any more is absent"
    );
    let keeper_uid = keeper.metadata.uid.clone();
    let tidied = eventually(T, || async {
        cm(c, ns, "solid")
            .await
            .and_then(|o| o.metadata.owner_references)
            .is_some_and(|r| r.len() == 1 && Some(&r[0].uid) == keeper_uid.as_ref())
    })
    .await;
    assert!(
        tidied,
        "an object with a solid owner is kept; only its reference to the gone owner is dropped"
    );
    tokio::time::sleep(SETTLE).await;
    assert!(
        cm(c, ns, "dep-of-never").await.is_some(),
        "an owner of a kind never served is unknown, not absent: kept"
    );
    assert!(cm(c, ns, "keeper").await.is_some());
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn cross_namespace_references_present_at_start_are_treated_as_absent() {
    let mut a = TestScope::new("xns-a").await;
    let mut b = TestScope::new("xns-b").await;
    let (ns_a, ns_b) = (a.namespace().await, b.namespace().await);
    let c = a.client.clone();
    // Invalid references created BEFORE sweeper starts.
    let owner = configmap(&c, &ns_a, "owner", vec![]).await;
    configmap(&c, &ns_a, "valid-dep", vec![owner_ref(&owner, None)]).await;
    configmap(&c, &ns_b, "invalid-dep", vec![owner_ref(&owner, None)]).await;
    let _gc = Sweeper::start(&[]).await;
    assert!(
        cm_gone(&c, &ns_b, "invalid-dep", T).await,
        "an owner in another namespace counts as absent"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.clone(), &ns_b);
    let warned = eventually(T, || async {
        events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("OwnerRefInvalidNamespace"))
    })
    .await;
    assert!(
        warned,
        "a Warning Event OwnerRefInvalidNamespace is recorded"
    );
    tokio::time::sleep(SETTLE).await;
    assert!(
        cm(&c, &ns_a, "valid-dep").await.is_some(),
        "the valid dependent survives"
    );
    assert!(cm(&c, &ns_a, "owner").await.is_some());
    drop(b);
}

fn cluster_role(
    name: &str,
    owners: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
) -> ClusterRole {
    let mut r = ClusterRole::default();
    r.metadata.name = Some(name.into());
    r.metadata.owner_references = (!owners.is_empty()).then_some(owners);
    r
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn cluster_scoped_owners_missing_collected_unknown_kept_valid_kept() {
    let s = TestScope::new("clusterscoped").await;
    let c = s.client.clone();
    let roles: Api<ClusterRole> = Api::all(c.clone());
    let p = &s.name;
    let _gc = Sweeper::start(&[]).await;
    let owner = roles
        .create(
            &PostParams::default(),
            &cluster_role(&format!("{p}-owner"), vec![]),
        )
        .await
        .unwrap();
    let valid = owner_ref(&owner, None);
    let missing = fake_ref(
        "ClusterRole",
        "rbac.authorization.k8s.io/v1",
        "gone",
        "21111111-2222-4333-8444-555555555555",
    );
    let unknown = fake_ref(
        "Nope",
        "nope.example.com/v1",
        "x",
        "31111111-2222-4333-8444-555555555555",
    );
    let namespaced = fake_ref(
        "ConfigMap",
        "v1",
        "cm",
        "41111111-2222-4333-8444-555555555555",
    );
    for (n, o) in [
        ("valid", valid),
        ("missing", missing),
        ("unknown", unknown),
        ("nsowner", namespaced),
    ] {
        roles
            .create(
                &PostParams::default(),
                &cluster_role(&format!("{p}-{n}"), vec![o]),
            )
            .await
            .unwrap();
    }
    let missing_gone = eventually(T, || async {
        roles
            .get_opt(&format!("{p}-missing"))
            .await
            .unwrap()
            .is_none()
    })
    .await;
    assert!(missing_gone, "missing cluster-scoped owner: collected");
    tokio::time::sleep(SETTLE).await;
    assert!(
        roles
            .get_opt(&format!("{p}-valid"))
            .await
            .unwrap()
            .is_some(),
        "valid owner: kept"
    );
    assert!(
        roles
            .get_opt(&format!("{p}-unknown"))
            .await
            .unwrap()
            .is_some(),
        "unknown owner kind: kept"
    );
    assert!(
        roles
            .get_opt(&format!("{p}-nsowner"))
            .await
            .unwrap()
            .is_some(),
        "namespaced owner of a cluster-scoped object: never collected"
    );
    for n in ["owner", "valid", "unknown", "nsowner"] {
        let _ = roles.delete(&format!("{p}-{n}"), &Default::default()).await;
    }
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn unknown_owner_kind_does_not_block_other_collection() {
    let mut s = TestScope::new("unknownkind").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let gc = Sweeper::start(&[]).await;
    let unknown = fake_ref(
        "Nope",
        "nope.example.com/v1",
        "x",
        "51111111-2222-4333-8444-555555555555",
    );
    configmap(c, &ns, "kept", vec![unknown]).await;
    let owner = configmap(c, &ns, "owner", vec![]).await;
    configmap(c, &ns, "dep", vec![owner_ref(&owner, None)]).await;
    delete_cm(c, &ns, "owner", Background).await;
    assert!(
        cm_gone(c, &ns, "dep", T).await,
        "collection goes on beside the unresolvable owner"
    );
    assert!(
        cm(c, &ns, "kept").await.is_some(),
        "a dependent of an unknown kind is kept"
    );
    let retried = eventually(T, || async {
        gc.metric(
            "sweeper_cascade_errors_total{resource=\"nope.example.com/v1/Nope\",reason=\"unknown_owner_kind\"}",
        )
            .await
            >= 1.0
    })
    .await;
    assert!(retried, "the unknown owner is retried (counted as errors)");
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn cascade_complete_finalizer_is_released_after_the_last_dependent() {
    let mut s = TestScope::new("complete").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let _gc = Sweeper::start(&[]).await;
    let owner = configmap_with(
        c,
        &ns,
        "owner",
        vec![],
        vec!["sweeper.dev/cascade-complete".into()],
    )
    .await;
    for i in 0..20 {
        configmap(c, &ns, &format!("dep-{i}"), vec![owner_ref(&owner, None)]).await;
    }
    delete_cm(c, &ns, "owner", Background).await;
    assert!(
        cm_gone(c, &ns, "owner", T).await,
        "the owner disappears when the cascade is done"
    );
    for i in 0..20 {
        assert!(
            cm(c, &ns, &format!("dep-{i}")).await.is_none(),
            "dep-{i} was gone before the owner"
        );
    }
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.clone(), &ns);
    // The Event is published just after the finalizer goes: poll for it.
    let reported = eventually(T, || async {
        events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("CascadeComplete")
                    && e.note.as_deref().unwrap_or("").contains("20 dependents")
            })
    })
    .await;
    assert!(reported, "a CascadeComplete Event with the dependent count");
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn graph_queries_answer_dependents_and_dependencies() {
    let mut s = TestScope::new("graphq").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let gc = Sweeper::start(&[]).await;
    let root = configmap(c, &ns, "root", vec![]).await;
    let mid = configmap(c, &ns, "mid", vec![owner_ref(&root, Some(true))]).await;
    configmap(c, &ns, "leaf", vec![owner_ref(&mid, None)]).await;
    let run = |args: Vec<String>| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sweeper"))
            .arg("graph")
            .args(["--server", &gc.base])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let args = |q: &str, name: &str, t: bool| {
        let mut v = vec![
            q.to_string(),
            "v1/ConfigMap".into(),
            ns.clone(),
            name.into(),
        ];
        if t {
            v.push("--transitive".into());
        }
        v
    };
    let ok = eventually(T, || {
        let (ok, out, _) = run(args("dependents", "root", true));
        async move { ok && out.contains("\"name\":\"mid\"") && out.contains("\"name\":\"leaf\"") }
    })
    .await;
    assert!(ok, "transitive dependents of root: mid and leaf");
    let (ok, out, _) = run(args("dependents", "root", false));
    assert!(
        ok && out.contains("\"mid\"") && !out.contains("\"leaf\""),
        "direct dependents only: {out}"
    );
    let (ok, out, _) = run(args("dependencies", "leaf", true));
    assert!(
        ok && out.contains("\"mid\"") && out.contains("\"root\""),
        "{out}"
    );
    let (ok, out, _) = run(vec!["dump".into(), "--format".into(), "dot".into()]);
    assert!(
        ok && out.starts_with("digraph") && out.contains(&mid.uid().unwrap()),
        "dot dump"
    );
    let (ok, _, err) = run(args("dependents", "nope", false));
    assert!(
        !ok && err.contains("404"),
        "unknown object: a clear error: {err}"
    );
}
