//! `sweeper uninstall` (issue 24): pauses every collector and removes every finalizer sweeper
//! owns from live objects, deleting nothing and keeping the archive; objects deleted afterwards
//! go at once. Against CAPA's own AWSCluster (upstream CRDs) and a Tenant, with a real AWS
//! resource of the cluster in LocalStack that must survive.
//!
//! The uninstall acts cluster-wide (as it must: it cannot know which objects a test owns), so
//! `make test` runs this binary on its own, after the others (scripts/test.sh).

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use std::time::Duration;
use support::aws::{clients, network, sg, sg_exists, tagged};
use support::capa::{gone, has_finalizer, template_cluster, upstream_crds};
use support::sweeper::{Sweeper, cli, eventually};
use support::tenant;
use support::{TestScope, unique_name};

const T: Duration = Duration::from_secs(90);

async fn archive_records(c: &kube::Client) -> usize {
    Api::<ConfigMap>::all(c.clone())
        .list_metadata(&ListParams::default().labels("sweeper.dev/archive=true"))
        .await
        .unwrap()
        .items
        .len()
}

#[tokio::test]
#[ignore = "needs the test environment and acts cluster-wide: run by `make test` on its own"]
async fn uninstall_releases_sweepers_finalizers_and_deletes_nothing() {
    let mut scope = TestScope::new("uninst").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    // sweeper's Tenant CRD, then CAPA's own CRDs in place of sweeper's.
    support::objects::install_sweeper_crds(&c).await;
    upstream_crds(&c).await;
    let aws = clients().await;
    let name = unique_name("uni");
    let net = network(&aws).await;
    let owned_sg = sg(
        &aws,
        &net.vpc,
        &format!("{name}-svc"),
        &tagged(&format!("kubernetes.io/cluster/{name}"), "owned"),
    )
    .await;
    let infra = template_cluster(&c, &ns, &name, |_| {}).await;
    let (tid, _) = tenant::ids();
    tenant::tenant(&scope, &tid).await;

    // The pause switch in the test's namespace, so no other sweeper is paused.
    // Scoped like every test's sweeper, with the cascade collector on (it has no scope): what
    // acts cluster-wide here is `sweeper uninstall` and that collector, which is why this binary
    // runs alone.
    let gc = Sweeper::start_scoped_alone(
        &scope,
        &[
            "--feature-gates",
            "CascadeGC=true,TenantGC=true,ExternalResourceGC=true",
            "--namespace",
            &ns,
        ],
    )
    .await;
    assert!(
        eventually(T, || has_finalizer(&infra, &name)).await,
        "external finalizer taken"
    );
    assert!(
        eventually(T, || tenant::has_finalizer(&c, &tid)).await,
        "tenant finalizer taken"
    );
    let records_before = archive_records(&c).await;

    let (ok, out, err) = cli(&["uninstall", "-n", &ns, "--dry-run"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(&format!(
            "would release AWSCluster {ns}/{name}: sweeper.dev/external-resource-gc"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("would release Tenant {tid}: kubezoo.io/tenant")),
        "{out}"
    );
    assert!(
        has_finalizer(&infra, &name).await,
        "a dry run changes nothing"
    );
    assert!(
        tenant::has_finalizer(&c, &tid).await,
        "a dry run changes nothing"
    );

    let (ok, out, err) = cli(&["uninstall", "-n", &ns]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(&format!("released AWSCluster {ns}/{name}")),
        "{out}"
    );
    assert!(out.contains(&format!("released Tenant {tid}")), "{out}");
    assert!(
        !has_finalizer(&infra, &name).await,
        "the external finalizer is gone"
    );
    assert!(
        !tenant::has_finalizer(&c, &tid).await,
        "the tenant finalizer is gone"
    );
    // Deleted nothing: both objects live on, not deleting, the AWS resource and the archive too.
    let o = infra.get(&name).await.expect("the AWSCluster still exists");
    assert!(o.metadata.deletion_timestamp.is_none());
    assert!(tenant::exists(&Api::<sweeper::api::tenant::Tenant>::all(c.clone()), &tid).await);
    assert!(sg_exists(&aws, &owned_sg).await, "no AWS resource deleted");
    assert!(
        archive_records(&c).await >= records_before,
        "the archive is kept"
    );
    Api::<ConfigMap>::namespaced(c.clone(), &ns)
        .get("sweeper-pause")
        .await
        .expect("the pause switch is written");
    for collector in ["cascade", "tenant", "external"] {
        let series = format!("sweeper_paused{{collector=\"{collector}\"}}");
        assert!(
            eventually(T, || async { gc.metric(&series).await == 1.0 }).await,
            "the running sweeper sees {collector} paused"
        );
    }

    // Deleted afterwards, they go at once: the paused sweeper adds nothing back.
    infra.delete(&name, &Default::default()).await.unwrap();
    tenant::delete_tenant(&c, &tid).await;
    assert!(
        eventually(Duration::from_secs(10), || gone(&infra, &name)).await,
        "the AWSCluster goes at once"
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            !tenant::exists(&Api::<sweeper::api::tenant::Tenant>::all(c.clone()), &tid).await
        })
        .await,
        "the Tenant goes at once"
    );
    assert!(
        sg_exists(&aws, &owned_sg).await,
        "still no AWS resource deleted"
    );

    // Idempotent: a second run finds nothing of these left and succeeds.
    let (ok, out, err) = cli(&["uninstall", "-n", &ns]);
    assert!(ok, "{out}{err}");
    assert!(!out.contains(&name) && !out.contains(&tid), "{out}");
    drop(gc);
}

