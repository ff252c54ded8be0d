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
use support::aws::{
    clients, instance, instance_state, lb_exists, network, nlb, sg, sg_exists, tagged, vpc_exists,
};
use support::capa::{
    CREATED_BEFORE_WEBHOOK, FINALIZER, aws_cluster, capa_conditions, capa_network, eks_cluster,
    eks_cluster_with, has_finalizer, infra_name, our_reason, set_status, template_cluster,
};
use support::sweeper::{Sweeper, eventually};
use support::{TestScope, unique_name};
use sweeper::api::capa::AWSCluster;
use sweeper_aws::testing::leaks::{
    bootstrap_bucket, bootstrap_object, bucket_exists, object_exists,
};

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
async fn release_by_hand<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
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

/// An AWSCluster whose spec and status name another team's resources (issue #76 item 3): its
/// primary and secondary control-plane load balancers by `name` (CAPA's webhook requires the
/// two to differ in name and scheme, the secondary an NLB), its bootstrap bucket by
/// `spec.s3Bucket.name` (CAPA admits the field only with its BootstrapFormatIgnition gate on,
/// as the test environment runs its webhook), a bastion whose `status.bastion.id` is the other
/// team's instance, `status.networkStatus` naming the other load balancers, and
/// `spec.network.vpc.id` the other team's CAPA VPC. Every sweeper task is opted in. Deleting it
/// tears down what carries its own CAPA tag (a group it made, the proof the teardown ran) and
/// nothing it merely names: sweeper finds what to delete by the cluster's tags, never by a
/// reference in the object.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_cluster_naming_another_teams_load_balancers_bucket_and_bastion_deletes_none_of_them() {
    let mut scope = TestScope::new("whose-ref").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let aws = clients().await;

    // The other team's cluster, as CAPA made it: its network, two API-server load balancers, a
    // bastion, a group, and the bucket with a control-plane machine's bootstrap data.
    let victim = unique_name("victim");
    let v_short = &victim[victim.len() - 6..];
    let v_capa = format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{victim}");
    let v_owned = tagged(&v_capa, "owned");
    let v_net = capa_network(&aws, &victim).await;
    let (lb_a, lb_b) = (format!("{v_short}-apiserver"), format!("{v_short}-int"));
    let lb_a_arn = nlb(&aws, &v_net, &lb_a, &v_owned).await;
    let lb_b_arn = nlb(&aws, &v_net, &lb_b, &v_owned).await;
    let mut bastion_tags = v_owned.clone();
    bastion_tags.push((
        "sigs.k8s.io/cluster-api-provider-aws/role".into(),
        "bastion".into(),
    ));
    let bastion = instance(&aws, &v_net.subnet, &bastion_tags).await;
    let v_sg = sg(&aws, &v_net.vpc, &format!("{victim}-bastion"), &v_owned).await;
    let bucket = format!("{victim}-boot");
    bootstrap_bucket(&aws, &bucket, &[(v_capa.as_str(), "owned")]).await;
    let key = format!("control-plane/{victim}-control-plane-x7k2p");
    bootstrap_object(&aws, &bucket, &key).await;

    // Mallory's cluster, pointing at all of it; the one thing of hers is a group in the VPC she
    // named, tagged as CAPA tags what it makes for her cluster.
    let mallory = unique_name("mallory");
    let m_capa = format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{mallory}");
    let m_sg = sg(
        &aws,
        &v_net.vpc,
        &format!("{mallory}-node"),
        &tagged(&m_capa, "owned"),
    )
    .await;
    let infra = template_cluster(&c, &ns, &mallory, |ac| {
        ac["metadata"]["annotations"]["sweeper.dev/gc-tasks"] = json!(
            "dns-record,load-balancer,target-group,instance,launch-template,instance-profile,\
             oidc-provider,eks-log-group,instance-state-queue,bootstrap-data,bootstrap-data-s3,\
             ebs-volume,ebs-snapshot,security-group,eks-security-group,shared-tag"
        );
        let spec = &mut ac["spec"];
        spec["controlPlaneLoadBalancer"]["name"] = json!(lb_a);
        spec["controlPlaneLoadBalancer"]["scheme"] = json!("internet-facing");
        spec["secondaryControlPlaneLoadBalancer"] =
            json!({"name": lb_b, "scheme": "internal", "loadBalancerType": "nlb"});
        spec["s3Bucket"] = json!({
            "name": bucket,
            "controlPlaneIAMInstanceProfile": "control-plane.cluster-api-provider-aws.sigs.k8s.io",
            "nodesIAMInstanceProfiles": ["nodes.cluster-api-provider-aws.sigs.k8s.io"],
        });
        spec["bastion"] = json!({"enabled": true});
        spec["network"]["vpc"]["id"] = json!(v_net.vpc);
    })
    .await;
    let lb_status = |name: &str, arn: &str, scheme: &str| json!({"name": name, "arn": arn, "scheme": scheme, "loadBalancerType": "nlb"});
    set_status(
        &infra,
        &mallory,
        json!({
            "ready": true,
            "bastion": {"id": bastion, "instanceState": "running"},
            "networkStatus": {
                "apiServerElb": lb_status(&lb_a, &lb_a_arn, "internet-facing"),
                "secondaryAPIServerELB": lb_status(&lb_b, &lb_b_arn, "internal"),
            },
            "conditions": capa_conditions(),
        }),
    )
    .await;
    let stored = infra.get(&mallory).await.unwrap();
    assert_eq!(
        (
            stored.data["spec"]["secondaryControlPlaneLoadBalancer"]["name"].as_str(),
            stored.data["spec"]["s3Bucket"]["name"].as_str(),
            stored.data["status"]["bastion"]["id"].as_str(),
        ),
        (
            Some(lb_b.as_str()),
            Some(bucket.as_str()),
            Some(bastion.as_str())
        ),
        "CAPA's admission kept every reference: {:?}",
        stored.data
    );

    let _gc = sweeper(&[&ns], &[]).await;
    assert!(eventually(T, || has_finalizer(&infra, &mallory)).await);
    infra.delete(&mallory, &Default::default()).await.unwrap();
    assert!(
        eventually(T, || support::capa::gone(&infra, &mallory)).await,
        "the teardown finishes and releases the object: {:?}",
        our_reason(&infra, &mallory).await
    );
    assert!(
        !sg_exists(&aws, &m_sg).await,
        "the teardown ran: the group tagged for Mallory's cluster is gone"
    );
    for (what, arn) in [("primary", &lb_a_arn), ("secondary", &lb_b_arn)] {
        assert!(
            lb_exists(&aws, arn).await,
            "the {what} load balancer it named stays"
        );
    }
    let state = instance_state(&aws, &bastion).await;
    assert!(
        !matches!(state.as_str(), "terminated" | "shutting-down"),
        "the bastion instance it named runs on: {state}"
    );
    assert!(
        bucket_exists(&aws, &bucket).await && object_exists(&aws, &bucket, &key).await,
        "the bucket it named and its bootstrap data stay"
    );
    assert!(
        vpc_exists(&aws, &v_net.vpc).await && sg_exists(&aws, &v_sg).await,
        "the VPC it named and the other team's group in it stay"
    );
}

