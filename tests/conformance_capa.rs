//! The external collector against the real thing: CAPA's and Cluster API's own CRDs (from
//! `scripts/fixtures.sh`, installed in place of sweeper's with the 1.20 adjustments the fixtures'
//! README states, see support::conformance) and objects shaped from CAPA's own templates, with
//! their AWS resources in LocalStack and `sweeper run` doing the teardown.

mod support;

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use std::time::Duration;
use support::aws::{
    Net, clients, gc_plan, held_target_group, lb_exists, network, nlb, sg, sg_exists, sweeper_gc,
    tagged, vpc_exists,
};
use support::capa::{
    api, audit_entries, capa_conditions, create, eks_cluster, gone, has_finalizer, set_status,
    template_cluster, upstream_crds,
};
use support::conformance;
use support::sweeper::{Sweeper, eventually};
use support::{EnvFacts, TestScope, unique_name};
use sweeper_aws::phases::AwsClients;

const T: Duration = Duration::from_secs(90);
const GATES: [&str; 2] = ["--feature-gates", "CascadeGC=false,ExternalResourceGC=true"];
const GC: &str = "aws.cluster.x-k8s.io/external-resource-gc";
const TASKS: &str = "aws.cluster.x-k8s.io/external-resource-tasks-gc";

/// Our condition with status False was written (accepted by the upstream schema) while CAPA's
/// conditions are all still there, unchanged.
async fn blocked_condition_accepted(api: &Api<DynamicObject>, name: &str) -> bool {
    let Ok(o) = api.get(name).await else {
        return false;
    };
    let Some(cs) = o.data["status"]["conditions"].as_array() else {
        return false;
    };
    let ours = cs.iter().any(|c| {
        c["type"] == "ExternalResourcesDeleted"
            && c["status"] == "False"
            && c["severity"].is_string()
            && c["reason"].as_str().is_some_and(|r| !r.is_empty())
            && c["message"].as_str().is_some_and(|m| !m.is_empty())
    });
    let capa_kept = capa_conditions()
        .as_array()
        .unwrap()
        .iter()
        .all(|want| cs.contains(want));
    ours && capa_kept
}

/// A CAPA-managed network for cluster `name` (VPC and subnet tagged as CAPA tags what it owns),
/// the NLB API server load balancer CAPA made in it (phase 1), and what the cloud provider made
/// for the cluster (phase 2): a Service's NLB and a security group tagged `owned`.
struct CapaWorld {
    net: Net,
    apiserver_lb: String,
    service_lb: String,
    owned_sg: String,
    /// A target group of the cluster held by a load balancer that is not the cluster's, so that
    /// the teardown blocks until the test lets go ([`CapaWorld::unblock`]).
    blocker: String,
}

async fn capa_world(aws: &AwsClients, name: &str) -> CapaWorld {
    let capa_key = format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{name}");
    let key = format!("kubernetes.io/cluster/{name}");
    let net = support::capa::capa_network(aws, name).await;
    let short = &name[name.len() - 6..];
    let owned = tagged(&key, "owned");
    let apiserver_lb = nlb(
        aws,
        &net,
        &format!("{short}-apiserver"),
        &tagged(&capa_key, "owned"),
    )
    .await;
    let service_lb = nlb(aws, &net, &format!("{short}-svc"), &owned).await;
    let owned_sg = sg(aws, &net.vpc, &format!("{name}-svc"), &owned).await;
    let foreign = network(aws).await;
    let (_, blocker) =
        held_target_group(aws, &format!("{short}-tg"), &net.vpc, &foreign, &owned).await;
    CapaWorld {
        net,
        apiserver_lb,
        service_lb,
        owned_sg,
        blocker,
    }
}