/// Lifts the pause the hook's command set on sweeper's namespace, even when the test fails, so
/// later tests and the demo find their sweepers running.
struct ResumeOnDrop(&'static str);

impl Drop for ResumeOnDrop {
    fn drop(&mut self) {
        let (ok, out, err) = cli(&["resume", "-n", self.0]);
        if !ok {
            eprintln!("could not resume the collectors of {}: {out}{err}", self.0);
        }
    }
}

/// Issue 42: `helm uninstall` runs the chart's pre-delete Job first. Its exact command, read from
/// the rendered chart (release `sweeper` in `sweeper-system`, the defaults: the external-only
/// install), run as the external-only install's service account (bound to the rules the chart
/// renders, tests/helm.rs), against clusters that hold sweeper's finalizer: afterwards none holds
/// it, nothing was deleted (the clusters live, not deleting, their AWS resource too), the running
/// sweeper is paused, and a cluster deleted afterwards goes at once. Its calls are in the audit
/// log tests/rbac.rs checks the external-only role against.
#[tokio::test]
#[ignore = "needs the test environment, pauses sweeper-system and acts cluster-wide: run by `make test` on its own"]
async fn chart_pre_delete_hook_releases_every_cluster_and_deletes_nothing() {
    const RELEASE_NAMESPACE: &str = "sweeper-system";
    let rendered = support::chart::render("sweeper", RELEASE_NAMESPACE, &[]);
    let job = rendered
        .iter()
        .find(|o| {
            o.pointer("/metadata/annotations/helm.sh~1hook")
                .and_then(serde_json::Value::as_str)
                == Some("pre-delete")
        })
        .expect("the chart renders a pre-delete hook");
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_string())
        .collect();
    let env: Vec<(String, String)> = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?.into(), e["value"].as_str()?.into())))
        .collect();

    let mut scope = TestScope::new("unhook").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    upstream_crds(&c).await;
    let aws = clients().await;
    let net = network(&aws).await;
    let names = [unique_name("hk"), unique_name("hk")];
    let mut owned = Vec::new();
    let mut infra = None;
    for name in &names {
        owned.push(
            sg(
                &aws,
                &net.vpc,
                &format!("{name}-svc"),
                &tagged(&format!("kubernetes.io/cluster/{name}"), "owned"),
            )
            .await,
        );
        infra = Some(template_cluster(&c, &ns, name, |_| {}).await);
    }
    let infra = infra.expect("clusters");

    // The installed service: the external collector alone, as the external-only service account,
    // in sweeper-system (that account's namespace), as the chart runs it.
    let gc = Sweeper::start_external_only_scoped(&scope, &[]).await;
    for name in &names {
        assert!(
            eventually(T, || has_finalizer(&infra, name)).await,
            "{name}: the external finalizer is taken"
        );
    }

    let _resume = ResumeOnDrop(RELEASE_NAMESPACE);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sweeper"))
        .args(&args)
        .envs(env.iter().cloned())
        .env(
            "KUBECONFIG",
            support::EnvFacts::load().get("SWEEPER_EXTERNAL_SA_KUBECONFIG"),
        )
        .output()
        .expect("run the hook's command");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "`sweeper {}` failed as the service account:\n{stdout}{stderr}",
        args.join(" ")
    );
    for name in &names {
        assert!(
            stdout.contains(&format!("released AWSCluster {ns}/{name}")),
            "{stdout}"
        );
        let o = infra.get(name).await.expect("the AWSCluster still exists");
        assert!(
            !o.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f.starts_with("sweeper.dev/")),
            "{name}: no finalizer of sweeper's remains: {:?}",
            o.metadata.finalizers
        );
        assert!(
            o.metadata.deletion_timestamp.is_none(),
            "{name}: not deleted"
        );
    }
    for sg_id in &owned {
        assert!(sg_exists(&aws, sg_id).await, "no AWS resource deleted");
    }
    assert!(
        eventually(T, || async {
            gc.metric("sweeper_paused{collector=\"external\"}").await == 1.0
        })
        .await,
        "the running sweeper is paused: it adds no finalizer back"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !has_finalizer(&infra, &names[0]).await,
        "the paused sweeper took no finalizer back"
    );

    // What Helm then deletes leaves no cluster behind: one deleted now goes at once.
    infra.delete(&names[0], &Default::default()).await.unwrap();
    assert!(
        eventually(Duration::from_secs(10), || gone(&infra, &names[0])).await,
        "the AWSCluster goes at once"
    );
    assert!(
        sg_exists(&aws, &owned[0]).await,
        "still no AWS resource deleted"
    );
    drop(gc);

    // The whole story (issue 51): what becomes of deleted clusters' AWS resources. The hook's
    // identity may not read CAPA's Deployment, so it is not read and the report says what to do.
    assert!(
        stdout.contains("ExternalResourceGC") && stdout.contains("turn it back on"),
        "the uninstall says to give CAPA its gc back: {stdout}"
    );
    assert!(stdout.contains("--after-uninstall"), "{stdout}");
    resume_after_uninstall_lifts_only_the_uninstalls_pause(RELEASE_NAMESPACE, &args, &env).await;
}

