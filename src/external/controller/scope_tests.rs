//! `--scope-namespaces`: the collector's watches are namespaced, so an object in another
//! namespace is never seen, let alone given or relieved of a finalizer. Driven through the
//! engine's controller (watch, reconcile) against a scripted server that would show both
//! namespaces' objects to a cluster-wide watch.

use super::*;
use crate::external::controller::metrics::ExternalMetrics;
use crate::testing::MockApi;
use http::Method;
use prometheus_client::metrics::family::Family;
use serde_json::{Value, json};
use sweeper_aws::session::SessionCache;

const KIND: &str = "/apis/infrastructure.cluster.x-k8s.io/v1beta2";

fn cluster(namespace: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster",
        "metadata": {"name": "c1", "namespace": namespace, "uid": format!("u-{namespace}"),
                     "resourceVersion": "5",
                     "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
        "spec": {},
    })
}

fn list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSClusterList",
           "metadata": {"resourceVersion": "10"}, "items": items})
}

#[tokio::test]
async fn an_object_outside_the_scope_is_never_seen_nor_touched() {
    let (client, server) = MockApi::new();
    // A cluster-wide watch would see both; the namespaced one sees only its own.
    server
        .expect(Method::GET, &format!("{KIND}/awsclusters"))
        .repeatedly()
        .respond(200, list(vec![cluster("a"), cluster("b")]));
    server
        .expect(Method::GET, &format!("{KIND}/namespaces/a/awsclusters"))
        .repeatedly()
        .respond(200, list(vec![cluster("a")]));
    server
        .expect(Method::GET, &format!("{KIND}/namespaces/b/awsclusters"))
        .repeatedly()
        .respond(200, list(vec![cluster("b")]));
    // Cluster API not installed: nothing pauses the cluster, so a new object gets the finalizer.
    server.expect(Method::GET, "/apis").repeatedly().respond(
        200,
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}),
    );
    server
        .expect(Method::PATCH, &format!("{KIND}/namespaces/*"))
        .repeatedly()
        .respond(200, cluster("a"));
    let ctx = ExternalCtx::new(
        client.clone(),
        Arc::new(SessionCache::new(
            sweeper_aws::sdk::aws_config::SdkConfig::builder().build(),
            None,
        )),
        ExternalMetrics::default(),
        false,
        Family::default(),
    )
    .with_scope(vec!["a".into()]);
    let scope = ctx.scope.clone();
    let d = Arc::new(finalizer_controller::<AWSCluster>(
        Arc::new(ctx),
        TeardownRegistry::default(),
        Fence::open(),
    ));
    let shutdown = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn(d.run(
        Watches::namespaces(client, &scope),
        crate::engine::health::Health::default(),
        AWSCluster::COMPONENT,
        shutdown.clone(),
        || None,
    ));
    let patched =
        |calls: &[crate::testing::mock_api::Call]| calls.iter().any(|c| c.method == Method::PATCH);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !patched(&server.calls()) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), run).await;

    let calls = server.calls();
    let lines: Vec<String> = calls.iter().map(|c| c.line()).collect();
    let patches: Vec<&String> = lines.iter().filter(|l| l.starts_with("PATCH")).collect();
    assert_eq!(
        patches,
        [&format!("PATCH {KIND}/namespaces/a/awsclusters/c1")],
        "the object in scope got the finalizer: {lines:#?}"
    );
    assert!(
        calls
            .iter()
            .all(|c| c.path != format!("{KIND}/awsclusters") && !c.path.contains("/namespaces/b/")),
        "no cluster-wide watch, nothing in namespace b: {lines:#?}"
    );
}
