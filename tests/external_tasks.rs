//! Issue #41: the phase-2 tasks through sweeper's own annotation `sweeper.dev/gc-tasks`, with
//! CAPA's `aws.cluster.x-k8s.io/external-resource-tasks-gc` given only CAPA's names, on objects
//! shaped from CAPA's own templates and CRDs (and CAPA's webhooks, where the environment serves
//! them): `sweeper gc configure` writes what each annotation's reader accepts, and the teardown
//! runs exactly the configured tasks.

mod support;

use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use serde_json::json;
use std::time::Duration;
use support::aws::{clients, gc_plan, lb_exists, network, nlb, sg, sg_exists, sweeper_gc, tagged};
use support::capa::{eks_cluster, gone, has_finalizer, template_cluster, upstream_crds};
use support::sweeper::{Sweeper, eventually};
use support::{EnvFacts, TestScope, unique_name};
use sweeper_aws::testing::leaks::csi_volume;
use sweeper_aws::testing::probe::volume_exists;

const T: Duration = Duration::from_secs(90);
const GATES: [&str; 2] = ["--feature-gates", "CascadeGC=false,ExternalResourceGC=true"];
const CAPA_TASKS: &str = "aws.cluster.x-k8s.io/external-resource-tasks-gc";
const SWEEPER_TASKS: &str = "sweeper.dev/gc-tasks";
const OPT_INS: [&str; 3] = ["ebs-volume", "ebs-snapshot", "eks-log-group"];

async fn annotation(api: &Api<DynamicObject>, name: &str, key: &str) -> Option<String> {
    api.get(name).await.unwrap().annotations().get(key).cloned()
}

/// `sweeper gc configure` for `cluster` with `tasks` (one comma list; none: no `--gc-task`),
/// which must succeed; its output.
fn configure(cluster: &str, ns: &str, tasks: Option<&str>) -> String {
    let mut args = vec!["configure", "--cluster-name", cluster, "-n", ns];
    if let Some(t) = tasks {
        args.extend(["--gc-task", t]);
    }
    let (ok, out) = sweeper_gc(&args);
    assert!(ok, "gc configure {tasks:?}: {out}");
    out
}

/// The task annotations of `name`: (sweeper's, CAPA's).
async fn task_annotations(
    api: &Api<DynamicObject>,
    name: &str,
) -> (Option<String>, Option<String>) {
    (
        annotation(api, name, SWEEPER_TASKS).await,
        annotation(api, name, CAPA_TASKS).await,
    )
}

/// `gc configure --gc-task ebs-volume,load-balancer` on CAPA's AWSCluster: CAPA's annotation gets
/// `load-balancer` alone (what CAPA's webhook accepts, so sweeper's finalizer writes pass it),
/// sweeper's gets both; the teardown deletes the cluster's CSI volume (an opt-in) and its load
/// balancer, and keeps its security group (`security-group` not named).
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn configured_opt_in_and_capa_tasks_run_at_the_aws_clusters_teardown() {
    let mut scope = TestScope::new("tasks-ac").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let aws = clients().await;
    let name = unique_name("tasks");
    let owned = tagged(&format!("kubernetes.io/cluster/{name}"), "owned");
    let net = network(&aws).await;
    let lb = nlb(
        &aws,
        &net,
        &format!("{}-svc", &name[name.len() - 6..]),
        &owned,
    )
    .await;
    let kept_sg = sg(&aws, &net.vpc, &format!("{name}-svc"), &owned).await;
    let volume = csi_volume(&aws, &name, &format!("pvc-{name}")).await;
    let other_volume = csi_volume(&aws, &format!("{name}-b"), "pvc-other").await;
    let infra = template_cluster(&c, &ns, &name, |_| {}).await;

    let out = configure(&name, &ns, Some("ebs-volume,load-balancer"));
    assert!(
        out.contains(&format!("{SWEEPER_TASKS}=ebs-volume,load-balancer"))
            && out.contains(&format!("{CAPA_TASKS}=load-balancer")),
        "says what went where: {out}"
    );
    assert_eq!(
        task_annotations(&infra, &name).await,
        (
            Some("ebs-volume,load-balancer".into()),
            Some("load-balancer".into())
        )
    );
    let plan = gc_plan(&name, &ns);
    assert!(
        plan.contains(&format!(
            "phase-2 tasks: ebs-volume, load-balancer (from {SWEEPER_TASKS} and {CAPA_TASKS})"
        )) && plan.contains(&volume)
            && plan.contains(&lb)
            && !plan.contains(&kept_sg),
        "{plan}"
    );

    let _gc = Sweeper::start_scoped(&scope, &GATES).await;
    assert!(
        eventually(T, || has_finalizer(&infra, &name)).await,
        "sweeper's finalizer write is accepted with CAPA's annotation as configured"
    );
    infra.delete(&name, &Default::default()).await.unwrap();
    assert!(
        eventually(T, || gone(&infra, &name)).await,
        "the teardown of the configured tasks completes"
    );
    assert!(
        !volume_exists(&aws, &volume).await,
        "ebs-volume (opt-in, sweeper's annotation): the cluster's volume is deleted"
    );
    assert!(
        !lb_exists(&aws, &lb).await,
        "load-balancer (both annotations): deleted"
    );
    assert!(
        sg_exists(&aws, &kept_sg).await,
        "security-group not configured: kept"
    );
    assert!(
        volume_exists(&aws, &other_volume).await,
        "another cluster's volume"
    );
}

