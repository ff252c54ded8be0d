//! Cluster API's contract through the engine's reconcile, as production runs it, against a
//! scripted API server: the exact Kubernetes calls for a paused, moved, externally managed or
//! unreadable cluster, and not one AWS request (counted by an SDK client that refuses them; the
//! last test proves that count sees a teardown's first call).

use super::*;
use crate::external::controller::metrics::ExternalMetrics;
use crate::external::core::contract::{DELETE_FOR_MOVE, MANAGED_BY, PAUSED};
use crate::testing::MockApi;
use http::Method;
use kube::Client;
use kube::runtime::controller::Action;
use prometheus_client::metrics::family::Family;
use serde_json::{Value, json};
use sweeper_aws::session::SessionCache;
use sweeper_aws::testing::{AwsCallCount, refusing_config};

const OBJ: &str = "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/ns/awsclusters/c1";
const CAPI_CLUSTER: &str = "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/c1";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ns/events";

/// The collector's context over `client`, its AWS refused and counted (also the EKS call count's).
pub(super) fn context(client: &Client) -> (ExternalCtx, AwsCallCount) {
    let (base, aws) = refusing_config();
    let ctx = ExternalCtx::new(
        client.clone(),
        Arc::new(SessionCache::new(base, None)),
        ExternalMetrics::default(),
        false,
        Family::default(),
    );
    (ctx, aws)
}

fn object(annotations: Value, finalizers: &[&str], deleting: bool) -> Value {
    let mut v = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "AWSCluster",
        "metadata": {
            "name": "c1", "namespace": "ns", "uid": "u-c1", "resourceVersion": "5",
            "annotations": annotations,
            "finalizers": finalizers,
            "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                 "name": "c1", "uid": "u-cluster"}],
        },
        "spec": {"region": "us-east-1"},
    });
    if deleting {
        v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    v
}

/// Cluster API served at v1beta2 and v1beta1 (discovery answers any number of times), and the
/// Cluster ns/c1 as `cluster` (a JSON object, or an HTTP status for a failed read).
fn capi(server: &MockApi, cluster: Result<Value, u16>) {
    crate::external::core::capi::mocked::discovery(server, &["v1beta2", "v1beta1"], true);
    let get = server.expect(Method::GET, CAPI_CLUSTER).repeatedly();
    match cluster {
        Ok(c) => get.respond(200, c),
        Err(code) => get.respond_status(code, "Forbidden"),
    }
}

/// The condition write (read, then status patch) and its one Event.
fn expect_condition_and_event(server: &MockApi, obj: &Value) {
    server.expect(Method::GET, OBJ).respond(200, obj.clone());
    server
        .expect(Method::PATCH, &format!("{OBJ}/status"))
        .respond(200, obj.clone());
    server.expect(Method::POST, EVENTS).respond(201, json!({}));
}

fn capi_cluster(paused: bool) -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
           "metadata": {"name": "c1", "namespace": "ns", "uid": "u-cluster"},
           "spec": {"paused": paused,
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                          "kind": "AWSCluster", "name": "c1"}}})
}

async fn reconcile(ctx: ExternalCtx, obj: Value) -> (Action, TeardownRegistry) {
    let registry = TeardownRegistry::default();
    let d = Arc::new(finalizer_controller::<AWSCluster>(
        Arc::new(ctx),
        registry.clone(),
        Fence::open(),
    ));
    let c: AWSCluster = serde_json::from_value(obj).unwrap();
    let action = crate::engine::finalizer_controller::reconcile(Arc::new(Guarded(Ok(c))), d)
        .await
        .unwrap();
    (action, registry)
}

fn lines(calls: &[crate::testing::mock_api::Call]) -> Vec<String> {
    calls.iter().map(|c| c.line()).collect()
}

/// Discovery's three reads, then the Cluster.
fn cluster_read() -> Vec<String> {
    vec![
        "GET /apis".into(),
        "GET /apis/cluster.x-k8s.io/v1beta2".into(),
        "GET /apis/cluster.x-k8s.io/v1beta1".into(),
        format!("GET {CAPI_CLUSTER}"),
    ]
}

