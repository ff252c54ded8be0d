//! Bad input never stalls the tenant collector: a Tenant that cannot be decoded is reported on
//! the object and skipped while every other tenant is served; a Tenant watch that keeps failing
//! makes the replica not ready (with the reason on /readyz and /status); and SIGTERM ends the
//! process in time whatever state the watch is in.

mod support;

use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, PostParams};
use kube::{Api, Client};
use std::time::{Duration, Instant};
use support::TestScope;
use support::sweeper::{Sweeper, eventually};
use support::tenant::*;
use sweeper::api::tenant::Tenant;

const T: Duration = Duration::from_secs(60);
const TENANT_GATES: [&str; 2] = ["--feature-gates", "CascadeGC=false,TenantGC=true"];

/// A Tenant CRD with no schema at all, so the server stores tenants sweeper cannot decode (as an
/// older or hand-edited CRD would).
async fn schemaless_tenant_crd(c: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "tenants.tenant.kubezoo.io"},
        "spec": {"group": "tenant.kubezoo.io", "scope": "Cluster",
            "names": {"plural": "tenants", "singular": "tenant", "kind": "Tenant", "listKind": "TenantList"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    support::objects::replace_crd(c, crd).await;
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn an_undecodable_tenant_is_reported_and_every_other_tenant_is_still_served() {
    let scope = TestScope::new("tenantbad").await;
    let c = scope.client.clone();
    schemaless_tenant_crd(&c).await;
    let (bad, good) = ids();
    let tenants = kube::api::ApiResource::erase::<Tenant>(&());
    let bad_obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "tenant.kubezoo.io/v1alpha1", "kind": "Tenant",
        "metadata": {"name": bad, "labels": scope.tenant_labels()},
        "spec": {"id": {"not": "an id"}},
    }))
    .unwrap();
    Api::<DynamicObject>::all_with(c.clone(), &tenants)
        .create(&PostParams::default(), &bad_obj)
        .await
        .expect("create the undecodable tenant");
    cluster_role(&c, &format!("{bad}-keep"), None).await;
    tenant(&scope, &good).await;
    cluster_role(&c, &format!("{good}-reader"), None).await;

    let gc = Sweeper::start_scoped(&scope, &TENANT_GATES).await;
    assert!(
        eventually(T, || has_finalizer(&c, &good)).await,
        "the good tenant is served although another one cannot be decoded"
    );
    let reported = eventually(T, || async {
        support::objects::warnings_about(&c, &bad)
            .await
            .iter()
            .any(|w| w.starts_with("InvalidObject: ") && w.contains("spec.id"))
    })
    .await;
    assert!(
        reported,
        "a Warning Event names the field: {:?}",
        support::objects::warnings_about(&c, &bad).await
    );
    assert!(
        gc.metric("sweeper_invalid_objects_total{collector=\"tenant\",kind=\"Tenant\"}")
            .await
            >= 1.0,
        "counted in sweeper_invalid_objects_total"
    );
    let bad_now = Api::<DynamicObject>::all_with(c.clone(), &tenants)
        .get(&bad)
        .await
        .unwrap();
    assert!(
        bad_now.metadata.finalizers.unwrap_or_default().is_empty(),
        "nothing is taken on for it"
    );

    // The good tenant's teardown runs; the bad one's objects are untouched.
    delete_tenant(&c, &good).await;
    let released = eventually(T, || async {
        !exists(&Api::<Tenant>::all(c.clone()), &good).await
    })
    .await;
    assert!(released, "the good tenant is torn down");
    let roles: Api<ClusterRole> = Api::all(c.clone());
    assert!(!exists(&roles, &format!("{good}-reader")).await);
    assert!(
        exists(&roles, &format!("{bad}-keep")).await,
        "nothing is deleted for an undecodable tenant"
    );
    drop(gc);
    let _ = Api::<DynamicObject>::all_with(c.clone(), &tenants)
        .delete(&bad, &Default::default())
        .await;
    let _ = roles
        .delete(&format!("{bad}-keep"), &Default::default())
        .await;
    support::objects::install_sweeper_crds(&c).await;
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_failing_tenant_watch_makes_the_replica_not_ready_and_sigterm_still_stops_it() {
    let scope = TestScope::new("tenantwatch").await;
    let c = scope.client.clone();
    support::objects::install_sweeper_crds(&c).await;
    let (a, _) = ids();
    let user = format!("nolist-{a}");
    restricted_role(&c, &user, Some("tenants")).await;
    let mut gc =
        Sweeper::spawn_scoped_with(&scope, &TENANT_GATES, &impersonating_kubeconfig(&user));

    // Not ready, and saying why, for as long as the watch fails.
    let why = eventually(T, || async {
        let Ok((code, body)) = sweeper::http_get::get(&format!("{}/readyz", gc.base)).await else {
            return false;
        };
        code == 503 && body.contains("tenant (watch failing")
    })
    .await;
    assert!(why, "/readyz names the failing tenant watch");
    let (_, status) = gc.get("/status").await;
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert!(
        status["not_ready_reasons"]["tenant"]
            .as_str()
            .is_some_and(|r| r.contains("watch failing")),
        "/status carries the reason: {status}"
    );

    gc.signal("TERM");
    let t0 = Instant::now();
    let exited = gc.wait_exit(Duration::from_secs(25)).await;
    assert!(
        exited.is_some_and(|s| s.success()),
        "SIGTERM ends the process within the documented grace (exited: {exited:?} after {:?})",
        t0.elapsed()
    );
    let _ = Api::<ClusterRole>::all(c.clone())
        .delete(&format!("{user}-role"), &Default::default())
        .await;
}
