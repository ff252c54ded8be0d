//! The external collector's Kubernetes side against a scripted API server, driven through the
//! engine's reconcile as in production: the GC switches, bad input, finalizer handling and a
//! refused identity. None of these paths reach AWS (a pass that does needs a session; the AWS
//! teardown itself is tested in sweeper-aws (services/) against LocalStack).

use super::*;
use crate::engine::finalizer::Stage;
use crate::external::controller::metrics::ExternalMetrics;
use crate::testing::MockApi;
use http::Method;
use kube::Client;
use prometheus_client::metrics::family::Family;
use serde_json::{Value, json};
use sweeper_aws::session::SessionCache;

const CLUSTER: &str = "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/ns/awsclusters/c1";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ns/events";

fn ctx(client: &Client) -> ExternalCtx {
    // An empty SDK config (no environment, no IMDS): no test here reaches a session.
    let base = sweeper_aws::sdk::aws_config::SdkConfig::builder().build();
    let sessions = SessionCache::new(base, None);
    ExternalCtx::new(
        client.clone(),
        Arc::new(sessions),
        ExternalMetrics::default(),
        false,
        Family::default(),
    )
}

fn cluster_json(annotations: Value, finalizers: &[&str], deleting: bool) -> Value {
    let mut v = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "AWSCluster",
        "metadata": {
            "name": "c1", "namespace": "ns", "uid": "u-c1", "resourceVersion": "5",
            "annotations": annotations,
            "finalizers": finalizers,
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                 "name": "c1", "uid": "u-cluster"}],
        },
        "spec": {},
    });
    if deleting {
        v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    v
}

/// Cluster API not installed: the contract's read of the owning Cluster finds none (so nothing
/// pauses the cluster) after one discovery call, `GET /apis`.
fn no_capi(server: &MockApi) {
    server.expect(Method::GET, "/apis").respond(
        200,
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}),
    );
}

fn cluster(annotations: Value, finalizers: &[&str], deleting: bool) -> AWSCluster {
    serde_json::from_value(cluster_json(annotations, finalizers, deleting)).unwrap()
}

/// The calls of one report on the cluster: its read, the condition written through the status
/// subresource, and the Warning Event.
fn expect_report(server: &MockApi, json: &Value) {
    server
        .expect(Method::GET, CLUSTER)
        .respond(200, json.clone());
    server
        .expect(Method::PATCH, &format!("{CLUSTER}/status"))
        .respond(200, json.clone());
    server.expect(Method::POST, EVENTS).respond(201, json!({}));
}

fn guarded(c: AWSCluster) -> Arc<Guarded<AWSCluster>> {
    Arc::new(Guarded(Ok(c)))
}

async fn run(
    ctx: ExternalCtx,
    obj: Arc<Guarded<AWSCluster>>,
) -> Result<kube::runtime::controller::Action, ExternalError> {
    let d = Arc::new(finalizer_controller::<AWSCluster>(
        Arc::new(ctx),
        TeardownRegistry::default(),
        Fence::open(),
    ));
    crate::engine::finalizer_controller::reconcile(obj, d).await
}

#[tokio::test]
async fn the_opt_out_annotation_is_valid_and_turns_external_gc_off_without_a_call() {
    let (client, server) = MockApi::new();
    let t = KindReconciler::<AWSCluster> {
        ctx: Arc::new(ctx(&client)),
        _kind: std::marker::PhantomData,
    };
    let c = cluster(
        json!({annotations::GC_ANNOTATION: "false"}),
        &[FINALIZER],
        true,
    );

    let checked = t.validate(&c, Stage::Cleanup, proven()).await.unwrap();

    let Checked::Valid(input) = checked else {
        panic!("the opt-out is valid input")
    };
    assert!(
        !input.settings.external_gc,
        "phase 2 (external resources) is off"
    );
    assert_eq!(input.names.capi, "c1");
    assert!(server.finish().is_empty());
}