/// Each opt-in task turned on through sweeper's annotation and off again (`gc configure` without
/// it), on an AWSCluster and on an EKS AWSManagedControlPlane: CAPA's annotation never gets one,
/// is removed when no CAPA task is named, and the AWSManagedCluster is never written.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn each_opt_in_task_turns_on_and_off_through_sweepers_annotation() {
    let mut scope = TestScope::new("tasks-opt").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let region = EnvFacts::load().get("AWS_REGION");
    let ac_name = unique_name("optac");
    let infra = template_cluster(&c, &ns, &ac_name, |_| {}).await;
    let eks_name = unique_name("opteks");
    let (cps, managed, cp) = eks_cluster(&c, &ns, &eks_name, &region, &eks_name).await;

    for (cluster, api, object, kind) in [
        (&ac_name, &infra, ac_name.clone(), "AWSCluster"),
        (&eks_name, &cps, cp.clone(), "AWSManagedControlPlane"),
    ] {
        for task in OPT_INS {
            let out = configure(cluster, &ns, Some(task));
            assert!(
                out.contains(kind) && out.contains(&format!("{CAPA_TASKS} removed")),
                "{out}"
            );
            assert_eq!(
                task_annotations(api, &object).await,
                (Some(task.to_string()), None),
                "{kind}: {task} on, in sweeper's annotation only"
            );
            let on = format!("phase-2 tasks: {task} (from {SWEEPER_TASKS})");
            let plan = gc_plan(cluster, &ns);
            assert!(plan.contains(&on), "{kind}: {plan}");

            let out = configure(cluster, &ns, None);
            assert!(out.contains("default GC tasks"), "{out}");
            assert_eq!(
                task_annotations(api, &object).await,
                (None, None),
                "{kind}: {task} off again, both removed"
            );
            let plan = gc_plan(cluster, &ns);
            assert!(
                plan.contains("phase-2 tasks: the default set") && !plan.contains(&on),
                "{kind}: {plan}"
            );
        }
        // All three with one of CAPA's: CAPA's annotation gets that one alone.
        configure(
            cluster,
            &ns,
            Some("ebs-volume,ebs-snapshot,eks-log-group,security-group"),
        );
        assert_eq!(
            task_annotations(api, &object).await,
            (
                Some("ebs-volume,ebs-snapshot,eks-log-group,security-group".into()),
                Some("security-group".into())
            ),
            "{kind}"
        );
        configure(cluster, &ns, None);
        assert_eq!(task_annotations(api, &object).await, (None, None), "{kind}");
    }
    let managed_object = managed.get(&eks_name).await.unwrap();
    for key in [SWEEPER_TASKS, CAPA_TASKS] {
        assert_eq!(
            managed_object.annotations().get(key),
            None,
            "sweeper writes the control plane only"
        );
    }
    // Sanity: the CAPA objects are CAPA's (the template's spec survives the patches).
    assert_eq!(
        infra.get(&ac_name).await.unwrap().data["spec"]["region"],
        json!(region)
    );
}

/// An AWSCluster annotated before sweeper had its own annotation: one of sweeper's tasks in CAPA's
/// (CAPA's webhook checks updates only, so the create passes). `gc plan` says it is refused and
/// where it belongs; `gc configure` with the same task moves it, an update CAPA's webhook accepts.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn configure_moves_a_sweeper_task_out_of_capas_annotation() {
    let mut scope = TestScope::new("tasks-mv").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    upstream_crds(&c).await;
    let name = unique_name("mv");
    let infra = template_cluster(&c, &ns, &name, |ac| {
        ac["metadata"]["annotations"][CAPA_TASKS] = json!("ebs-volume");
    })
    .await;

    let (ok, out) = sweeper_gc(&["plan", "--cluster-name", &name, "-n", &ns]);
    assert!(
        !ok && out.contains(CAPA_TASKS)
            && out.contains("\"ebs-volume\"")
            && out.contains(SWEEPER_TASKS),
        "refused, and says where it belongs: {out}"
    );

    configure(&name, &ns, Some("ebs-volume"));
    assert_eq!(
        task_annotations(&infra, &name).await,
        (Some("ebs-volume".into()), None)
    );
    let plan = gc_plan(&name, &ns);
    assert!(
        plan.contains(&format!("phase-2 tasks: ebs-volume (from {SWEEPER_TASKS})")),
        "{plan}"
    );
}
