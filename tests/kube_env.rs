//! The Kubernetes half of the test environment works, and the engine's discovery sees it.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use std::time::Duration;
use support::TestScope;
use sweeper::engine::discovery::discover_deletable;

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn crd_and_namespaced_object_round_trip() {
    let mut scope = TestScope::new("roundtrip").await;
    let ns = scope.namespace().await;
    let group = format!("{}.test.sweeper.dev", scope.name);
    let ar = support::objects::schemaless_crd(
        &scope.client,
        &group,
        "Widget",
        "Namespaced",
        Duration::from_secs(30),
    )
    .await;

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

    support::objects::delete_crd(&scope.client, &ar).await;
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
    let ar = support::objects::schemaless_crd(
        &scope.client,
        &group,
        "Widget",
        "Namespaced",
        Duration::from_secs(30),
    )
    .await;
    // An Established CRD reaches the API server's discovery documents a moment later (they are
    // rebuilt asynchronously): sweeper sees it at its next refresh, the test asks again for a while.
    let mut after = discover_deletable(&scope.client).await.expect("discovery");
    for _ in 0..50 {
        if has(&after, &group, "Widget") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        after = discover_deletable(&scope.client).await.expect("discovery");
    }
    support::objects::delete_crd(&scope.client, &ar).await;
    assert!(has(&after, &group, "Widget"), "a new CRD is discovered");
    assert!(!has(&before, &group, "Widget"));
}