#[tokio::test]
async fn an_opted_out_live_cluster_holding_the_finalizer_costs_no_call() {
    let (client, server) = MockApi::new();
    let c = cluster(
        json!({annotations::GC_ANNOTATION: "false"}),
        &[FINALIZER],
        false,
    );

    run(ctx(&client), guarded(c)).await.unwrap();

    assert!(server.finish().is_empty());
}

#[tokio::test]
async fn a_malformed_switch_on_a_deleting_cluster_is_an_error_condition_and_event_and_nothing_is_released()
 {
    let (client, server) = MockApi::new();
    let json = cluster_json(
        json!({annotations::GC_ANNOTATION: "maybe"}),
        &[FINALIZER],
        true,
    );
    no_capi(&server);
    expect_report(&server, &json);
    let c: AWSCluster = serde_json::from_value(json).unwrap();

    let action = run(ctx(&client), guarded(c)).await.unwrap();

    let mut calls = server.finish();
    assert_eq!(
        calls.remove(0).line(),
        "GET /apis",
        "the contract looks for the owning Cluster first"
    );
    assert_eq!(
        calls.iter().map(|c| c.line()).collect::<Vec<_>>(),
        vec![
            format!("GET {CLUSTER}"),
            format!("PATCH {CLUSTER}/status"),
            format!("POST {EVENTS}"),
        ],
        "no finalizer patch, no teardown"
    );
    let condition = &calls[1].body["status"]["conditions"][0];
    assert_eq!(condition["reason"], "InvalidConfiguration");
    assert_eq!(condition["status"], "False");
    assert!(
        condition["message"].as_str().unwrap().contains("\"maybe\""),
        "{condition}"
    );
    assert_eq!(calls[1].body["metadata"]["resourceVersion"], "5");
    assert_eq!(calls[2].body["reason"], "InvalidConfiguration");
    assert_eq!(calls[2].body["type"], "Warning");
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(Duration::from_secs(30))
    );
}

/// Issue #41: one of sweeper's tasks in CAPA's tasks annotation (written before CAPA's webhook,
/// or by an older sweeper) is bad input, reported as any bad annotation, never a task to run,
/// even with sweeper's own annotation naming it too.
#[tokio::test]
async fn a_sweeper_task_in_capas_annotation_holds_the_teardown_and_says_where_it_belongs() {
    let (client, server) = MockApi::new();
    let json = cluster_json(
        json!({
            annotations::CAPA_TASKS_ANNOTATION: "ebs-volume,load-balancer",
            annotations::SWEEPER_TASKS_ANNOTATION: "ebs-volume,load-balancer",
        }),
        &[FINALIZER],
        true,
    );
    no_capi(&server);
    expect_report(&server, &json);
    let c: AWSCluster = serde_json::from_value(json).unwrap();

    let action = run(ctx(&client), guarded(c)).await.unwrap();

    let calls = server.finish();
    assert_eq!(
        calls.iter().map(|c| c.line()).collect::<Vec<_>>(),
        vec![
            "GET /apis".to_string(),
            format!("GET {CLUSTER}"),
            format!("PATCH {CLUSTER}/status"),
            format!("POST {EVENTS}"),
        ],
        "no finalizer patch, no teardown"
    );
    let condition = &calls[2].body["status"]["conditions"][0];
    assert_eq!(condition["reason"], "InvalidConfiguration");
    let message = condition["message"].as_str().unwrap();
    for says in [
        annotations::CAPA_TASKS_ANNOTATION,
        "\"ebs-volume\"",
        annotations::SWEEPER_TASKS_ANNOTATION,
        "sweeper gc configure",
    ] {
        assert!(message.contains(says), "says {says}: {message}");
    }
    assert_eq!(calls[3].body["reason"], "InvalidConfiguration");
    assert_eq!(calls[3].body["type"], "Warning");
    assert!(
        calls[3].body["note"]
            .as_str()
            .unwrap()
            .contains("ebs-volume")
    );
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(Duration::from_secs(30))
    );
}

