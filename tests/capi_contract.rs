//! Cluster API's contract (issue 32), against Cluster API's and CAPA's own CRDs (from
//! `scripts/fixtures.sh`, adjusted for the 1.20 test server as support::conformance says),
//! objects from CAPA's own templates and their AWS resources in LocalStack, with `sweeper run`:
//! - `clusterctl move`'s sequence (pause, mark, strip finalizers, delete, a few seconds apart)
//!   keeps every AWS resource of the moved cluster;
//! - a paused Cluster (v1beta2 here, v1beta1 elsewhere) or the `cluster.x-k8s.io/paused`
//!   annotation (on an AWSCluster and on an AWSManagedControlPlane) holds a deletion, with its
//!   finalizer, until unpaused, while a neighbour in the same namespace is torn down as before;
//! - an externally managed AWSCluster is never held and never torn down;
//! - a finalizer removed by hand from a paused cluster's object is not put back, and comes back
//!   at once when the Cluster is unpaused (the Cluster watch, not a requeue).

mod support;

use kube::api::DynamicObject;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use std::time::Duration;
use support::aws::{
    Net, clients, gc_plan, lb_exists, network, nlb, sg, sg_exists, tag, tagged, vpc_exists,
};
use support::capa::{
    annotate, api, create, eks_cluster, from_template, gone, has_finalizer, merge, our_reason,
    owned_by_cluster, strip_finalizers, template_cluster, upstream_crds, vars,
};
use support::sweeper::{Sweeper, eventually};
use support::{EnvFacts, TestScope, unique_name};
use sweeper_aws::phases::AwsClients;

const T: Duration = Duration::from_secs(90);
/// "Nothing changes for a while": several of sweeper's reconciles and Cluster-watch events.
const A_WHILE: Duration = Duration::from_secs(6);
/// Between two steps of `clusterctl move`, as its retries and backoff allow.
const STEP: Duration = Duration::from_secs(3);
const GATES: [&str; 2] = [
    "--feature-gates",
    "CascadeGC=false,TenantGC=false,ExternalResourceGC=true",
];
const PAUSED: &str = "cluster.x-k8s.io/paused";
const MOVE: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";
const MANAGED_BY: &str = "cluster.x-k8s.io/managed-by";

/// What CAPA and the cloud provider made for one cluster: a CAPA network (VPC, subnet, internet
/// gateway), its node security group and API server NLB, and a Service's NLB with its target
/// group and an `owned` security group.
struct World {
    net: Net,
    igw: String,
    node_sg: String,
    apiserver_lb: String,
    service_lb: String,
    service_tg: String,
    owned_sg: String,
}

async fn world(aws: &AwsClients, name: &str) -> World {
    let capa_key = format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{name}");
    let owned = tagged(&format!("kubernetes.io/cluster/{name}"), "owned");
    let net = support::capa::capa_network(aws, name).await;
    let igw = aws
        .ec2
        .create_internet_gateway()
        .send()
        .await
        .unwrap()
        .internet_gateway
        .and_then(|g| g.internet_gateway_id)
        .unwrap();
    aws.ec2
        .attach_internet_gateway()
        .internet_gateway_id(&igw)
        .vpc_id(&net.vpc)
        .send()
        .await
        .unwrap();
    tag(aws, &igw, &capa_key, "owned").await;
    let node_sg = sg(
        aws,
        &net.vpc,
        &format!("{name}-node"),
        &tagged(&capa_key, "owned"),
    )
    .await;
    let short = &name[name.len() - 6..];
    let apiserver_lb = nlb(
        aws,
        &net,
        &format!("{short}-apiserver"),
        &tagged(&capa_key, "owned"),
    )
    .await;
    let service_lb = nlb(aws, &net, &format!("{short}-svc"), &owned).await;
    let service_tg =
        sweeper_aws::testing::build::tg(aws, &format!("{short}-tg"), &net.vpc, &owned).await;
    let owned_sg = sg(aws, &net.vpc, &format!("{name}-svc"), &owned).await;
    World {
        net,
        igw,
        node_sg,
        apiserver_lb,
        service_lb,
        service_tg,
        owned_sg,
    }
}

async fn igw_exists(aws: &AwsClients, id: &str) -> bool {
    match aws
        .ec2
        .describe_internet_gateways()
        .internet_gateway_ids(id)
        .send()
        .await
    {
        Ok(out) => !out.internet_gateways().is_empty(),
        Err(e) => {
            let text = format!("{e:?}");
            assert!(text.contains("NotFound"), "describe {id}: {text}");
            false
        }
    }
}

