//! `sweeper check` against the real test environment: every check once passing and once failing,
//! on the upstream CAPA and Cluster API CRDs (scripts/fixtures.sh), the shipped service
//! accounts' real RBAC, and LocalStack's STS. Each test keeps what it reads in its own namespaces
//! (CAPA's, the control plane's, sweeper's, the clusters'), so what other tests do around it does
//! not change its answers; the archive's budget is the one cluster-wide count, and its failing
//! case sets a budget no archive fits in.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use std::time::Duration;
use support::TestScope;
use sweeper::check::{self, Config, Line, Status, crds};
use sweeper::config::FeatureGates;

const SA_USER: &str = "system:serviceaccount:sweeper-system:sweeper";
const EXTERNAL_SA_USER: &str = "system:serviceaccount:sweeper-system:sweeper-external";

/// A Lease time as the API server takes it (RFC 3339 with microseconds).
fn micro(t: Timestamp) -> Value {
    serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(t)).unwrap()
}

fn cfg(gates: &str, ns: &str) -> Config {
    Config {
        gates: FeatureGates::parse(gates, &sweeper::catalog::gates()).unwrap(),
        namespace: ns.to_string(),
        capa_namespace: ns.to_string(),
        lease: None,
        archive: true,
        archive_budget_bytes: u64::MAX,
        control_plane_namespace: ns.to_string(),
        cluster_namespace: ns.to_string(),
        external_selector: sweeper::engine::selector::parse("").unwrap(),
        external_dry_run: false,
        scan_interval: Duration::ZERO,
    }
}

const EXTERNAL: &str = "CascadeGC=false,TenantGC=false,ExternalResourceGC=true";
const ALL: &str = "CascadeGC=true,TenantGC=true,ExternalResourceGC=true";

fn only(lines: &[Line], category: &str) -> Vec<Line> {
    lines
        .iter()
        .filter(|l| l.category == category)
        .cloned()
        .collect()
}

fn statuses(lines: &[Line]) -> Vec<Status> {
    lines.iter().map(|l| l.status).collect()
}

