//! The test environment is what CAPA's users run: a current Kubernetes, the upstream CRDs as they
//! are, and CAPA's own admission webhooks in the loop. These tests prove it is live, so that no
//! other test can pass only because a webhook or a validation is missing.

mod support;

use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::capa::{api, template_cluster};
use support::conformance;
use support::{EnvFacts, TestScope, unique_name};

const TASKS: &str = "aws.cluster.x-k8s.io/external-resource-tasks-gc";

fn on_the_default_server() -> bool {
    !conformance::server_is_1_20()
}

/// The API server is a current release (1.33 or newer: what CAPA's users run), not the old
/// fallback, unless the fallback was chosen on purpose.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn the_test_server_is_a_current_kubernetes() {
    if !on_the_default_server() {
        eprintln!("SKIPPED: SWEEPER_KUBE=1.20 chose the fallback server");
        return;
    }
    let scope = TestScope::new("adm-version").await;
    let v = scope
        .client
        .apiserver_version()
        .await
        .expect("read /version");
    let minor: u32 = v
        .minor
        .trim_end_matches('+')
        .parse()
        .expect("numeric minor");
    assert_eq!(v.major, "1");
    assert!(minor >= 33, "the test server is {}.{}", v.major, v.minor);
    assert_eq!(
        Some(v.git_version.trim_start_matches('v').to_string()),
        EnvFacts::load().try_get("SWEEPER_KUBE_VERSION"),
        "the server is the release scripts/go/kubernetes pins"
    );
}

/// CAPA's validating webhook is live: an update that puts one of sweeper's own task names into
/// CAPA's tasks annotation is refused with CAPA's own message, an update naming CAPA's tasks goes
/// through, and CAPA's defaulting webhook filled the identity on create.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn capas_webhook_refuses_sweepers_task_names_in_capas_annotation() {
    if !on_the_default_server() {
        eprintln!("SKIPPED: the 1.20 fallback runs no webhook");
        return;
    }
    let mut scope = TestScope::new("adm-capa").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    let name = unique_name("adm");
    let infra = template_cluster(&c, &ns, &name, |_| {}).await;
    let created = infra.get(&name).await.unwrap();
    assert_eq!(
        created.data["spec"]["identityRef"],
        json!({"kind": "AWSClusterControllerIdentity", "name": "default"}),
        "CAPA's defaulting webhook gave the cluster the controller identity"
    );

    let refused = infra
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {TASKS: "ebs-volume"}}})),
        )
        .await
        .expect_err("CAPA's webhook refuses a task name it does not know");
    let kube::Error::Api(status) = refused else {
        panic!("expected an API error, got {refused:?}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status
            .message
            .contains("contains unsupported GC task ebs-volume"),
        "CAPA's own message: {}",
        status.message
    );
    // CAPA splits on "," without trimming: a space is refused too.
    let spaced = infra
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {TASKS: "load-balancer, target-group"}}}),
            ),
        )
        .await;
    assert!(spaced.is_err(), "a space after the comma is refused");

    infra
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {TASKS: "load-balancer,security-group"}}}),
            ),
        )
        .await
        .expect("CAPA's own task names are accepted");

    // An AWSManagedControlPlane has no such check (CAPA's webhook for it ignores the annotation).
    let cps = api(
        &c,
        &ns,
        "controlplane.cluster.x-k8s.io/v1beta2",
        "AWSManagedControlPlane",
    );
    assert!(cps.list(&Default::default()).await.is_ok());
}