impl CapaWorld {
    /// CAPA's status on the AWSCluster: ready, CAPA's conditions, the API server NLB it made.
    async fn ready(&self, infra: &Api<DynamicObject>, name: &str) {
        set_status(
            infra,
            name,
            json!({"ready": true, "conditions": capa_conditions(),
                   "networkStatus": {"apiServerElb": {"arn": self.apiserver_lb, "name": format!("{}-apiserver", &name[name.len() - 6..]), "loadBalancerType": "nlb"}}}),
        )
        .await;
    }

    async fn unblock(&self, aws: &AwsClients) {
        aws.elbv2
            .delete_load_balancer()
            .load_balancer_arn(&self.blocker)
            .send()
            .await
            .unwrap();
    }
}

/// Must survive every teardown: another VPC's `shared` and untagged security groups, and the VPC.
struct Bystanders {
    vpc: String,
    shared_sg: String,
    untagged_sg: String,
}

async fn bystanders(aws: &AwsClients, name: &str) -> Bystanders {
    let net = network(aws).await;
    let key = format!("kubernetes.io/cluster/{name}");
    Bystanders {
        shared_sg: sg(
            aws,
            &net.vpc,
            &format!("{name}-shared"),
            &tagged(&key, "shared"),
        )
        .await,
        untagged_sg: sg(aws, &net.vpc, &format!("{name}-untagged"), &[]).await,
        vpc: net.vpc,
    }
}

impl Bystanders {
    async fn assert_intact(&self, aws: &AwsClients) {
        assert!(
            sg_exists(aws, &self.shared_sg).await,
            "a `shared` resource survives"
        );
        assert!(
            sg_exists(aws, &self.untagged_sg).await,
            "an untagged resource survives"
        );
        assert!(
            vpc_exists(aws, &self.vpc).await,
            "a VPC CAPA does not own survives"
        );
    }
}

/// Issue 10 failure #1: with CAPA's AWSCluster CRD the final condition write was rejected (422,
/// `severity`), so the finalizer never went and the AWSCluster hung in deletion forever.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn capa_aws_cluster_from_the_template_is_torn_down_and_released() {
    let mut scope = TestScope::new("conf-capa").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let aws = clients().await;
    let name = unique_name("capa");
    let world = capa_world(&aws, &name).await;
    let others = bystanders(&aws, &name).await;
    let infra = template_cluster(&c, &ns, &name, |ac| {
        assert_eq!(
            ac["spec"]["controlPlaneLoadBalancer"]["loadBalancerType"],
            "nlb"
        );
        // CAPA records the VPC it created in the spec.
        ac["spec"]["network"]["vpc"]["id"] = json!(world.net.vpc);
    })
    .await;
    world.ready(&infra, &name).await;

    let _gc = Sweeper::start_scoped(&scope, &GATES).await;
    assert!(
        eventually(T, || has_finalizer(&infra, &name)).await,
        "finalizer added while the cluster lives"
    );
    assert!(
        lb_exists(&aws, &world.apiserver_lb).await,
        "nothing deleted before the object is"
    );

    infra.delete(&name, &Default::default()).await.unwrap();
    assert!(
        eventually(T, || blocked_condition_accepted(&infra, &name)).await,
        "while blocked, our condition is accepted by CAPA's schema and CAPA's conditions stay"
    );
    assert!(
        has_finalizer(&infra, &name).await,
        "blocked: the finalizer holds"
    );
    world.unblock(&aws).await;
    assert!(
        eventually(T, || gone(&infra, &name)).await,
        "the final condition write is accepted and the finalizer released"
    );
    assert!(
        !lb_exists(&aws, &world.apiserver_lb).await,
        "phase 1: the API server NLB is deleted"
    );
    assert!(
        !lb_exists(&aws, &world.service_lb).await,
        "phase 2: the Service's NLB is deleted"
    );
    assert!(
        !sg_exists(&aws, &world.owned_sg).await,
        "phase 2: the owned security group is deleted"
    );
    assert!(
        !vpc_exists(&aws, &world.net.vpc).await,
        "phase 3: the CAPA-managed VPC is deleted"
    );
    others.assert_intact(&aws).await;

    // The audit trail of CAPA's own AWSCluster: every deleted resource with its phase, labelled
    // with the cluster's namespace and name; no bystander in it.
    let audited = audit_entries(&c, &ns, &name).await;
    for (id, phase) in [
        (&world.apiserver_lb, 1),
        (&world.service_lb, 2),
        (&world.owned_sg, 2),
        (&world.net.vpc, 3),
    ] {
        let entry = audited
            .iter()
            .find(|e| e["id"].as_str().is_some_and(|x| x.contains(id.as_str())))
            .unwrap_or_else(|| panic!("{id} is in the audit trail: {audited:?}"));
        assert_eq!(entry["phase"], phase, "{id}'s phase: {entry}");
        assert_eq!(entry["object"], format!("AWSCluster/{name}"), "{entry}");
    }
    for kept in [&others.shared_sg, &others.untagged_sg, &others.vpc] {
        assert!(
            !audited
                .iter()
                .any(|e| e.to_string().contains(kept.as_str())),
            "{kept} was kept and is not in the audit trail"
        );
    }
}