#[tokio::test]
async fn a_malformed_switch_already_reported_is_not_reported_again() {
    let (client, server) = MockApi::new();
    let t = KindReconciler::<AWSCluster> {
        ctx: Arc::new(ctx(&client)),
        _kind: std::marker::PhantomData,
    };
    let c = cluster(
        json!({annotations::GC_ANNOTATION: "maybe"}),
        &[FINALIZER],
        true,
    );
    // First time: condition written and Event sent; the answer carries the condition.
    let mut reported = cluster_json(
        json!({annotations::GC_ANNOTATION: "maybe"}),
        &[FINALIZER],
        true,
    );
    expect_report(&server, &reported);
    t.validate(&c, Stage::Cleanup, proven()).await.unwrap();
    reported["status"] = server.calls()[1].body["status"].clone();
    server.expect(Method::GET, CLUSTER).respond(200, reported);

    let again = t.validate(&c, Stage::Cleanup, proven()).await.unwrap();

    assert!(matches!(again, Checked::Invalid { release: false, .. }));
    let calls = server.finish();
    assert_eq!(calls.len(), 4, "the second look only reads: {calls:?}");
    assert_eq!(calls[3].method, Method::GET);
}

#[tokio::test]
async fn a_new_cluster_is_guarded_by_the_finalizer_even_with_a_malformed_switch() {
    let (client, server) = MockApi::new();
    let json = cluster_json(json!({annotations::GC_ANNOTATION: "maybe"}), &[], false);
    no_capi(&server);
    server
        .expect(Method::PATCH, CLUSTER)
        .respond(200, json.clone());
    let c: AWSCluster = serde_json::from_value(json).unwrap();

    run(ctx(&client), guarded(c)).await.unwrap();

    let mut calls = server.finish();
    assert_eq!(
        calls.remove(0).line(),
        "GET /apis",
        "the Cluster is not paused"
    );
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].content_type, "application/json-patch+json");
    assert_eq!(calls[0].body[1]["op"], "add");
    assert_eq!(calls[0].body[1]["value"], json!(FINALIZER));
}

#[tokio::test]
async fn a_dry_run_never_takes_the_finalizer() {
    let (client, server) = MockApi::new();
    let c = cluster(json!({}), &[], false);

    run(ctx(&client).with_dry_run(true), guarded(c))
        .await
        .unwrap();

    assert!(server.finish().is_empty());
}

#[tokio::test]
async fn a_cluster_the_selector_no_longer_selects_is_released_with_nothing_torn_down() {
    let (client, server) = MockApi::new();
    let json = cluster_json(json!({}), &["other.io/x", FINALIZER], true);
    server
        .expect(Method::PATCH, CLUSTER)
        .respond(200, json.clone());
    let c: AWSCluster = serde_json::from_value(json).unwrap();
    let selector = crate::engine::selector::parse("team=gc").unwrap();

    run(ctx(&client).with_selector(selector), guarded(c))
        .await
        .unwrap();

    let calls = server.finish();
    assert_eq!(calls.len(), 1, "only the release: {calls:?}");
    assert_eq!(
        calls[0].body,
        json!([
            {"op": "test", "path": "/metadata/finalizers/1", "value": FINALIZER},
            {"op": "remove", "path": "/metadata/finalizers/1"},
        ])
    );
}

#[tokio::test]
async fn a_missing_identity_refuses_the_teardown_keeps_the_finalizer_and_says_why() {
    let (client, server) = MockApi::new();
    let mut json = cluster_json(json!({}), &[FINALIZER], true);
    json["spec"]["identityRef"] = json!({"kind": "AWSClusterStaticIdentity", "name": "missing"});
    proven_cluster(&server);
    server
        .expect(
            Method::GET,
            "/apis/infrastructure.cluster.x-k8s.io/v1beta2/awsclusterstaticidentities/missing",
        )
        .respond_status(404, "NotFound");
    expect_report(&server, &json);
    let c: AWSCluster = serde_json::from_value(json).unwrap();

    let action = run(ctx(&client), guarded(c)).await.unwrap();

    let calls = server.finish();
    assert!(
        !calls
            .iter()
            .any(|c| c.method == Method::PATCH && c.path == CLUSTER),
        "no finalizer patch: {calls:?}"
    );
    // Discovery, the Cluster (the owner proven), the identity, then the report.
    assert_eq!(
        calls[5].body["status"]["conditions"][0]["reason"],
        "IdentityNotFound"
    );
    assert_eq!(calls[6].body["reason"], "IdentityNotFound");
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(Duration::from_secs(5)),
        "retried with backoff"
    );
}