#[tokio::test]
async fn a_deletion_of_a_paused_clusters_object_waits_says_why_and_touches_nothing() {
    let (client, server) = MockApi::new();
    let obj = object(json!({}), &[FINALIZER], true);
    capi(&server, Ok(capi_cluster(true)));
    expect_condition_and_event(&server, &obj);
    let (ctx, aws) = context(&client);

    let (action, registry) = reconcile(ctx, obj).await;

    let calls = server.finish();
    let mut want = cluster_read();
    want.extend([
        format!("GET {OBJ}"),
        format!("PATCH {OBJ}/status"),
        format!("POST {EVENTS}"),
    ]);
    assert_eq!(lines(&calls), want, "no finalizer patch, no teardown");
    let condition = &calls[5].body["status"]["conditions"][0];
    assert_eq!(condition["reason"], "Paused");
    assert_eq!(condition["severity"], "Info");
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("Cluster ns/c1 is paused"),
        "{condition}"
    );
    assert_eq!(calls[6].body["reason"], "TeardownPaused");
    assert_eq!(aws.get(), 0, "no AWS call");
    assert_eq!(action, Action::requeue(Duration::from_secs(60)));
    let shown = registry.list();
    assert_eq!(shown.len(), 1, "sweeper status shows the wait");
    assert_eq!(shown[0].phase, "waiting: paused");
}

#[tokio::test]
async fn a_paused_clusters_object_without_our_finalizer_does_not_get_it_back() {
    let (client, server) = MockApi::new();
    capi(&server, Ok(capi_cluster(true)));
    let (ctx, aws) = context(&client);

    reconcile(ctx, object(json!({}), &[], false)).await;

    assert_eq!(
        lines(&server.finish()),
        cluster_read(),
        "the Cluster is read; nothing is written"
    );
    assert_eq!(aws.get(), 0);
}