impl World {
    /// Which of the seven resources still exist, by name.
    async fn present(&self, aws: &AwsClients) -> Vec<&'static str> {
        let probes = [
            ("vpc", vpc_exists(aws, &self.net.vpc).await),
            ("internet gateway", igw_exists(aws, &self.igw).await),
            ("node security group", sg_exists(aws, &self.node_sg).await),
            ("API server NLB", lb_exists(aws, &self.apiserver_lb).await),
            ("Service NLB", lb_exists(aws, &self.service_lb).await),
            (
                "Service target group",
                support::aws::tg_exists(aws, &self.service_tg).await,
            ),
            ("owned security group", sg_exists(aws, &self.owned_sg).await),
        ];
        probes
            .into_iter()
            .filter(|(_, p)| *p)
            .map(|(n, _)| n)
            .collect()
    }

    async fn assert_intact(&self, aws: &AwsClients, why: &str) {
        let present = self.present(aws).await;
        assert_eq!(present.len(), 7, "{why}: only {present:?} are left");
    }

    async fn assert_torn_down(&self, aws: &AwsClients) {
        let present = self.present(aws).await;
        assert!(present.is_empty(), "torn down, yet {present:?} are left");
    }
}

/// The deletion waits: our condition says `Paused` (so CAPA's schema accepted it), and a while
/// later the finalizer still holds.
async fn waits_paused(api: &Api<DynamicObject>, name: &str) {
    assert!(
        eventually(T, || async {
            our_reason(api, name).await.as_deref() == Some("Paused")
        })
        .await,
        "the wait is on the object, accepted by CAPA's schema"
    );
    tokio::time::sleep(A_WHILE).await;
    assert!(has_finalizer(api, name).await, "the finalizer holds");
}

fn clusters(c: &kube::Client, ns: &str, version: &str) -> Api<DynamicObject> {
    api(c, ns, &format!("cluster.x-k8s.io/{version}"), "Cluster")
}

/// Sets `spec.paused` through `version`, the one the Cluster was written at: without Cluster API's
/// conversion webhook a Cluster written at v1beta1 fails v1beta2's validation (its refs lack
/// `apiGroup`), as the conformance README says.
async fn set_paused(c: &kube::Client, ns: &str, name: &str, version: &str, paused: bool) {
    merge(
        &clusters(c, ns, version),
        name,
        json!({"spec": {"paused": paused}}),
    )
    .await;
}

/// A Cluster written at v1beta2 (refs `{apiGroup, kind, name}`) and its AWSCluster from CAPA's
/// template, owned by it; returns the AWSCluster API.
async fn v1beta2_cluster(c: &kube::Client, ns: &str, name: &str) -> Api<DynamicObject> {
    let cluster = create(
        &clusters(c, ns, "v1beta2"),
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "paused": false,
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSCluster", "name": name},
                "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": format!("{name}-control-plane")},
            },
        }),
    )
    .await;
    let region = EnvFacts::load().get("AWS_REGION");
    let mut ac = from_template(
        "capa/templates/cluster-template.yaml",
        "AWSCluster",
        &vars(name, &region),
    );
    owned_by_cluster(&mut ac, &cluster);
    let infra = api(
        c,
        ns,
        "infrastructure.cluster.x-k8s.io/v1beta2",
        "AWSCluster",
    );
    create(&infra, ac).await;
    infra
}

/// clusterctl move's source side, step by step with a pause between calls: nothing of the moved
/// cluster is touched in AWS, the finalizer is not put back in a gap, and the object goes.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn clusterctl_move_keeps_every_aws_resource_of_the_moved_cluster() {
    let mut scope = TestScope::new("capi-move").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let aws = clients().await;
    let name = unique_name("move");
    let w = world(&aws, &name).await;
    let infra = template_cluster(&c, &ns, &name, |ac| {
        ac["spec"]["network"]["vpc"]["id"] = json!(w.net.vpc);
    })
    .await;
    let _gc = Sweeper::start_scoped(&scope, &GATES).await;
    assert!(eventually(T, || has_finalizer(&infra, &name)).await);

    // 1. clusterctl pauses the Cluster (written at v1beta1 by the template; paused through v1beta1).
    merge(
        &clusters(&c, &ns, "v1beta1"),
        &name,
        json!({"spec": {"paused": true}}),
    )
    .await;
    tokio::time::sleep(STEP).await;
    // 2. marks the object for deletion by the move.
    annotate(&infra, &name, MOVE, Some("")).await;
    tokio::time::sleep(STEP).await;
    // 3. strips every finalizer.
    strip_finalizers(&infra, &name).await;
    tokio::time::sleep(STEP).await;
    assert!(
        !has_finalizer(&infra, &name).await,
        "sweeper did not put its finalizer back in the gap before the delete"
    );
    // 4. deletes it.
    infra.delete(&name, &Default::default()).await.unwrap();
    assert!(
        eventually(T, || gone(&infra, &name)).await,
        "the source object is gone"
    );
    tokio::time::sleep(A_WHILE).await;
    w.assert_intact(&aws, "the moved cluster lives on").await;
}