fn annotation(o: &DynamicObject, key: &str) -> Option<String> {
    o.annotations().get(key).cloned()
}

/// EKS from CAPA's template: `sweeper gc` writes the control plane (and says so), and the
/// teardown runs end to end with the condition accepted by CAPA's schema.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn capa_eks_cluster_from_the_template_gc_commands_and_teardown() {
    let mut scope = TestScope::new("conf-eks").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let aws = clients().await;
    let name = unique_name("eks");
    let world = capa_world(&aws, &name).await;
    let others = bystanders(&aws, &name).await;
    let region = EnvFacts::load().get("AWS_REGION");
    let (cps, managed, cp) = eks_cluster(&c, &ns, &name, &region, &name).await;

    let (ok, out) = sweeper_gc(&["disable", "--cluster-name", &name, "-n", &ns]);
    assert!(
        ok && out.contains("AWSManagedControlPlane") && out.contains("AWSManagedCluster"),
        "{out}"
    );
    assert_eq!(
        annotation(&cps.get(&cp).await.unwrap(), GC).as_deref(),
        Some("false")
    );
    let text = gc_plan(&name, &ns);
    assert!(text.contains("phase 2 is skipped"), "{text}");
    let (ok, out) = sweeper_gc(&["enable", "--cluster-name", &name, "-n", &ns]);
    assert!(ok, "{out}");
    assert_eq!(
        annotation(&cps.get(&cp).await.unwrap(), GC).as_deref(),
        Some("true")
    );
    let (ok, out) = sweeper_gc(&[
        "configure",
        "--cluster-name",
        &name,
        "-n",
        &ns,
        "--gc-task",
        "load-balancer",
        "--gc-task",
        "target-group",
        "--gc-task",
        "security-group",
    ]);
    assert!(ok, "{out}");
    assert_eq!(
        annotation(&cps.get(&cp).await.unwrap(), TASKS).as_deref(),
        Some("load-balancer,target-group,security-group")
    );
    assert_eq!(
        annotation(&cps.get(&cp).await.unwrap(), "sweeper.dev/gc-tasks").as_deref(),
        Some("load-balancer,target-group,security-group"),
        "sweeper's own annotation too (issue #41)"
    );
    assert_eq!(
        annotation(&managed.get(&name).await.unwrap(), GC),
        None,
        "sweeper writes the control plane only"
    );
    let text = gc_plan(&name, &ns);
    assert!(
        text.contains(&world.owned_sg) && !text.contains("skipped"),
        "{text}"
    );
    assert!(
        sg_exists(&aws, &world.owned_sg).await,
        "a plan deletes nothing"
    );

    let _gc = Sweeper::start_scoped(&scope, &GATES).await;
    assert!(eventually(T, || has_finalizer(&cps, &cp)).await);
    cps.delete(&cp, &Default::default()).await.unwrap();
    assert!(
        eventually(T, || blocked_condition_accepted(&cps, &cp)).await,
        "while blocked, our condition is accepted by CAPA's schema and CAPA's conditions stay"
    );
    world.unblock(&aws).await;
    assert!(
        eventually(T, || gone(&cps, &cp)).await,
        "finalizer released"
    );
    assert!(!lb_exists(&aws, &world.apiserver_lb).await);
    assert!(!lb_exists(&aws, &world.service_lb).await);
    assert!(!sg_exists(&aws, &world.owned_sg).await);
    assert!(!vpc_exists(&aws, &world.net.vpc).await);
    others.assert_intact(&aws).await;
}