#[tokio::test]
async fn the_paused_annotation_holds_a_deletion_without_reading_the_cluster() {
    let (client, server) = MockApi::new();
    let obj = object(json!({PAUSED: ""}), &[FINALIZER], true);
    expect_condition_and_event(&server, &obj);
    let (ctx, aws) = context(&client);

    let (action, _) = reconcile(ctx, obj).await;

    let calls = server.finish();
    assert_eq!(
        lines(&calls),
        vec![
            format!("GET {OBJ}"),
            format!("PATCH {OBJ}/status"),
            format!("POST {EVENTS}")
        ]
    );
    assert!(
        calls[1].body["status"]["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .contains(PAUSED)
    );
    assert_eq!(aws.get(), 0);
    assert_eq!(action, Action::requeue(Duration::from_secs(60)));
}

#[tokio::test]
async fn an_object_marked_for_move_loses_our_finalizer_and_nothing_else() {
    let (client, server) = MockApi::new();
    let obj = object(
        json!({DELETE_FOR_MOVE: ""}),
        &["other.io/x", FINALIZER],
        true,
    );
    server.expect(Method::PATCH, OBJ).respond(200, obj.clone());
    server.expect(Method::POST, EVENTS).respond(201, json!({}));
    let (ctx, aws) = context(&client);

    let (action, _) = reconcile(ctx, obj).await;

    let calls = server.finish();
    assert_eq!(
        lines(&calls),
        vec![format!("PATCH {OBJ}"), format!("POST {EVENTS}")],
        "no Cluster read, no status write"
    );
    assert_eq!(
        calls[0].body,
        json!([
            {"op": "test", "path": "/metadata/finalizers/1", "value": FINALIZER},
            {"op": "remove", "path": "/metadata/finalizers/1"},
        ]),
        "only our finalizer goes"
    );
    assert_eq!(calls[1].body["reason"], "ReleasedForMove");
    assert_eq!(aws.get(), 0);
    assert_eq!(action, Action::await_change());
}

#[tokio::test]
async fn an_object_marked_for_move_never_gets_our_finalizer() {
    let (client, server) = MockApi::new();
    let (ctx, aws) = context(&client);

    reconcile(ctx, object(json!({DELETE_FOR_MOVE: ""}), &[], false)).await;

    assert!(server.finish().is_empty());
    assert_eq!(aws.get(), 0);
}

#[tokio::test]
async fn an_externally_managed_object_is_released_live_and_ignored_when_deleted() {
    let (client, server) = MockApi::new();
    let live = object(json!({MANAGED_BY: "terraform"}), &[FINALIZER], false);
    server.expect(Method::PATCH, OBJ).respond(200, live.clone());
    server.expect(Method::POST, EVENTS).respond(201, json!({}));
    let (ctx, aws) = context(&client);
    let held = ctx.metrics.held.clone();

    reconcile(ctx, live).await;

    let calls = server.finish();
    assert_eq!(
        lines(&calls),
        vec![format!("PATCH {OBJ}"), format!("POST {EVENTS}")]
    );
    assert_eq!(calls[1].body["reason"], "ReleasedExternallyManaged");
    assert_eq!(held.list()[0].state, "externally managed");

    let (client, server) = MockApi::new();
    let (ctx2, aws2) = context(&client);
    reconcile(ctx2, object(json!({MANAGED_BY: "terraform"}), &[], true)).await;
    assert!(server.finish().is_empty(), "deleted without us: untouched");
    assert_eq!(aws.get() + aws2.get(), 0);
}

#[tokio::test]
async fn an_unreadable_cluster_holds_the_deletion_and_the_finalizer() {
    let (client, server) = MockApi::new();
    let obj = object(json!({}), &[FINALIZER], true);
    capi(&server, Err(403));
    expect_condition_and_event(&server, &obj);
    let (ctx, aws) = context(&client);

    let (action, _) = reconcile(ctx, obj).await;

    let calls = server.finish();
    assert!(
        !calls
            .iter()
            .any(|c| c.method == Method::PATCH && c.path == OBJ),
        "no finalizer change: {calls:?}"
    );
    let condition = &calls[5].body["status"]["conditions"][0];
    assert_eq!(condition["reason"], "ClusterUnreadable");
    assert_eq!(condition["severity"], "Warning");
    assert_eq!(calls[6].body["type"], "Warning");
    assert_eq!(aws.get(), 0);
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
}

#[tokio::test]
async fn an_unreadable_cluster_keeps_our_finalizer_off_a_new_object() {
    let (client, server) = MockApi::new();
    capi(&server, Err(403));
    let (ctx, _) = context(&client);

    let (action, _) = reconcile(ctx, object(json!({}), &[], false)).await;

    assert_eq!(lines(&server.finish()), cluster_read());
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
}

#[tokio::test]
async fn a_running_clusters_new_object_gets_the_finalizer() {
    let (client, server) = MockApi::new();
    let obj = object(json!({}), &[], false);
    capi(&server, Ok(capi_cluster(false)));
    server.expect(Method::PATCH, OBJ).respond(200, obj.clone());
    let (ctx, _) = context(&client);

    reconcile(ctx, obj).await;

    let calls = server.finish();
    let mut want = cluster_read();
    want.push(format!("PATCH {OBJ}"));
    assert_eq!(lines(&calls), want);
    assert_eq!(calls[4].body[1]["value"], json!(FINALIZER));
}

#[tokio::test]
async fn a_live_guarded_object_of_a_paused_cluster_shows_as_paused_without_a_call() {
    let (client, server) = MockApi::new();
    let (ctx, aws) = context(&client);
    ctx.pauses.set("ns", "c1", true);
    let held = ctx.metrics.held.clone();

    reconcile(ctx, object(json!({}), &[FINALIZER], false)).await;

    assert!(
        server.finish().is_empty(),
        "what the Cluster watch saw is enough"
    );
    assert_eq!(aws.get(), 0);
    let shown = held.list();
    assert_eq!(shown.len(), 1, "sweeper status lists it");
    assert_eq!(shown[0].state, "paused");
    assert!(
        shown[0].detail.contains("Cluster ns/c1 is paused"),
        "{shown:?}"
    );
}

/// The control for every "no AWS call" above: an unpaused cluster's deletion does reach AWS
/// (its session is proven first), and the count sees it.
#[tokio::test]
async fn an_unpaused_clusters_deletion_reaches_aws_and_the_count_sees_it() {
    let (client, server) = MockApi::new();
    let obj = object(json!({}), &[FINALIZER], true);
    capi(&server, Ok(capi_cluster(false)));
    server
        .expect(Method::GET, OBJ)
        .repeatedly()
        .respond(200, obj.clone());
    server
        .expect(Method::PATCH, &format!("{OBJ}/status"))
        .repeatedly()
        .respond(200, obj.clone());
    server.allow_events();
    let (ctx, aws) = context(&client);

    reconcile(ctx, obj).await;

    assert!(
        aws.get() > 0,
        "the teardown's first AWS request was counted"
    );
    server.finish();
}
