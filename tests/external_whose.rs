//! Whose cluster (docs/capa.md, "Whose cluster"): nobody can point sweeper at a cluster that is
//! not theirs. The name comes only from the owner Cluster that references the object, a name two
//! objects claim in one account and region is refused on both, the opt-out reads as CAPA reads
//! it, and a dry run never holds a deletion (the hand-back to CAPA's gc).
//!
//! Every object goes through CAPA's and Cluster API's CRDs and webhooks (the test environment);
//! the AWS resources are LocalStack's, in the default account, found by their tags.

mod support;

use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use std::time::Duration;
use support::aws::{clients, network, sg, sg_exists, tagged};
use support::capa::{FINALIZER, aws_cluster, infra_name};
use support::sweeper::{Sweeper, eventually};
use support::{TestScope, unique_name};
use sweeper::api::capa::AWSCluster;

const T: Duration = Duration::from_secs(90);
const GATES: &str = "CascadeGC=false,TenantGC=false,ExternalResourceGC=true";

/// A sweeper watching exactly `namespaces`.
async fn sweeper(namespaces: &[&str], extra: &[&str]) -> Sweeper {
    let scope = namespaces.join(",");
    let mut args = vec!["--feature-gates", GATES, "--scope-namespaces", &scope];
    args.extend_from_slice(extra);
    Sweeper::start(&args).await
}

async fn guarded(api: &Api<AWSCluster>, name: &str) -> bool {
    eventually(T, || async {
        api.get_opt(name)
            .await
            .unwrap()
            .is_some_and(|o| o.finalizers().iter().any(|f| f == FINALIZER))
    })
    .await
}

/// Our condition's reason on the object, if any.
async fn reason(api: &Api<AWSCluster>, name: &str) -> Option<String> {
    let o = api.get_opt(name).await.unwrap()?;
    let v = serde_json::to_value(&o).unwrap();
    v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ExternalResourcesDeleted")
        .and_then(|c| c["reason"].as_str().map(str::to_string))
}

async fn reaches_reason(api: &Api<AWSCluster>, name: &str, want: &str) -> bool {
    eventually(T, || async {
        reason(api, name).await.as_deref() == Some(want)
    })
    .await
}