/// `clusterawsadm gc disable` annotates the AWSManagedCluster (Cluster.spec.infrastructureRef):
/// that opt-out is honoured though CAPA's control plane carries none.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn eks_opt_out_on_the_aws_managed_cluster_keeps_the_external_resources() {
    let mut scope = TestScope::new("conf-eksopt").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let aws = clients().await;
    let name = unique_name("eksopt");
    let key = format!("kubernetes.io/cluster/{name}");
    let net = network(&aws).await;
    let owned_sg = sg(
        &aws,
        &net.vpc,
        &format!("{name}-svc"),
        &tagged(&key, "owned"),
    )
    .await;
    let service_lb = nlb(
        &aws,
        &net,
        &format!("{}-svc", &name[name.len() - 6..]),
        &tagged(&key, "owned"),
    )
    .await;
    let region = EnvFacts::load().get("AWS_REGION");
    let (cps, managed, cp) = eks_cluster(&c, &ns, &name, &region, &name).await;
    // As clusterawsadm does it: on the infrastructure ref.
    managed
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {GC: "false"}}})),
        )
        .await
        .unwrap();
    let text = gc_plan(&name, &ns);
    assert!(
        text.contains("phase 2 is skipped"),
        "the plan honours it too: {text}"
    );

    let _gc = Sweeper::start_scoped(&scope, &GATES).await;
    assert!(eventually(T, || has_finalizer(&cps, &cp)).await);
    cps.delete(&cp, &Default::default()).await.unwrap();
    assert!(
        eventually(T, || gone(&cps, &cp)).await,
        "phases 1 and 3 ran; the finalizer goes"
    );
    assert!(
        sg_exists(&aws, &owned_sg).await,
        "opted out: the security group survives"
    );
    assert!(
        lb_exists(&aws, &service_lb).await,
        "opted out: the Service's load balancer survives"
    );
}

/// Issue 10 failure #5: against Cluster API's CRD (v1beta2 stored, no conversion webhook) a
/// v1beta1 read lost the refs' apiVersion and `gc enable` built `/api//namespaces/...`. Both
/// generations resolve: a Cluster written at v1beta2 (`apiGroup` refs) and one written at v1beta1.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn gc_enable_resolves_both_generations_of_the_capi_cluster() {
    let mut scope = TestScope::new("conf-capi").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let infra = api(
        &c,
        &ns,
        "infrastructure.cluster.x-k8s.io/v1beta2",
        "AWSCluster",
    );
    let v1beta2 = api(&c, &ns, "cluster.x-k8s.io/v1beta2", "Cluster");
    let v1beta1 = api(&c, &ns, "cluster.x-k8s.io/v1beta1", "Cluster");
    for cluster in ["new", "old"] {
        create(
            &infra,
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster",
            "metadata": {"name": format!("{cluster}-infra")}, "spec": {"region": "us-east-1"}}),
        )
        .await;
    }
    for (cluster, version, refs) in [
        (
            "new",
            "v1beta2",
            json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSCluster", "name": "new-infra"}),
        ),
        (
            "old",
            "v1beta1",
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster", "name": "old-infra", "namespace": ns}),
        ),
    ] {
        let api = if version == "v1beta2" {
            &v1beta2
        } else {
            &v1beta1
        };
        create(
            api,
            json!({"apiVersion": format!("cluster.x-k8s.io/{version}"), "kind": "Cluster",
            "metadata": {"name": cluster}, "spec": {"infrastructureRef": refs}}),
        )
        .await;
        let (ok, out) = sweeper_gc(&["enable", "--cluster-name", cluster, "-n", &ns]);
        assert!(ok, "Cluster written at {version}: {out}");
        assert!(
            out.contains(&format!("AWSCluster {ns}/{cluster}-infra")),
            "{out}"
        );
        let o = infra.get(&format!("{cluster}-infra")).await.unwrap();
        assert_eq!(
            annotation(&o, GC).as_deref(),
            Some("true"),
            "Cluster written at {version}"
        );
        if cluster == "new" {
            let o = infra.get("old-infra").await.unwrap();
            assert_eq!(
                annotation(&o, GC),
                None,
                "only the referenced object is annotated"
            );
        }
    }
}