/// A bad `sweeper.dev/external-dns-owner-id` is valid input for the rest: the teardown goes on
/// (here as far as its identity, which is missing) and no owner id reaches AWS; the error itself
/// is said with the pass's condition and Event (`outcome::with_config_problem`).
#[tokio::test]
async fn a_bad_external_dns_owner_id_holds_nothing_and_deletes_no_record() {
    let (client, server) = MockApi::new();
    let t = KindReconciler::<AWSCluster> {
        ctx: Arc::new(ctx(&client)),
        _kind: std::marker::PhantomData,
    };
    for bad in ["default", "", "a,b"] {
        let c = cluster(
            json!({annotations::DNS_OWNER_ANNOTATION: bad}),
            &[FINALIZER],
            true,
        );
        let Checked::Valid(input) = t.validate(&c, Stage::Cleanup, proven()).await.unwrap() else {
            panic!("{bad:?}: a bad owner id must not block the teardown")
        };
        assert_eq!(
            input.settings.dns_owner.id(),
            None,
            "{bad:?}: nothing deleted by it"
        );
        assert!(
            input.settings.dns_owner.problem().is_some(),
            "{bad:?}: reported"
        );
    }
    assert!(server.finish().is_empty(), "validation writes nothing");

    let (client, server) = MockApi::new();
    let mut json = cluster_json(
        json!({annotations::DNS_OWNER_ANNOTATION: "default"}),
        &[FINALIZER],
        true,
    );
    json["spec"]["identityRef"] = json!({"kind": "AWSClusterStaticIdentity", "name": "missing"});
    proven_cluster(&server);
    server
        .expect(
            Method::GET,
            "/apis/infrastructure.cluster.x-k8s.io/v1beta2/awsclusterstaticidentities/missing",
        )
        .respond_status(404, "NotFound");
    expect_report(&server, &json);
    let c: AWSCluster = serde_json::from_value(json).unwrap();

    run(ctx(&client), guarded(c)).await.unwrap();

    let calls = server.finish();
    assert_eq!(
        calls[5].body["status"]["conditions"][0]["reason"], "IdentityNotFound",
        "the teardown went on past the bad annotation: {calls:?}"
    );
}

#[tokio::test]
async fn an_undecodable_cluster_is_reported_and_keeps_its_finalizer() {
    let (client, server) = MockApi::new();
    let json = cluster_json(json!({}), &[FINALIZER], true);
    expect_report(&server, &json);
    let bad = Arc::new(Guarded::<AWSCluster>(Err(Invalid {
        field: "spec.region".into(),
        error: "expected a string".into(),
        metadata: serde_json::from_value(json["metadata"].clone()).unwrap(),
    })));

    run(ctx(&client), bad).await.unwrap();

    let calls = server.finish();
    assert_eq!(calls.len(), 3, "condition and Event only: {calls:?}");
    assert_eq!(
        calls[1].body["status"]["conditions"][0]["reason"],
        "InvalidObject"
    );
    assert_eq!(calls[2].body["reason"], "InvalidObject");
}

const ISSUER: &str = "oidc.eks.us-east-1.amazonaws.com/id/AAAA1111";
const CP: &str =
    "/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/ns/awsmanagedcontrolplanes/cp";

fn control_plane(annotations: Value, status: Value) -> AWSManagedControlPlane {
    serde_json::from_value(json!({
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
        "kind": "AWSManagedControlPlane",
        "metadata": {
            "name": "cp", "namespace": "ns", "uid": "u-cp", "resourceVersion": "5",
            "annotations": annotations,
            "labels": {"cluster.x-k8s.io/cluster-name": "ek1"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                 "name": "ek1", "uid": "u-ek1"}],
        },
        "spec": {"eksClusterName": "ns_ek1"},
        "status": status,
    }))
    .unwrap()
}