/// What an administrator does to let an object go without a teardown (docs/capa.md).
async fn release_by_hand(api: &Api<AWSCluster>, name: &str) {
    let Some(o) = api.get_opt(name).await.unwrap() else {
        return;
    };
    let kept: Vec<String> = o
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    let patch = json!({"metadata": {"finalizers": kept, "resourceVersion": o.resource_version()}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn gone(api: &Api<AWSCluster>, name: &str) -> bool {
    eventually(T, || async { api.get_opt(name).await.unwrap().is_none() }).await
}

/// An AWSCluster in `ns` that only *says* it is cluster `claimed` (the label), with no owner.
async fn labelled_only(c: &Client, ns: &str, name: &str, claimed: &str) -> Api<AWSCluster> {
    let api: Api<AWSCluster> = Api::namespaced(c.clone(), ns);
    let mut ac = AWSCluster::new(name, Default::default());
    ac.metadata.labels = Some(
        [(
            "cluster.x-k8s.io/cluster-name".to_string(),
            claimed.to_string(),
        )]
        .into(),
    );
    api.create(&PostParams::default(), &ac).await.unwrap();
    api
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_label_or_a_look_alike_cluster_in_another_namespace_deletes_nothing_of_the_victims() {
    let mut victim_scope = TestScope::new("whose-a").await;
    let mut mallory_scope = TestScope::new("whose-m").await;
    let (ns_a, ns_m) = (
        victim_scope.namespace().await,
        mallory_scope.namespace().await,
    );
    let c = victim_scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let aws = clients().await;
    let net = network(&aws).await;
    let victim = unique_name("victim");
    let victims_sg = sg(
        &aws,
        &net.vpc,
        &format!("{victim}-lb"),
        &tagged(&format!("kubernetes.io/cluster/{victim}"), "owned"),
    )
    .await;
    let victim_api = aws_cluster(&c, &ns_a, &victim, &[]).await;
    let _gc = sweeper(&[&ns_a, &ns_m], &[]).await;
    assert!(guarded(&victim_api, &infra_name(&victim)).await);

    // 1. Only the label names the victim: no owner, so nothing is proven.
    let forged = format!("{victim}-forged");
    let m_api = labelled_only(&c, &ns_m, &forged, &victim).await;
    assert!(guarded(&m_api, &forged).await, "guarded from creation");
    m_api.delete(&forged, &Default::default()).await.unwrap();
    assert!(
        reaches_reason(&m_api, &forged, "OwnerNotProven").await,
        "the forged object says why: {:?}",
        reason(&m_api, &forged).await
    );
    let warned = eventually(T, || async {
        support::objects::warnings_about(&c, &forged)
            .await
            .iter()
            .any(|w| w.starts_with("OwnerNotProven: "))
    })
    .await;
    assert!(warned, "a Warning Event says why");
    assert!(
        sg_exists(&aws, &victims_sg).await,
        "the victim's group stays"
    );
    assert!(
        m_api.get_opt(&forged).await.unwrap().is_some(),
        "its finalizer stays until an administrator releases it"
    );

    // 2. A real Cluster of the victim's name in namespace m owns a second AWSCluster: proven in
    // m, but the name is the victim's too, in the same account and region.
    let look_alike = aws_cluster(&c, &ns_m, &victim, &[]).await;
    assert!(guarded(&look_alike, &infra_name(&victim)).await);
    look_alike
        .delete(&infra_name(&victim), &Default::default())
        .await
        .unwrap();
    assert!(
        reaches_reason(&look_alike, &infra_name(&victim), "NameCollision").await,
        "the look-alike is held: {:?}",
        reason(&look_alike, &infra_name(&victim)).await
    );
    assert!(
        reaches_reason(&victim_api, &infra_name(&victim), "NameCollision").await,
        "the victim's object hears of it too"
    );
    // Held, not racing: several passes later the group is still there.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        sg_exists(&aws, &victims_sg).await,
        "the victim's group stays"
    );
    assert!(
        victim_api
            .get_opt(&infra_name(&victim))
            .await
            .unwrap()
            .is_some()
    );

    release_by_hand(&m_api, &forged).await;
    release_by_hand(&look_alike, &infra_name(&victim)).await;
    assert!(sg_exists(&aws, &victims_sg).await);
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn two_live_clusters_of_one_name_hold_until_only_one_claims_it() {
    let mut scope_a = TestScope::new("dup-a").await;
    let mut scope_b = TestScope::new("dup-b").await;
    let (ns_a, ns_b) = (scope_a.namespace().await, scope_b.namespace().await);
    let c = scope_a.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let aws = clients().await;
    let net = network(&aws).await;
    let name = unique_name("dup");
    let shared_name_sg = sg(
        &aws,
        &net.vpc,
        &format!("{name}-lb"),
        &tagged(&format!("kubernetes.io/cluster/{name}"), "owned"),
    )
    .await;
    let a = aws_cluster(&c, &ns_a, &name, &[]).await;
    let b = aws_cluster(&c, &ns_b, &name, &[]).await;
    let _gc = sweeper(&[&ns_a, &ns_b], &[]).await;
    let infra = infra_name(&name);
    assert!(guarded(&a, &infra).await && guarded(&b, &infra).await);

    a.delete(&infra, &Default::default()).await.unwrap();
    assert!(
        reaches_reason(&a, &infra, "NameCollision").await,
        "{:?}",
        reason(&a, &infra).await
    );
    // The Event follows the condition.
    let named = eventually(T, || async {
        support::objects::warnings_about(&c, &infra)
            .await
            .iter()
            .any(|w| w.starts_with("NameCollision: ") && w.contains(&ns_b))
    })
    .await;
    assert!(
        named,
        "the Event names the other object: {:?}",
        support::objects::warnings_about(&c, &infra).await
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        sg_exists(&aws, &shared_name_sg).await,
        "nothing of the name is deleted while two objects claim it"
    );

    // The other one goes (its team deletes it; an administrator releases it, since it is held
    // the same way): then the first teardown proceeds.
    b.delete(&infra, &Default::default()).await.unwrap();
    release_by_hand(&b, &infra).await;
    assert!(gone(&b, &infra).await);
    assert!(
        gone(&a, &infra).await,
        "with one claimant left the teardown finishes: {:?}",
        reason(&a, &infra).await
    );
    assert!(
        !sg_exists(&aws, &shared_name_sg).await,
        "and deletes the group"
    );
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn handing_back_live_then_dry_run_then_capas_gate_releases_every_deleted_cluster() {
    let mut scope = TestScope::new("handback").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let aws = clients().await;
    let net = network(&aws).await;
    let (c1, c2, c3) = (unique_name("hb1"), unique_name("hb2"), unique_name("hb3"));
    let owned = |n: &str| tagged(&format!("kubernetes.io/cluster/{n}"), "owned");
    let sg1 = sg(&aws, &net.vpc, &format!("{c1}-lb"), &owned(&c1)).await;
    let sg2 = sg(&aws, &net.vpc, &format!("{c2}-lb"), &owned(&c2)).await;

    // Live: a deleted cluster is torn down and released.
    let live = sweeper(&[&ns], &[]).await;
    let api1 = aws_cluster(&c, &ns, &c1, &[]).await;
    let api2 = aws_cluster(&c, &ns, &c2, &[]).await;
    assert!(guarded(&api1, &infra_name(&c1)).await && guarded(&api2, &infra_name(&c2)).await);
    api1.delete(&infra_name(&c1), &Default::default())
        .await
        .unwrap();
    assert!(gone(&api1, &infra_name(&c1)).await, "live: released");
    assert!(!sg_exists(&aws, &sg1).await, "live: torn down");
    drop(live);

    // Dry run (hand-back step 1): c2 still carries the finalizer from the live days. Deleting it
    // reports the plan and releases it; nothing is deleted.
    let _dry = sweeper(&[&ns], &["--external-dry-run"]).await;
    api2.delete(&infra_name(&c2), &Default::default())
        .await
        .unwrap();
    assert!(
        gone(&api2, &infra_name(&c2)).await,
        "dry run never holds a deletion: {:?}",
        reason(&api2, &infra_name(&c2)).await
    );
    assert!(sg_exists(&aws, &sg2).await, "dry run deleted nothing");

    // CAPA's gate on (step 2): a cluster made now never gets sweeper's finalizer, and its
    // deletion is CAPA's alone.
    let api3 = aws_cluster(&c, &ns, &c3, &[]).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let o3 = api3.get(&infra_name(&c3)).await.unwrap();
    assert!(!o3.finalizers().iter().any(|f| f == FINALIZER));
    api3.delete(&infra_name(&c3), &Default::default())
        .await
        .unwrap();
    assert!(gone(&api3, &infra_name(&c3)).await);
}

/// What CAPA's strconv.ParseBool reads as false opts out (phase 2 keeps the group), as true opts
/// in (the group goes); every spelling is in the unit table (annotations/tests.rs).
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn capas_spellings_of_the_opt_out_mean_what_they_mean_to_capa() {
    let mut scope = TestScope::new("parsebool").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let aws = clients().await;
    let net = network(&aws).await;
    let cases: [(&str, bool); 2] = [("False", false), ("T", true)];
    let _gc = sweeper(&[&ns], &[]).await;
    let mut made: Vec<(Api<AWSCluster>, String, String, bool)> = Vec::new();
    for (value, collect) in cases {
        let name = unique_name("pb");
        let group = sg(
            &aws,
            &net.vpc,
            &format!("{name}-lb"),
            &tagged(&format!("kubernetes.io/cluster/{name}"), "owned"),
        )
        .await;
        let api = aws_cluster(
            &c,
            &ns,
            &name,
            &[("aws.cluster.x-k8s.io/external-resource-gc", value)],
        )
        .await;
        assert!(guarded(&api, &infra_name(&name)).await, "{value}");
        api.delete(&infra_name(&name), &Default::default())
            .await
            .unwrap();
        made.push((api, infra_name(&name), group, collect));
    }
    for (api, name, group, collect) in made {
        assert!(gone(&api, &name).await, "{name} is released");
        assert_eq!(!sg_exists(&aws, &group).await, collect, "{name}");
    }
}
