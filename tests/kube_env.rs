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

/// The collectors' transport (engine/transport.rs) against the real kube-apiserver: calls go
/// over HTTP/2 (the first while ALPN decides, the rest on the HTTP/2-only client), a watch stays
/// on HTTP/1.1, and a client built on it works end to end (authentication and all).
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn collectors_transport_calls_over_http2_watches_over_http1() {
    use kube::client::Body;
    use tower::ServiceExt;
    let config = support::kube_config().await;
    let transport = sweeper::engine::transport::transport(&config)
        .expect("transport")
        .expect("no proxy in the test kubeconfig: sweeper's own transport");
    let transport = tower::buffer::Buffer::new(transport, 16);
    let send = |uri: &str| {
        let req = http::Request::get(uri).body(Body::empty()).unwrap();
        transport.clone().oneshot(req)
    };
    for attempt in ["learns", "learnt"] {
        let res = send("/version").await.expect("GET /version");
        assert_eq!(res.status(), 200, "{attempt}");
        assert_eq!(res.version(), http::Version::HTTP_2, "a call ({attempt})");
    }
    // 32 calls at once still all answer (they share the one connection).
    let burst =
        futures::future::join_all((0..32).map(|_| send("/api/v1/namespaces?limit=1"))).await;
    for res in burst {
        let res = res.expect("GET namespaces");
        assert_eq!(
            (res.status().as_u16(), res.version()),
            (200, http::Version::HTTP_2)
        );
    }
    let watch = send("/api/v1/namespaces?watch=true&timeoutSeconds=1")
        .await
        .expect("watch namespaces");
    assert_eq!(watch.status(), 200);
    assert_eq!(
        watch.version(),
        http::Version::HTTP_11,
        "a watch has a connection of its own"
    );

    let client = sweeper::engine::client::build_client(
        config,
        &sweeper::engine::client::ClientSettings { qps: 0.0, burst: 1 },
        Default::default(),
        sweeper::engine::leader::Fence::open(),
        Default::default(),
    )
    .expect("collectors' client");
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    let default = namespaces
        .get("default")
        .await
        .expect("get namespace default");
    assert_eq!(default.metadata.name.as_deref(), Some("default"));
}