/// A control plane without `spec.eksClusterName` (created before CAPA's defaulting webhook saw
/// it: the test environment's bypass label) has the EKS name CAPA's defaulter gives it,
/// `<namespace>_<name>` (`eks.GenerateEKSName`), and that name is claimed like a stated one: a
/// second control plane in another namespace stating it holds both, nothing tagged for the
/// name is deleted; once only the first claims it, its teardown deletes by the derived name.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn an_empty_eks_name_is_capas_default_and_a_collision_on_it_is_refused() {
    let mut scope_a = TestScope::new("eksdef-a").await;
    let mut scope_b = TestScope::new("eksdef-b").await;
    let (ns_a, ns_b) = (scope_a.namespace().await, scope_b.namespace().await);
    let c = scope_a.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let region = support::EnvFacts::load().get("AWS_REGION");
    let aws = clients().await;
    let net = network(&aws).await;

    let name_a = unique_name("eksa");
    let (cps_a, _managed_a, cp_a) = eks_cluster_with(&c, &ns_a, &name_a, &region, |cp| {
        cp["metadata"]["labels"][CREATED_BEFORE_WEBHOOK] = json!("true");
        if let Some(spec) = cp["spec"].as_object_mut() {
            spec.remove("eksClusterName");
        }
    })
    .await;
    let stored = cps_a.get(&cp_a).await.unwrap();
    assert!(
        stored.data["spec"]["eksClusterName"].is_null(),
        "stored without an EKS name: {:?}",
        stored.data["spec"]
    );
    // CAPA's GenerateEKSName for a short name: namespace, `_`, the name (dots to `_`).
    let derived = format!("{ns_a}_{}", cp_a.replace('.', "_"));
    let eks_key = format!("kubernetes.io/cluster/{derived}");
    let group = sg(
        &aws,
        &net.vpc,
        &format!("{name_a}-svc"),
        &tagged(&eks_key, "owned"),
    )
    .await;
    let name_b = unique_name("eksb");
    let (cps_b, _managed_b, cp_b) = eks_cluster(&c, &ns_b, &name_b, &region, &derived).await;

    let _gc = sweeper(&[&ns_a, &ns_b], &[]).await;
    assert!(eventually(T, || has_finalizer(&cps_a, &cp_a)).await);
    assert!(eventually(T, || has_finalizer(&cps_b, &cp_b)).await);
    cps_a.delete(&cp_a, &Default::default()).await.unwrap();
    let held = eventually(T, || async {
        our_reason(&cps_a, &cp_a).await.as_deref() == Some("NameCollision")
    })
    .await;
    assert!(
        held,
        "held on the derived name: {:?}",
        our_reason(&cps_a, &cp_a).await
    );
    let told = eventually(T, || async {
        our_reason(&cps_b, &cp_b).await.as_deref() == Some("NameCollision")
    })
    .await;
    assert!(
        told,
        "the other claimant hears of it: {:?}",
        our_reason(&cps_b, &cp_b).await
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        sg_exists(&aws, &group).await,
        "nothing tagged for the derived name is deleted while two claim it"
    );

    // B's team deletes theirs (released by hand: it is held the same way); A then claims the
    // derived name alone and its teardown deletes by it.
    cps_b.delete(&cp_b, &Default::default()).await.unwrap();
    release_by_hand(&cps_b, &cp_b).await;
    assert!(eventually(T, || support::capa::gone(&cps_b, &cp_b)).await);
    assert!(
        eventually(T, || support::capa::gone(&cps_a, &cp_a)).await,
        "one claimant left: the teardown finishes: {:?}",
        our_reason(&cps_a, &cp_a).await
    );
    assert!(
        !sg_exists(&aws, &group).await,
        "phase 2 ran on the derived name"
    );
}