/// The 1.20 adjustments remove CEL rules and empty string defaults, and nothing else.
#[test]
fn adjustments_remove_cel_and_empty_string_defaults_only() {
    let mut v = json!({"properties": {
        "a": {"type": "string", "default": "", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
        "b": {"type": "string", "default": "x"},
        "c": {"type": "integer", "default": 0},
        "d": {"type": "array", "items": {"type": "object", "x-kubernetes-validations": []}}
    }});
    conformance::adjust_for_1_20(&mut v);
    assert_eq!(
        v,
        json!({"properties": {
            "a": {"type": "string"},
            "b": {"type": "string", "default": "x"},
            "c": {"type": "integer", "default": 0},
            "d": {"type": "array", "items": {"type": "object"}}
        }})
    );
}

/// `--external-dry-run` against CAPA's own AWSCluster: no finalizer is taken, nothing is deleted
/// in AWS, and the plan (every resource of the three phases, none of the bystanders) goes into
/// the condition (accepted by CAPA's schema), a `DryRunPlan` Event, `/status` and
/// `sweeper_external_would_delete_total`. CAPA's own finalizer keeps the object in deletion
/// while sweeper plans, as on a real management cluster.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn external_dry_run_plans_and_deletes_nothing() {
    let mut scope = TestScope::new("conf-dry").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let aws = clients().await;
    let name = unique_name("dry");
    let world = capa_world(&aws, &name).await;
    world.unblock(&aws).await;
    let others = bystanders(&aws, &name).await;
    // CAPA's own finalizer: CAPA holds the object while it deletes the cluster.
    const CAPA_FINALIZER: &str = "awscluster.infrastructure.cluster.x-k8s.io";
    let infra = template_cluster(&c, &ns, &name, |ac| {
        ac["spec"]["network"]["vpc"]["id"] = json!(world.net.vpc);
        ac["metadata"]["finalizers"] = json!([CAPA_FINALIZER]);
    })
    .await;
    world.ready(&infra, &name).await;

    let gc = Sweeper::start_external_only_scoped(&scope, &["--external-dry-run"]).await;
    infra.delete(&name, &Default::default()).await.unwrap();
    let planned = |want: &'static str| {
        let infra = infra.clone();
        let name = name.clone();
        async move {
            infra.get(&name).await.ok().and_then(|o| {
                o.data["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .find(|c| c["type"] == "ExternalResourcesDeleted" && c["reason"] == want)
                    .and_then(|c| c["message"].as_str().map(str::to_string))
            })
        }
    };
    assert!(
        eventually(T, || async { planned("DryRun").await.is_some() }).await,
        "the plan is written into the condition"
    );
    let plan = planned("DryRun").await.unwrap();
    for id in [
        &world.apiserver_lb,
        &world.service_lb,
        &world.owned_sg,
        &world.net.vpc,
    ] {
        let short = id.rsplit('/').next().unwrap_or(id);
        assert!(plan.contains(short), "{id} is in the plan: {plan}");
    }
    for kept in [&others.shared_sg, &others.untagged_sg, &others.vpc] {
        assert!(
            !plan.contains(kept.as_str()),
            "{kept} is not in the plan: {plan}"
        );
    }
    assert!(
        !has_finalizer(&infra, &name).await,
        "a dry run takes no finalizer"
    );
    let (_, metrics) = gc.get("/metrics").await;
    let would_delete: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("sweeper_external_would_delete_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        would_delete >= 4.0,
        "would_delete counts the plan: {would_delete}"
    );
    // The pass writes the condition, then emits its Event, and only then enters its phase in
    // the status registry: wait for the registry rather than race the Event's write.
    let shows_plan = eventually(T, || async { gc.get("/status").await.1.contains("DryRun") }).await;
    let (_, status) = gc.get("/status").await;
    assert!(shows_plan, "sweeper status shows the plan: {status}");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.clone(), &ns);
    assert!(
        eventually(T, || async {
            events
                .list(&Default::default())
                .await
                .map(|l| {
                    l.items
                        .iter()
                        .any(|e| e.reason.as_deref() == Some("DryRunPlan"))
                })
                .unwrap_or(false)
        })
        .await,
        "a DryRunPlan Event"
    );
    // Nothing was deleted in any phase.
    assert!(lb_exists(&aws, &world.apiserver_lb).await, "phase 1 kept");
    assert!(lb_exists(&aws, &world.service_lb).await, "phase 2 kept");
    assert!(sg_exists(&aws, &world.owned_sg).await, "phase 2 kept");
    assert!(vpc_exists(&aws, &world.net.vpc).await, "phase 3 kept");
    others.assert_intact(&aws).await;
    // CAPA finishes: the object goes, held by nothing of sweeper's.
    infra
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert!(eventually(T, || gone(&infra, &name)).await);
}