/// CAPA#3972: `clusterctl move` drops the status, where CAPA keeps the provider's ARN. While the
/// control plane lives sweeper keeps the issuer in an annotation (moved with the object), once;
/// the teardown reads the status first, the annotation second.
#[tokio::test]
async fn a_live_control_plane_keeps_its_irsa_issuer_in_an_annotation_once() {
    let arn = format!("arn:aws:iam::123456789012:oidc-provider/{ISSUER}");
    let status = json!({"ready": true, "oidcProvider": {"arn": arn}});
    let cp = control_plane(json!({}), status.clone());
    let (client, server) = MockApi::new();
    server
        .expect(Method::PATCH, CP)
        .respond(200, serde_json::to_value(&cp).unwrap());
    let t = KindReconciler::<AWSManagedControlPlane> {
        ctx: Arc::new(ctx(&client)),
        _kind: std::marker::PhantomData,
    };
    let input = ClusterInput {
        settings: annotations::settings_of(cp.annotations(), None).unwrap(),
        names: cp.names().unwrap(),
    };
    t.live(&cp, input).await.unwrap();
    let calls = server.finish();
    assert_eq!(
        calls[0].body["metadata"]["annotations"][OIDC_ISSUER_ANNOTATION],
        ISSUER
    );

    let kept = control_plane(json!({OIDC_ISSUER_ANNOTATION: ISSUER}), status);
    assert_eq!(kept.issuer_to_keep(), None, "already kept: no second write");
    let moved = control_plane(
        json!({OIDC_ISSUER_ANNOTATION: ISSUER}),
        json!({"ready": false}),
    );
    assert_eq!(
        moved.eks_facts().unwrap().oidc_issuer.as_deref(),
        Some(ISSUER),
        "the status lost in a move: the kept issuer"
    );
    let never = control_plane(json!({}), json!({"ready": true}));
    assert_eq!(never.eks_facts().unwrap().oidc_issuer, None);
    assert_eq!(never.issuer_to_keep(), None);
}

/// Cluster API's contract: the issuer is not written while the cluster is left alone (its object
/// paused or moving, or its Cluster paused as the Cluster watch saw it); no call at all.
#[tokio::test]
async fn a_paused_or_moving_control_plane_gets_no_issuer_write() {
    let arn = format!("arn:aws:iam::123456789012:oidc-provider/{ISSUER}");
    let status = json!({"ready": true, "oidcProvider": {"arn": arn}});
    for annotations in [
        json!({crate::external::core::contract::PAUSED: ""}),
        json!({crate::external::core::contract::DELETE_FOR_MOVE: ""}),
        json!({}),
    ] {
        let cp = control_plane(annotations.clone(), status.clone());
        let (client, server) = MockApi::new();
        let ctx = ctx(&client);
        // The last case: unmarked, but its Cluster (ns/ek1) is paused.
        ctx.pauses.set("ns", "ek1", true);
        let t = KindReconciler::<AWSManagedControlPlane> {
            ctx: Arc::new(ctx),
            _kind: std::marker::PhantomData,
        };
        let input = ClusterInput {
            settings: annotations::settings_of(cp.annotations(), None).unwrap(),
            names: cp.names().unwrap(),
        };
        t.live(&cp, input).await.unwrap();
        assert!(server.finish().is_empty(), "{annotations}: no write");
    }
}

/// What the admission hands on when the owner Cluster proved the object's name.
fn proven() -> Admitted {
    Admitted {
        linked: None,
        proof: Some(Ok(())),
    }
}

/// Cluster API served at v1beta2 (discovery read once) and the Cluster ns/c1 referencing the
/// AWSCluster c1: the owner proves the name, so the deletion goes on past validation.
fn proven_cluster(server: &MockApi) {
    crate::external::core::capi::mocked::discovery(server, &["v1beta2"], false);
    server
        .expect(
            Method::GET,
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/c1",
        )
        .respond(
            200,
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                   "metadata": {"name": "c1", "namespace": "ns", "uid": "u-cluster"},
                   "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                  "kind": "AWSCluster", "name": "c1"}}}),
        );
}