/// A paused Cluster (written at v1beta2) holds its AWSCluster's deletion with the finalizer and
/// no AWS change, says so on the object, in `sweeper status` and in `gc plan`; its unpaused
/// neighbour in the same namespace is torn down meanwhile; unpausing finishes the teardown.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_paused_clusters_deletion_waits_until_unpaused_while_its_neighbour_goes() {
    let mut scope = TestScope::new("capi-pause").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let aws = clients().await;
    let paused = unique_name("paused");
    let neighbour = unique_name("nbr");
    let wp = world(&aws, &paused).await;
    let wn = world(&aws, &neighbour).await;
    let infra = v1beta2_cluster(&c, &ns, &paused).await;
    merge(
        &infra,
        &paused,
        json!({"spec": {"network": {"vpc": {"id": wp.net.vpc}}}}),
    )
    .await;
    template_cluster(&c, &ns, &neighbour, |ac| {
        ac["spec"]["network"]["vpc"]["id"] = json!(wn.net.vpc);
    })
    .await;
    let gc = Sweeper::start_scoped(&scope, &GATES).await;
    assert!(eventually(T, || has_finalizer(&infra, &paused)).await);
    assert!(eventually(T, || has_finalizer(&infra, &neighbour)).await);

    set_paused(&c, &ns, &paused, "v1beta2", true).await;
    infra.delete(&paused, &Default::default()).await.unwrap();
    infra.delete(&neighbour, &Default::default()).await.unwrap();
    assert!(
        eventually(T, || gone(&infra, &neighbour)).await,
        "the unpaused neighbour is torn down as before"
    );
    wn.assert_torn_down(&aws).await;
    waits_paused(&infra, &paused).await;
    wp.assert_intact(&aws, "nothing in AWS changes while paused")
        .await;
    let (_, status) = gc.get("/status").await;
    let status: Value = serde_json::from_str(&status).unwrap();
    let label = format!("AWSCluster {ns}/{paused}");
    assert!(
        status["external_held"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["object"] == label.as_str() && h["state"] == "paused"),
        "sweeper status shows the pause: {status}"
    );
    assert!(
        status["teardowns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["object"] == label.as_str() && t["phase"] == "waiting: paused"),
        "{status}"
    );
    let plan = gc_plan(&paused, &ns);
    assert!(plan.contains("state: paused"), "{plan}");
    assert!(
        plan.contains(&wp.owned_sg),
        "what it would delete once unpaused: {plan}"
    );

    set_paused(&c, &ns, &paused, "v1beta2", false).await;
    assert!(
        eventually(T, || gone(&infra, &paused)).await,
        "unpausing resumes the teardown, which releases the finalizer"
    );
    wp.assert_torn_down(&aws).await;
}

/// `cluster.x-k8s.io/paused` on the AWSCluster holds its deletion; removing it resumes.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn the_paused_annotation_holds_an_aws_clusters_deletion() {
    let mut scope = TestScope::new("capi-pann").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let aws = clients().await;
    let name = unique_name("pann");
    let w = world(&aws, &name).await;
    let infra = template_cluster(&c, &ns, &name, |ac| {
        ac["spec"]["network"]["vpc"]["id"] = json!(w.net.vpc);
    })
    .await;
    let _gc = Sweeper::start_scoped(&scope, &GATES).await;
    assert!(eventually(T, || has_finalizer(&infra, &name)).await);

    annotate(&infra, &name, PAUSED, Some("")).await;
    infra.delete(&name, &Default::default()).await.unwrap();
    waits_paused(&infra, &name).await;
    w.assert_intact(&aws, "paused by annotation").await;

    annotate(&infra, &name, PAUSED, None).await;
    assert!(eventually(T, || gone(&infra, &name)).await);
    w.assert_torn_down(&aws).await;
}

