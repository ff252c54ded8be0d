//! The Kubernetes half of the test environment works, and the engine's discovery sees it.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use std::time::Duration;
use support::TestScope;
use sweeper::engine::discovery::discover_deletable;

/// Creates a namespaced CRD `Widget` in a group unique to the test and waits until it is served.
async fn create_widget_crd(client: &Client, group: &str) -> ApiResource {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    let crd_name = format!("widgets.{group}");
    let established = kube::runtime::wait::await_condition(
        crds,
        &crd_name,
        kube::runtime::wait::conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(30), established)
        .await
        .expect("CRD established in time")
        .expect("watch CRD");
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "Widget"), "widgets")
}

async fn delete_crd(client: &Client, group: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let _ = crds
        .delete(&format!("widgets.{group}"), &Default::default())
        .await;
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn crd_and_namespaced_object_round_trip() {
    let mut scope = TestScope::new("roundtrip").await;
    let ns = scope.namespace().await;
    let group = format!("{}.test.sweeper.dev", scope.name);
    let ar = create_widget_crd(&scope.client, &group).await;

    let widgets: Api<DynamicObject> = Api::namespaced_with(scope.client.clone(), &ns, &ar);
    let mut w = DynamicObject::new("w1", &ar).within(&ns);
    w.data = serde_json::json!({"spec": {"size": 3}});
    widgets
        .create(&PostParams::default(), &w)
        .await
        .expect("create widget");
    let back = widgets.get("w1").await.expect("read widget back");
    assert_eq!(back.data["spec"]["size"], 3);
    assert_eq!(back.metadata.namespace.as_deref(), Some(ns.as_str()));

    let cms: Api<ConfigMap> = Api::namespaced(scope.client.clone(), &ns);
    let cm: ConfigMap = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "cm1"}, "data": {"k": "v"}}),
    )
    .unwrap();
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create configmap");
    let back = cms.get("cm1").await.expect("read configmap back");
    assert_eq!(back.data.unwrap()["k"], "v");

    delete_crd(&scope.client, &group).await;
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn discovery_lists_deletable_resources_ignores_events_and_sees_new_crds() {
    let scope = TestScope::new("discovery").await;
    let before = discover_deletable(&scope.client).await.expect("discovery");
    let has = |r: &sweeper::engine::discovery::DiscoveryReport, g: &str, k: &str| {
        r.resources
            .iter()
            .any(|d| d.resource.group == g && d.resource.kind == k)
    };
    assert!(has(&before, "", "ConfigMap"));
    assert!(has(&before, "apps", "Deployment"));
    assert!(has(&before, "", "Namespace"));
    assert!(!has(&before, "", "Event"), "core events must be ignored");
    assert!(
        !has(&before, "events.k8s.io", "Event"),
        "events.k8s.io events must be ignored"
    );
    let ns = before
        .resources
        .iter()
        .find(|d| d.resource.kind == "Namespace")
        .unwrap();
    assert!(!ns.namespaced);

    let group = format!("{}.test.sweeper.dev", scope.name);
    create_widget_crd(&scope.client, &group).await;
    let after = discover_deletable(&scope.client).await.expect("discovery");
    delete_crd(&scope.client, &group).await;
    assert!(has(&after, &group, "Widget"), "a new CRD is discovered");
    assert!(!has(&before, &group, "Widget"));
}
