//! `sweeper gc enable|disable|configure` against the real apiserver: resolves the CAPI Cluster's
//! control-plane or infrastructure reference and sets CAPA's and sweeper's annotations on it
//! (tasks: tests/external_tasks.rs).

mod support;

use kube::api::PostParams;
use kube::{Api, ResourceExt};
use support::TestScope;
use support::aws::sweeper_gc;
use sweeper::api::capa::{AWSCluster, AWSManagedControlPlane, Cluster, ClusterSpec, ObjectRef};

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn enable_disable_configure_annotate_the_aws_cluster() {
    let mut s = TestScope::new("gccli").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let infra: Api<AWSCluster> = Api::namespaced(c.clone(), &ns);
    // Unknown fields (as real CAPA objects have) are accepted and kept.
    let mut ac: AWSCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster",
        "metadata": {"name": "c1-infra"},
        "spec": {"region": "us-east-1", "sshKeyName": "default", "network": {"vpc": {"cidrBlock": "10.0.0.0/16"}}}
    }))
    .unwrap();
    ac.metadata.namespace = Some(ns.clone());
    infra.create(&PostParams::default(), &ac).await.unwrap();
    let cluster = Cluster::new(
        "c1",
        ClusterSpec {
            infrastructure_ref: Some(ObjectRef {
                api_version: Some("infrastructure.cluster.x-k8s.io/v1beta2".into()),
                api_group: None,
                kind: Some("AWSCluster".into()),
                name: Some("c1-infra".into()),
                namespace: None,
            }),
            control_plane_ref: None,
            paused: None,
        },
    );
    Api::<Cluster>::namespaced(c.clone(), &ns)
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    let ann = |k: &'static str| {
        let infra = infra.clone();
        async move {
            infra
                .get("c1-infra")
                .await
                .unwrap()
                .annotations()
                .get(k)
                .cloned()
        }
    };

    let (ok, out) = sweeper_gc(&["disable", "--cluster-name", "c1", "-n", &ns]);
    assert!(ok, "{out}");
    assert_eq!(
        ann("aws.cluster.x-k8s.io/external-resource-gc")
            .await
            .as_deref(),
        Some("false")
    );
    let (ok, out) = sweeper_gc(&["enable", "--cluster-name", "c1", "-n", &ns]);
    assert!(ok && out.contains("AWSCluster"), "{out}");
    assert_eq!(
        ann("aws.cluster.x-k8s.io/external-resource-gc")
            .await
            .as_deref(),
        Some("true")
    );
    let (ok, out) = sweeper_gc(&[
        "configure",
        "--cluster-name",
        "c1",
        "-n",
        &ns,
        "--gc-task",
        "load-balancer",
        "--gc-task",
        "security-group",
    ]);
    assert!(ok, "{out}");
    // CAPA's three tasks: both annotations get them (issue #41).
    assert_eq!(
        ann("aws.cluster.x-k8s.io/external-resource-tasks-gc")
            .await
            .as_deref(),
        Some("load-balancer,security-group")
    );
    assert_eq!(
        ann("sweeper.dev/gc-tasks").await.as_deref(),
        Some("load-balancer,security-group")
    );
    // One of sweeper's own tasks: sweeper's annotation only, never CAPA's.
    let (ok, out) = sweeper_gc(&[
        "configure",
        "--cluster-name",
        "c1",
        "-n",
        &ns,
        "--gc-task",
        "instance,security-group",
    ]);
    assert!(ok, "{out}");
    assert_eq!(
        ann("aws.cluster.x-k8s.io/external-resource-tasks-gc")
            .await
            .as_deref(),
        Some("security-group")
    );
    assert_eq!(
        ann("sweeper.dev/gc-tasks").await.as_deref(),
        Some("instance,security-group")
    );
    let (ok, out) = sweeper_gc(&["configure", "--cluster-name", "c1", "-n", &ns]);
    assert!(ok, "{out}");
    assert_eq!(
        ann("aws.cluster.x-k8s.io/external-resource-tasks-gc").await,
        None,
        "no task removes the annotation"
    );
    assert_eq!(ann("sweeper.dev/gc-tasks").await, None, "and sweeper's");
    let owner = || ann("sweeper.dev/external-dns-owner-id");
    let (ok, out) = sweeper_gc(&[
        "configure",
        "--cluster-name",
        "c1",
        "-n",
        &ns,
        "--external-dns-owner-id",
        "prod-eu-1",
    ]);
    assert!(ok && out.contains("prod-eu-1"), "{out}");
    assert_eq!(owner().await.as_deref(), Some("prod-eu-1"));
    let (ok, out) = sweeper_gc(&["configure", "--cluster-name", "c1", "-n", &ns]);
    assert!(ok, "{out}");
    assert_eq!(
        owner().await.as_deref(),
        Some("prod-eu-1"),
        "not given: the owner id is left as it is"
    );
    let (ok, out) = sweeper_gc(&[
        "configure",
        "--cluster-name",
        "c1",
        "-n",
        &ns,
        "--external-dns-owner-id",
        "default",
    ]);
    assert!(!ok && out.contains("default"), "{out}");
    assert_eq!(
        owner().await.as_deref(),
        Some("prod-eu-1"),
        "refused: unchanged"
    );
    let (ok, out) = sweeper_gc(&[
        "configure",
        "--cluster-name",
        "c1",
        "-n",
        &ns,
        "--external-dns-owner-id",
        "",
    ]);
    assert!(ok, "{out}");
    assert_eq!(owner().await, None, "\"\" removes it");
    let kept = infra.get("c1-infra").await.unwrap();
    assert_eq!(kept.spec.region.as_deref(), Some("us-east-1"));

    let (ok, out) = sweeper_gc(&["enable", "--cluster-name", "nope", "-n", &ns]);
    assert!(
        !ok && out.contains("nope"),
        "a missing cluster is a clear error: {out}"
    );
    let (ok, out) = sweeper_gc(&[
        "configure",
        "--cluster-name",
        "c1",
        "-n",
        &ns,
        "--gc-task",
        "nat-gateway",
    ]);
    assert!(!ok && out.contains("nat-gateway"), "{out}");
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn eks_clusters_are_annotated_on_the_managed_control_plane() {
    let mut s = TestScope::new("gccli-eks").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let cps: Api<AWSManagedControlPlane> = Api::namespaced(c.clone(), &ns);
    let mut cp = AWSManagedControlPlane::new("c2-cp", Default::default());
    cp.spec.eks_cluster_name = Some("eks-c2".into());
    cp.metadata.namespace = Some(ns.clone());
    cps.create(&PostParams::default(), &cp).await.unwrap();
    let cluster = Cluster::new(
        "c2",
        ClusterSpec {
            infrastructure_ref: Some(ObjectRef {
                api_version: Some("infrastructure.cluster.x-k8s.io/v1beta2".into()),
                api_group: None,
                kind: Some("AWSManagedCluster".into()),
                name: Some("c2".into()),
                namespace: None,
            }),
            control_plane_ref: Some(ObjectRef {
                api_version: Some("controlplane.cluster.x-k8s.io/v1beta2".into()),
                api_group: None,
                kind: Some("AWSManagedControlPlane".into()),
                name: Some("c2-cp".into()),
                namespace: None,
            }),
            paused: None,
        },
    );
    Api::<Cluster>::namespaced(c.clone(), &ns)
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    let (ok, out) = sweeper_gc(&["disable", "--cluster-name", "c2", "-n", &ns]);
    assert!(ok && out.contains("AWSManagedControlPlane"), "{out}");
    let got = cps.get("c2-cp").await.unwrap();
    assert_eq!(
        got.annotations()
            .get("aws.cluster.x-k8s.io/external-resource-gc")
            .map(String::as_str),
        Some("false")
    );
}