async fn create<K>(c: &kube::Client, ns: &str, v: Value) -> K
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let o: K = serde_json::from_value(v).unwrap();
    Api::<K>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &o)
        .await
        .unwrap_or_else(|e| panic!("create in {ns}: {e}"))
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn the_api_server_is_reached_or_nothing_else_is_tried() {
    let mut scope = TestScope::new("check-api").await;
    let ns = scope.namespace().await;
    let report = check::run(&scope.client, &cfg(EXTERNAL, &ns), None).await;
    assert_eq!(report.checks[0].category, "kubernetes-api");
    assert_eq!(report.checks[0].status, Status::Pass, "{}", report.render());
    assert!(report.checks.len() > 5, "{}", report.render());

    // A server that does not answer: one failed line, and no other check.
    let mut config = support::kube_config().await;
    config.cluster_url = "https://127.0.0.1:1".parse().unwrap();
    config.read_timeout = Some(Duration::from_secs(2));
    let down = kube::Client::try_from(config).unwrap();
    let report = check::run(&down, &cfg(EXTERNAL, &ns), None).await;
    assert_eq!(report.checks.len(), 1, "{}", report.render());
    assert_eq!(report.checks[0].status, Status::Fail);
    assert!(!report.success);
    assert!(
        report.checks[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("KUBECONFIG")
    );
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn upstream_crds_are_served_at_the_versions_sweeper_reads_and_others_are_named() {
    let mut scope = TestScope::new("check-crds").await;
    let c = scope.client.clone();
    support::capa::upstream_crds(&c).await;
    support::capa::identity_crds(&c).await;
    let ns = scope.namespace().await;
    let lines = crds::check(&c, &cfg(EXTERNAL, &ns)).await;
    assert_eq!(lines.len(), 7, "{lines:#?}");
    assert!(lines.iter().all(|l| l.status == Status::Pass), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l
            .message
            .contains("clusters.cluster.x-k8s.io is served at v1beta2")),
        "Cluster API's own CRD serves v1beta2: {lines:#?}"
    );

    // A version the upstream CRD does not serve, and a group no one serves.
    let future = crds::Wanted {
        versions: &["v1beta9"],
        ..*crds::WANTED
            .iter()
            .find(|w| w.resource == "awsclusters")
            .unwrap()
    };
    let absent = crds::Wanted {
        collector: "tenant",
        group: "nothing.sweeper.example.com",
        resource: "widgets",
        versions: &["v1"],
        owner: "nobody",
    };
    let lines = crds::check_kinds(&c, &[&future, &absent]).await;
    assert_eq!(statuses(&lines), [Status::Fail, Status::Fail], "{lines:#?}");
    assert!(
        lines[0]
            .message
            .contains("served only at v1beta2; sweeper reads v1beta9"),
        "{lines:#?}"
    );
    assert!(lines[1].hint.as_deref().unwrap().contains("TenantGC=false"));
}

/// A client that acts as `user` (impersonation by the test's admin: the audit log records the
/// admin, so tests/rbac.rs does not count these reviews as sweeper's own calls).
async fn as_user(user: &str) -> kube::Client {
    let mut config = support::kube_config().await;
    config.auth_info.impersonate = Some(user.to_string());
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn the_shipped_roles_grant_what_their_collectors_need_and_no_more() {
    // Both shipped service accounts exist in the test environment with the shipped roles
    // (scripts/env-up.sh applies deploy/manifests' RBAC).
    let mut c = cfg(ALL, "sweeper-system");
    c.capa_namespace = "capa-system".into();
    c.lease = Some((
        "sweeper-system".into(),
        "sweeper".into(),
        Duration::from_secs(15),
    ));
    let full = check::rbac::check(&as_user(SA_USER).await, &c).await;
    assert_eq!(full.len(), 4, "{full:#?}");
    assert!(full.iter().all(|l| l.status == Status::Pass), "{full:#?}");

    // The external-only role with the cascade collector turned on: cascade's wildcard is denied,
    // the external collector's own permissions are all there.
    c.gates = FeatureGates::parse(
        "CascadeGC=true,TenantGC=false,ExternalResourceGC=true",
        &sweeper::catalog::gates(),
    )
    .unwrap();
    let narrow = check::rbac::check(&as_user(EXTERNAL_SA_USER).await, &c).await;
    let cascade = narrow
        .iter()
        .find(|l| l.message.starts_with("cascade:"))
        .unwrap();
    assert_eq!(cascade.status, Status::Fail, "{narrow:#?}");
    assert!(
        cascade.message.contains("delete */* (all namespaces)"),
        "{cascade:?}"
    );
    let external = narrow
        .iter()
        .find(|l| l.message.starts_with("external:"))
        .unwrap();
    assert_eq!(external.status, Status::Pass, "{narrow:#?}");
}

fn capa_deployment(gates: &str) -> Value {
    json!({
        "metadata": {
            "name": "capa-controller-manager",
            "labels": {"cluster.x-k8s.io/provider": "infrastructure-aws"}
        },
        "spec": {
            "selector": {"matchLabels": {"control-plane": "capa-controller-manager"}},
            "template": {
                "metadata": {"labels": {"control-plane": "capa-controller-manager"}},
                "spec": {"containers": [{
                    "name": "manager",
                    "image": "registry.k8s.io/cluster-api-aws/cluster-api-aws-controller:v2.9.0",
                    "args": ["--leader-elect", format!("--feature-gates=EKS=true,{gates}")]
                }]}
            }
        }
    })
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn capas_own_gc_is_found_off_or_on_in_its_deployment() {
    let mut off = TestScope::new("check-capa-off").await;
    let off_ns = off.namespace().await;
    create::<Deployment>(
        &off.client,
        &off_ns,
        capa_deployment("ExternalResourceGC=false"),
    )
    .await;
    let lines = check::capa::check(&off.client, &cfg(EXTERNAL, &off_ns)).await;
    assert_eq!(statuses(&lines), [Status::Pass], "{lines:#?}");

    let mut on = TestScope::new("check-capa-on").await;
    let on_ns = on.namespace().await;
    create::<Deployment>(
        &on.client,
        &on_ns,
        capa_deployment("ExternalResourceGC=true"),
    )
    .await;
    let lines = check::capa::check(&on.client, &cfg(EXTERNAL, &on_ns)).await;
    assert_eq!(statuses(&lines), [Status::Fail], "{lines:#?}");
    assert!(
        lines[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("EXTERNAL_RESOURCE_GC=false")
    );
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn every_identity_in_use_builds_its_session_or_is_named() {
    let mut scope = TestScope::new("check-aws").await;
    let c = scope.client.clone();
    support::capa::upstream_crds(&c).await;
    support::capa::identity_crds(&c).await;
    let ns = scope.namespace().await;
    let good = format!("{}-good", scope.name);
    let bad = format!("{}-bad", scope.name);
    support::capa::template_cluster(&c, &ns, &good, |_| {}).await;
    support::capa::template_cluster(&c, &ns, &bad, |ac| {
        ac["spec"]["identityRef"] =
            json!({"kind": "AWSClusterRoleIdentity", "name": format!("{bad}-missing")});
    })
    .await;
    let sessions = sweeper_aws::session::SessionCache::new(support::aws_config().await, None);
    let lines = check::aws::check(&c, &cfg(EXTERNAL, &ns), Some(&sessions)).await;
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let ok = lines.iter().find(|l| l.message.contains(&good)).unwrap();
    assert_eq!(ok.status, Status::Pass, "{lines:#?}");
    assert!(ok.message.contains("session built as arn:aws"), "{ok:?}");
    let refused = lines.iter().find(|l| l.message.contains(&bad)).unwrap();
    assert_eq!(refused.status, Status::Fail, "{lines:#?}");
    assert!(
        refused.message.contains("AWSClusterRoleIdentity"),
        "{refused:?}"
    );
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn kube_controller_managers_gc_is_seen_by_its_pod_or_its_lease() {
    // This environment's kube-controller-manager runs the namespace controller only, without
    // leader election: in a namespace of its own nothing is seen.
    let mut scope = TestScope::new("check-kcm").await;
    let c = scope.client.clone();
    let ns = scope.namespace().await;
    let lines = check::kube_gc::check(&c, &cfg(ALL, &ns)).await;
    assert_eq!(statuses(&lines), [Status::Pass], "{lines:#?}");

    // A controller manager holding its Lease: its garbage collector most likely runs.
    let renewed = micro(Timestamp::now());
    create::<Lease>(
        &c,
        &ns,
        json!({"metadata": {"name": "kube-controller-manager"},
               "spec": {"holderIdentity": "cp-1_abc", "leaseDurationSeconds": 3600,
                        "renewTime": renewed, "acquireTime": renewed}}),
    )
    .await;
    let lines = check::kube_gc::check(&c, &cfg(ALL, &ns)).await;
    assert_eq!(statuses(&lines), [Status::Fail], "{lines:#?}");
    assert!(lines[0].message.contains("cp-1_abc"));

    // Its pod, when readable, says more than the Lease: here, the garbage collector is off.
    create::<ServiceAccount>(&c, &ns, json!({"metadata": {"name": "default"}})).await;
    create::<Pod>(
        &c,
        &ns,
        json!({"metadata": {"name": "kube-controller-manager-cp-1",
                            "labels": {"component": "kube-controller-manager"}},
               "spec": {"automountServiceAccountToken": false,
                        "containers": [{"name": "kube-controller-manager",
                                        "image": "registry.k8s.io/kube-controller-manager:v1.33.0",
                                        "command": ["kube-controller-manager",
                                                    "--controllers=*,-garbagecollector"]}]}}),
    )
    .await;
    let lines = check::kube_gc::check(&c, &cfg(ALL, &ns)).await;
    assert_eq!(statuses(&lines), [Status::Pass], "{lines:#?}");
    assert!(lines[0].message.contains("is off"), "{lines:#?}");
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_fresh_lease_leads_an_expired_one_fails_and_a_pause_is_shown() {
    let mut scope = TestScope::new("check-state").await;
    let c = scope.client.clone();
    let ns = scope.namespace().await;
    let mut conf = cfg(EXTERNAL, &ns);
    conf.lease = Some((ns.clone(), "fresh".into(), Duration::from_secs(15)));
    let now = Timestamp::now();
    let lease = |name: &str, renewed: Timestamp| {
        json!({"metadata": {"name": name},
               "spec": {"holderIdentity": "sweeper-abc", "leaseDurationSeconds": 15,
                        "renewTime": micro(renewed)}})
    };
    create::<Lease>(&c, &ns, lease("fresh", now)).await;
    let old = now.checked_sub(SignedDuration::from_secs(600)).unwrap();
    create::<Lease>(&c, &ns, lease("stale", old)).await;

    let lines = check::state::check(&c, &conf).await;
    assert_eq!(
        statuses(&only(&lines, "leader")),
        [Status::Pass],
        "{lines:#?}"
    );
    assert_eq!(
        statuses(&only(&lines, "pause")),
        [Status::Pass],
        "{lines:#?}"
    );

    // The real `sweeper pause`, then an expired Lease.
    let (ok, _, err) = support::sweeper::cli(&[
        "pause",
        "-n",
        &ns,
        "--collector",
        "external",
        "--reason",
        "check test",
    ]);
    assert!(ok, "{err}");
    conf.lease = Some((ns.clone(), "stale".into(), Duration::from_secs(15)));
    let lines = check::state::check(&c, &conf).await;
    let leader = only(&lines, "leader");
    assert_eq!(statuses(&leader), [Status::Fail], "{lines:#?}");
    assert!(leader[0].message.contains("expired"), "{leader:?}");
    let pause = only(&lines, "pause");
    assert_eq!(statuses(&pause), [Status::Warn], "{lines:#?}");
    assert!(pause[0].message.contains("check test"), "{pause:?}");
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn the_archive_is_measured_against_its_budget() {
    let mut scope = TestScope::new("check-archive").await;
    let c = scope.client.clone();
    let ns = scope.namespace().await;
    // One record of ours, so the archive is not empty whatever else ran.
    create::<ConfigMap>(
        &c,
        &ns,
        json!({"metadata": {"name": "record", "labels": {"sweeper.dev/archive": "true"}},
               "data": {"entries": "x".repeat(4096)}}),
    )
    .await;
    let mut conf = cfg(ALL, &ns);
    let lines = check::archive::check(&c, &conf).await;
    assert_eq!(lines[0].status, Status::Pass, "{lines:#?}");
    conf.archive_budget_bytes = 1024;
    let lines = check::archive::check(&c, &conf).await;
    assert_eq!(lines[0].status, Status::Fail, "{lines:#?}");
    assert!(lines[0].message.contains("over the budget"), "{lines:#?}");
}

/// The command itself: table and JSON, exit 0 when every check passes and 1 when one fails, with
/// `sweeper run`'s flags.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn the_command_exits_by_its_verdict_in_table_and_json() {
    let mut scope = TestScope::new("check-cli").await;
    let c = scope.client.clone();
    support::capa::upstream_crds(&c).await;
    support::capa::identity_crds(&c).await;
    let ns = scope.namespace().await;
    create::<Deployment>(&c, &ns, capa_deployment("ExternalResourceGC=false")).await;
    let base = [
        "check",
        "--feature-gates=CascadeGC=false,TenantGC=false,ExternalResourceGC=true",
        "--namespace",
        &ns,
        "--capa-namespace",
        &ns,
        "--cluster-namespace",
        &ns,
    ];
    let (ok, out, err) = support::sweeper::cli(&base);
    assert!(ok, "every check passes here:\n{out}\n{err}");
    assert!(out.contains("Status check results are ✔"), "{out}");
    assert!(out.contains("capa\n----\n✔"), "{out}");

    // Leader election on, and no Lease: the run fails, and says so in JSON.
    let mut args = base.to_vec();
    args.extend([
        "--leader-elect",
        "--leader-elect-namespace",
        &ns,
        "-o",
        "json",
    ]);
    let (ok, out, err) = support::sweeper::cli(&args);
    assert!(!ok, "no Lease fails the check: {out}\n{err}");
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(report["success"], false);
    let leader: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["category"] == "leader")
        .collect();
    assert_eq!(leader.len(), 1, "{report:#}");
    assert_eq!(leader[0]["status"], "fail");
    assert!(leader[0]["hint"].as_str().is_some());
}
