//! One AWSCluster sweeper cannot decode never stalls the external collector: it is reported on
//! the object (condition, Warning Event naming the field) and counted, nothing is taken on for
//! it, and every other AWSCluster is still served.

mod support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};
use std::time::Duration;
use support::TestScope;
use support::sweeper::{Sweeper, eventually};
use sweeper::api::capa::AWSCluster;

const T: Duration = Duration::from_secs(60);
const GATES: [&str; 2] = ["--feature-gates", "CascadeGC=false,ExternalResourceGC=true"];

/// An AWSCluster CRD with no schema but a status subresource, so the server stores AWSClusters
/// sweeper cannot decode while conditions can still be written on them.
async fn schemaless_awscluster_crd(c: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "awsclusters.infrastructure.cluster.x-k8s.io"},
        "spec": {"group": "infrastructure.cluster.x-k8s.io", "scope": "Namespaced",
            "names": {"plural": "awsclusters", "singular": "awscluster", "kind": "AWSCluster", "listKind": "AWSClusterList"},
            "versions": [{"name": "v1beta2", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    support::objects::replace_crd(c, crd).await;
}

async fn create(api: &Api<DynamicObject>, value: serde_json::Value) {
    let obj: DynamicObject = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create AWSCluster");
}

async fn finalizers(api: &Api<DynamicObject>, name: &str) -> Vec<String> {
    api.get(name)
        .await
        .unwrap()
        .metadata
        .finalizers
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn an_undecodable_awscluster_is_reported_and_the_others_are_still_served() {
    let mut scope = TestScope::new("extbad").await;
    let c = scope.client.clone();
    let ns = scope.namespace().await;
    schemaless_awscluster_crd(&c).await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(c.clone(), &ns, &ApiResource::erase::<AWSCluster>(&()));
    let (bad, good) = (
        format!("{}-bad", scope.name),
        format!("{}-good", scope.name),
    );
    let bad_labels = |cluster: &str| {
        serde_json::json!({
            "cluster.x-k8s.io/cluster-name": cluster,
            support::capa::CREATED_BEFORE_WEBHOOK: "true",
        })
    };
    create(
        &api,
        serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster",
            // As if created before CAPA's webhook was installed (the one way such an object
            // exists on a real management cluster): the test environment's CAPA webhooks skip
            // objects with this label, and only these (scripts/go/capa-webhooks).
            "metadata": {"name": bad, "labels": bad_labels(&bad)},
            "spec": {"region": "us-east-1", "network": "not an object"},
        }),
    )
    .await;
    // The good one as Cluster API makes it: owned by its Cluster, which references it (without
    // that proof its teardown would be held, not released).
    support::capa::aws_cluster(&c, &ns, &good, &[]).await;
    let good = support::capa::infra_name(&good);

    let gc = Sweeper::start_scoped(&scope, &GATES).await;
    assert!(
        eventually(T, || async {
            finalizers(&api, &good)
                .await
                .contains(&"sweeper.dev/external-resource-gc".to_string())
        })
        .await,
        "the good AWSCluster is served although another one cannot be decoded"
    );
    let reported = eventually(T, || async {
        support::objects::warnings_about(&c, &bad)
            .await
            .iter()
            .any(|w| w.starts_with("InvalidObject: ") && w.contains("spec.network"))
    })
    .await;
    assert!(
        reported,
        "a Warning Event names the field: {:?}",
        support::objects::warnings_about(&c, &bad).await
    );
    let bad_now = api.get(&bad).await.unwrap();
    let condition = bad_now.data["status"]["conditions"]
        .as_array()
        .and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == "ExternalResourcesDeleted")
                .cloned()
        })
        .expect("our condition on the undecodable object");
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], "InvalidObject");
    assert!(
        finalizers(&api, &bad).await.is_empty(),
        "nothing is taken on for it"
    );
    assert!(
        gc.metric("sweeper_invalid_objects_total{collector=\"external\",kind=\"AWSCluster\"}")
            .await
            >= 1.0
    );

    // Let go: the good one's teardown (nothing in AWS) releases it; the bad one has no finalizer.
    for n in [&good, &bad] {
        let _ = api.delete(n, &Default::default()).await;
    }
    let released = eventually(T, || async { api.get_opt(&good).await.unwrap().is_none() }).await;
    assert!(
        released,
        "the good AWSCluster is released after its teardown"
    );
    drop(gc);
    support::objects::install_sweeper_crds(&c).await;
}
