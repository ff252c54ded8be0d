//! How many Kubernetes API calls one EKS reconcile makes: the deletion of an
//! AWSManagedControlPlane holding our finalizer, whose Cluster references an AWSManagedCluster
//! (where `clusterawsadm` writes the opt-out), driven through the engine's reconcile as in
//! production against a scripted API server. The AWS side refuses every request (counted), so the
//! pass ends at its session; the calls before it are what this measures.

use super::*;
use crate::testing::MockApi;
use crate::testing::mock_api::Call;
use http::Method;
use serde_json::{Value, json};

const CP: &str =
    "/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/ns/awsmanagedcontrolplanes/cp";
const CLUSTER: &str = "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/ek1";
const MANAGED: &str =
    "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/ns/awsmanagedclusters/ek1";

fn control_plane() -> Value {
    json!({
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
        "kind": "AWSManagedControlPlane",
        "metadata": {
            "name": "cp", "namespace": "ns", "uid": "u-cp", "resourceVersion": "5",
            "finalizers": [FINALIZER],
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"cluster.x-k8s.io/cluster-name": "ek1"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                 "name": "ek1", "uid": "u-cluster"}],
        },
        "spec": {"eksClusterName": "ns_ek1", "region": "us-east-1"},
    })
}

/// Cluster API, CAPA's infrastructure group, the Cluster ns/ek1 (unpaused) and its
/// AWSManagedCluster, each answering any number of reads; and whatever the pass writes.
fn world(server: &MockApi) {
    let gv = |g: &str, v: &str| json!({"groupVersion": format!("{g}/{v}"), "version": v});
    let capi = "cluster.x-k8s.io";
    let infra = "infrastructure.cluster.x-k8s.io";
    server.expect(Method::GET, "/apis").repeatedly().respond(
        200,
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": capi, "versions": [gv(capi, "v1beta2"), gv(capi, "v1beta1")],
             "preferredVersion": gv(capi, "v1beta2")},
            {"name": infra, "versions": [gv(infra, "v1beta2")],
             "preferredVersion": gv(infra, "v1beta2")}]}),
    );
    let resources = |g: &str, v: &str, name: &str, kind: &str| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{g}/{v}"),
               "resources": [{"name": name, "singularName": kind.to_lowercase(),
                              "namespaced": true, "kind": kind, "verbs": ["get", "list", "watch"]}]})
    };
    for v in ["v1beta2", "v1beta1"] {
        server
            .expect(Method::GET, &format!("/apis/{capi}/{v}"))
            .repeatedly()
            .respond(200, resources(capi, v, "clusters", "Cluster"));
    }
    server
        .expect(Method::GET, &format!("/apis/{infra}/v1beta2"))
        .repeatedly()
        .respond(
            200,
            resources(infra, "v1beta2", "awsmanagedclusters", "AWSManagedCluster"),
        );
    server.expect(Method::GET, CLUSTER).repeatedly().respond(
        200,
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
               "metadata": {"name": "ek1", "namespace": "ns", "uid": "u-cluster"},
               "spec": {"paused": false,
                        "infrastructureRef": {"apiGroup": infra, "kind": "AWSManagedCluster", "name": "ek1"},
                        "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io",
                                            "kind": "AWSManagedControlPlane", "name": "cp"}}}),
    );
    server.expect(Method::GET, MANAGED).repeatedly().respond(
        200,
        json!({"apiVersion": format!("{infra}/v1beta2"), "kind": "AWSManagedCluster",
               "metadata": {"name": "ek1", "namespace": "ns", "uid": "u-mc"}}),
    );
    server
        .expect(Method::GET, CP)
        .repeatedly()
        .respond(200, control_plane());
    server
        .expect(Method::PATCH, &format!("{CP}/status"))
        .repeatedly()
        .respond(200, control_plane());
    server.allow_events();
    // A repeated Event is a PATCH of the series.
    server
        .expect(Method::PATCH, "/apis/events.k8s.io/v1/*")
        .repeatedly()
        .respond(200, json!({}));
}

/// The calls of one reconcile, by what they are for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Count {
    discovery: usize,
    cluster_reads: usize,
    managed_cluster_reads: usize,
    other: usize,
}

fn count(calls: &[Call]) -> Count {
    let mut n = Count::default();
    for c in calls {
        let p = c.path.as_str();
        if c.method == Method::GET && (p == "/apis" || p.matches('/').count() == 3) {
            n.discovery += 1;
        } else if p == CLUSTER {
            n.cluster_reads += 1;
        } else if p == MANAGED {
            n.managed_cluster_reads += 1;
        } else {
            n.other += 1;
        }
    }
    n
}

async fn reconcile_once(d: &Arc<FinalizerController<KindReconciler<AWSManagedControlPlane>>>) {
    let cp: AWSManagedControlPlane = serde_json::from_value(control_plane()).unwrap();
    crate::engine::finalizer_controller::reconcile(Arc::new(Guarded(Ok(cp))), d.clone())
        .await
        .unwrap();
}

/// One EKS reconcile reads the Cluster once (the admission's read serves the contract and the
/// AWSManagedCluster's opt-out alike, and validation is handed what it read), and API discovery
/// is kept per collector: a later reconcile discovers nothing.
///
/// Measured on this test. Before: every reconcile made 21 calls: 13 discovery (Cluster API's
/// group three times, CAPA's infrastructure group twice), 3 reads of the Cluster, 2 of the
/// AWSManagedCluster, and 3 for the report (the object's read, its condition, an Event).
/// After: the first reconcile makes 10 (5 discovery, 1 Cluster read, 1 AWSManagedCluster read,
/// the same 3), every later one 5 (no discovery).
#[tokio::test]
async fn one_eks_reconcile_reads_the_cluster_once_and_discovers_once_per_collector() {
    let (client, server) = MockApi::new();
    world(&server);
    let (ctx, _aws) = crate::external::controller::admission_tests::context(&client);
    let d = Arc::new(finalizer_controller::<AWSManagedControlPlane>(
        Arc::new(ctx),
        TeardownRegistry::default(),
        Fence::open(),
    ));

    reconcile_once(&d).await;
    let first = server.calls();
    reconcile_once(&d).await;
    let all = server.finish();
    let second = &all[first.len()..];

    let report = 3;
    assert_eq!(
        count(&first),
        Count {
            discovery: 5,
            cluster_reads: 1,
            managed_cluster_reads: 1,
            other: report,
        },
        "{:#?}",
        first.iter().map(Call::line).collect::<Vec<_>>()
    );
    assert_eq!(first.len(), 10);
    assert_eq!(
        count(second),
        Count {
            discovery: 0,
            cluster_reads: 1,
            managed_cluster_reads: 1,
            other: report,
        },
        "{:#?}",
        second.iter().map(Call::line).collect::<Vec<_>>()
    );
    assert_eq!(second.len(), 5);
    // The Cluster is read before the AWSManagedCluster it names, and both before the report.
    let lines: Vec<String> = second.iter().map(Call::line).collect();
    assert_eq!(lines[0], format!("GET {CLUSTER}"));
    assert_eq!(lines[1], format!("GET {MANAGED}"));
}
