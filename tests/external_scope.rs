//! `--scope-namespaces` end to end: a sweeper scoped to namespace A tears down A's AWSCluster and
//! leaves one being deleted in namespace B alone (its finalizer and its AWS resources in
//! LocalStack), as another team's sweeper would need.

mod support;

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use std::time::Duration;
use support::aws::{clients, network, sg, sg_exists, tagged};
use support::capa::{FINALIZER, aws_cluster, infra_name};
use support::sweeper::{Sweeper, eventually};
use support::{TestScope, unique_name};
use sweeper::api::capa::AWSCluster;

const T: Duration = Duration::from_secs(60);

async fn finalizers(api: &Api<AWSCluster>, name: &str) -> Option<Vec<String>> {
    api.get_opt(name)
        .await
        .unwrap()
        .map(|o| o.finalizers().to_vec())
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_sweeper_scoped_to_one_namespace_leaves_another_namespaces_deletion_alone() {
    let mut scope_a = TestScope::new("scope-a").await;
    let mut scope_b = TestScope::new("scope-b").await;
    let (ns_a, ns_b) = (scope_a.namespace().await, scope_b.namespace().await);
    let c = scope_a.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let aws = clients().await;
    let net = network(&aws).await;
    let (cluster_a, cluster_b) = (unique_name("ca"), unique_name("cb"));
    let owned = |cluster: &str| tagged(&format!("kubernetes.io/cluster/{cluster}"), "owned");
    let sg_a = sg(
        &aws,
        &net.vpc,
        &format!("{cluster_a}-owned"),
        &owned(&cluster_a),
    )
    .await;
    let sg_b = sg(
        &aws,
        &net.vpc,
        &format!("{cluster_b}-owned"),
        &owned(&cluster_b),
    )
    .await;

    // B's object carries our finalizer (as another team's sweeper left it) and is being deleted.
    let api_b = aws_cluster(&c, &ns_b, &cluster_b, &[]).await;
    let name_b = infra_name(&cluster_b);
    let held = serde_json::json!({"metadata": {"finalizers": [FINALIZER]}});
    api_b
        .patch(&name_b, &PatchParams::default(), &Patch::Merge(&held))
        .await
        .unwrap();
    api_b.delete(&name_b, &Default::default()).await.unwrap();

    // Scoped to A's test scope: `--scope-namespaces <ns_a>` (and a Tenant selector, moot here).
    let _gc = Sweeper::start_scoped(
        &scope_a,
        &[
            "--feature-gates",
            "CascadeGC=false,TenantGC=false,ExternalResourceGC=true",
        ],
    )
    .await;
    let api_a = aws_cluster(&c, &ns_a, &cluster_a, &[]).await;
    let name_a = infra_name(&cluster_a);
    assert!(
        eventually(T, || async {
            finalizers(&api_a, &name_a)
                .await
                .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
        })
        .await,
        "A's cluster is guarded by the scoped sweeper"
    );
    api_a.delete(&name_a, &Default::default()).await.unwrap();
    assert!(
        eventually(T, || async { finalizers(&api_a, &name_a).await.is_none() }).await,
        "A's teardown finished and its finalizer was released"
    );
    assert!(
        !sg_exists(&aws, &sg_a).await,
        "A's owned security group deleted"
    );

    // By now the scoped sweeper has long listed and acted: B is as it was.
    assert_eq!(
        finalizers(&api_b, &name_b).await,
        Some(vec![FINALIZER.to_string()]),
        "B's finalizer is untouched"
    );
    assert!(
        sg_exists(&aws, &sg_b).await,
        "B's AWS resources are untouched"
    );

    // Let B's namespace go.
    let patch = serde_json::json!({"metadata": {"finalizers": null}});
    api_b
        .patch(&name_b, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}