/// The same on an EKS control plane (CAPA's EKS template).
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn the_paused_annotation_holds_an_eks_control_planes_deletion() {
    let mut scope = TestScope::new("capi-peks").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let aws = clients().await;
    let name = unique_name("peks");
    let owned = tagged(&format!("kubernetes.io/cluster/{name}"), "owned");
    let net = network(&aws).await;
    let owned_sg = sg(&aws, &net.vpc, &format!("{name}-svc"), &owned).await;
    let service_lb = nlb(
        &aws,
        &net,
        &format!("{}-svc", &name[name.len() - 6..]),
        &owned,
    )
    .await;
    let region = EnvFacts::load().get("AWS_REGION");
    let (cps, _managed, cp) = eks_cluster(&c, &ns, &name, &region, &name).await;
    let _gc = Sweeper::start_scoped(&scope, &GATES).await;
    assert!(eventually(T, || has_finalizer(&cps, &cp)).await);

    annotate(&cps, &cp, PAUSED, Some("true")).await;
    cps.delete(&cp, &Default::default()).await.unwrap();
    waits_paused(&cps, &cp).await;
    assert!(sg_exists(&aws, &owned_sg).await && lb_exists(&aws, &service_lb).await);

    annotate(&cps, &cp, PAUSED, None).await;
    assert!(eventually(T, || gone(&cps, &cp)).await);
    assert!(!sg_exists(&aws, &owned_sg).await, "torn down once unpaused");
    assert!(!lb_exists(&aws, &service_lb).await);
}

/// `cluster.x-k8s.io/managed-by`: never a finalizer, never a teardown; one added before the
/// object was handed over goes, and its deletion is not held either.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn an_externally_managed_cluster_is_never_held_nor_torn_down() {
    let mut scope = TestScope::new("capi-ext").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let aws = clients().await;
    let from_start = unique_name("tf");
    let handed = unique_name("handed");
    let control = unique_name("ctl");
    let w1 = world(&aws, &from_start).await;
    let w2 = world(&aws, &handed).await;
    let infra = template_cluster(&c, &ns, &from_start, |ac| {
        ac["spec"]["network"]["vpc"]["id"] = json!(w1.net.vpc);
        ac["metadata"]["annotations"] = json!({MANAGED_BY: "terraform"});
    })
    .await;
    template_cluster(&c, &ns, &handed, |ac| {
        ac["spec"]["network"]["vpc"]["id"] = json!(w2.net.vpc);
    })
    .await;
    template_cluster(&c, &ns, &control, |_| {}).await;
    let _gc = Sweeper::start_scoped(&scope, &GATES).await;
    assert!(eventually(T, || has_finalizer(&infra, &handed)).await);
    assert!(eventually(T, || has_finalizer(&infra, &control)).await);
    assert!(
        !has_finalizer(&infra, &from_start).await,
        "sweeper looked at every object of the namespace, and took none of this one"
    );

    annotate(&infra, &handed, MANAGED_BY, Some("crossplane")).await;
    assert!(
        eventually(T, || async { !has_finalizer(&infra, &handed).await }).await,
        "handed over: our finalizer goes"
    );
    for name in [&from_start, &handed] {
        infra.delete(name, &Default::default()).await.unwrap();
        assert!(
            eventually(T, || gone(&infra, name)).await,
            "{name} is not held"
        );
    }
    tokio::time::sleep(A_WHILE).await;
    w1.assert_intact(&aws, "externally managed from the start")
        .await;
    w2.assert_intact(&aws, "handed over before the deletion")
        .await;
}

/// A finalizer removed by hand while the Cluster is paused stays removed; unpausing puts it back
/// at once (the Cluster watch reconciles the objects; the fallback requeue is minutes away).
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_finalizer_removed_by_hand_while_paused_is_not_put_back() {
    let mut scope = TestScope::new("capi-hand").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let name = unique_name("hand");
    let infra = template_cluster(&c, &ns, &name, |_| {}).await;
    let _gc = Sweeper::start_scoped(&scope, &GATES).await;
    assert!(eventually(T, || has_finalizer(&infra, &name)).await);

    set_paused(&c, &ns, &name, "v1beta1", true).await;
    tokio::time::sleep(STEP).await;
    strip_finalizers(&infra, &name).await;
    tokio::time::sleep(A_WHILE).await;
    assert!(
        !has_finalizer(&infra, &name).await,
        "not put back while paused"
    );
    let o = infra.get(&name).await.unwrap();
    assert!(o.finalizers().is_empty());

    set_paused(&c, &ns, &name, "v1beta1", false).await;
    assert!(
        eventually(Duration::from_secs(30), || has_finalizer(&infra, &name)).await,
        "unpaused: guarded again, promptly"
    );
}