/// The EKS name sweeper derives for a control plane without `spec.eksClusterName` is the one
/// CAPA's own defaulting webhook writes (the environment runs CAPA v2.13.0's webhook): a short
/// name with dots (`<namespace>_<name>`, dots made `_`) and one long enough for CAPA to hash it
/// (`capa_` and 27 base-36 characters), each created through CAPA's admission with the field
/// left out and read back. The unit test's golden values pin the same function offline.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn capas_defaulting_webhook_names_the_eks_cluster_as_sweeper_derives_it() {
    let mut scope = TestScope::new("conf-eksname").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let region = EnvFacts::load().get("AWS_REGION");
    let cps = api(
        &c,
        &ns,
        "controlplane.cluster.x-k8s.io/v1beta2",
        "AWSManagedControlPlane",
    );
    let short = format!("{}.a.b", unique_name("dots"));
    let long = format!("{}-{}", unique_name("long"), "x".repeat(90));
    for (cluster_name, hashed) in [(short, false), (long, true)] {
        let vars = support::capa::vars(&cluster_name, &region);
        let mut cp = support::capa::from_template(
            "capa/templates/cluster-template-eks.yaml",
            "AWSManagedControlPlane",
            &vars,
        );
        if let Some(spec) = cp["spec"].as_object_mut() {
            spec.remove("eksClusterName");
        }
        let cp = create(&cps, cp).await;
        let defaulted = cp.data["spec"]["eksClusterName"]
            .as_str()
            .map(str::to_string);
        let ours = sweeper::api::capa::default_eks_name(&ns, &cp.name_any());
        assert_eq!(
            defaulted.as_deref(),
            Some(ours.as_str()),
            "CAPA's defaulter and sweeper for {ns}/{}",
            cp.name_any()
        );
        // Both paths of GenerateEKSName are taken: the hashed one for the long name.
        assert_eq!(ours.starts_with("capa_"), hashed, "{ours}");
    }
}