/// The chart's post-install hook, as a reinstall runs it: `sweeper resume --after-uninstall`,
/// read from the render, as the external-only service account. It lifts the uninstall's pause and
/// leaves an operator's own.
async fn resume_after_uninstall_lifts_only_the_uninstalls_pause(
    namespace: &str,
    uninstall_args: &[String],
    env: &[(String, String)],
) {
    let rendered = support::chart::render("sweeper", namespace, &[]);
    let job = rendered
        .iter()
        .find(|o| {
            o.pointer("/metadata/annotations/helm.sh~1hook")
                .and_then(serde_json::Value::as_str)
                == Some("post-install")
        })
        .expect("the chart renders a post-install hook");
    let args: Vec<String> = job["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_string())
        .collect();
    assert!(args.contains(&"--after-uninstall".to_string()), "{args:?}");
    let as_service = |argv: &[String]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_sweeper"))
            .args(argv)
            .envs(env.iter().cloned())
            .env(
                "KUBECONFIG",
                support::EnvFacts::load().get("SWEEPER_EXTERNAL_SA_KUBECONFIG"),
            )
            .output()
            .expect("run sweeper")
    };
    // The uninstall paused every collector; an operator then paused the tenant one for a reason
    // of their own.
    assert!(as_service(uninstall_args).status.success());
    let (ok, out, err) = cli(&[
        "pause",
        "-n",
        namespace,
        "--collector",
        "tenant",
        "--reason",
        "mine",
    ]);
    assert!(ok, "{out}{err}");
    let out = as_service(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("external") && !text.contains("tenant"),
        "{text}"
    );
    let c = support::kube_client().await;
    let cm: k8s_openapi::api::core::v1::ConfigMap = kube::Api::namespaced(c, namespace)
        .get("sweeper-pause")
        .await
        .unwrap();
    let data = cm.data.unwrap_or_default();
    let (paused, _) = sweeper::engine::pause::parse(&data, &sweeper::catalog::names());
    assert_eq!(
        paused.keys().map(String::as_str).collect::<Vec<_>>(),
        ["tenant"],
        "only the operator's pause is left: {data:?}"
    );
    // Nothing more to resume: a second run (a retried hook) changes nothing.
    let again = as_service(&args);
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing paused by"));
}
