//! The tenant collector through the engine's reconcile against a scripted API server: the
//! `kubezoo.io/tenant` finalizer is released only by a pass that found nothing of the tenant
//! left, and never while an API group it could not discover might still hold some.

use super::*;
use crate::engine::discovery::{DeletableResource, FailedGroup};
use crate::testing::MockApi;
use http::Method;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

const TENANT: &str = "/apis/tenant.kubezoo.io/v1alpha1/tenants/abc123";
const NAMESPACES: &str = "/api/v1/namespaces";

fn settings() -> PassSettings {
    PassSettings {
        strategy: TenantGcStrategy::Scan,
        scan_kinds: Vec::new(),
        dry_run: false,
        delete_concurrency: 1,
        archive: None,
    }
}

fn collector(client: &Client, failed: Vec<FailedGroup>) -> TenantCollector {
    let resources = vec![DeletableResource {
        resource: ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
        namespaced: false,
    }];
    let (_tx, rx) = watch::channel(Some(Arc::new(DiscoveryReport { resources, failed })));
    TenantCollector::new(
        client.clone(),
        settings(),
        TenantMetrics::default(),
        rx,
        TeardownRegistry::default(),
        Family::default(),
        crate::engine::leader::Fence::open(),
    )
}

fn tenant_json() -> Value {
    json!({
        "apiVersion": "tenant.kubezoo.io/v1alpha1", "kind": "Tenant",
        "metadata": {"name": "abc123", "uid": "u-t", "finalizers": [FINALIZER],
                     "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {}})
}

fn deleting_tenant() -> Arc<Guarded<Tenant>> {
    Arc::new(Guarded(Ok(serde_json::from_value(tenant_json()).unwrap())))
}

fn namespaces(names: &[&str]) -> Value {
    let items: Vec<Value> = names
        .iter()
        .map(|n| {
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                        "metadata": {"name": n, "uid": format!("uid-{n}")}})
        })
        .collect();
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {}, "items": items})
}

fn script_crds(server: &MockApi) {
    server
        .expect(
            Method::GET,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        )
        .respond(200, namespaces(&[]));
}

#[tokio::test]
async fn the_finalizer_goes_when_nothing_of_the_tenant_is_left() {
    let (client, server) = MockApi::new();
    script_crds(&server);
    server
        .expect(Method::GET, NAMESPACES)
        .respond(200, namespaces(&["abc1234-app", "other"]));
    server
        .expect(Method::PATCH, TENANT)
        .respond(200, tenant_json());
    server.allow_events();
    let c = collector(&client, Vec::new());

    crate::engine::finalizer_controller::reconcile(deleting_tenant(), c.0.clone())
        .await
        .unwrap();

    assert_eq!(server.events(), vec!["TeardownComplete".to_string()]);
    let calls = server.finish();
    let release = calls.iter().find(|c| c.path == TENANT).unwrap();
    assert_eq!(
        release.body,
        json!([
            {"op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER},
            {"op": "remove", "path": "/metadata/finalizers/0"},
        ])
    );
    assert!(
        calls.iter().all(|c| c.method != Method::DELETE),
        "abc1234-app is another tenant's: {calls:?}"
    );
}

#[tokio::test]
async fn the_finalizer_stays_while_the_pass_found_objects_held_by_finalizers() {
    let (client, server) = MockApi::new();
    script_crds(&server);
    server.expect(Method::GET, NAMESPACES).respond(
        200,
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {},
               "items": [{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                          "metadata": {"name": "abc123-app", "uid": "uid-abc123-app",
                                       "deletionTimestamp": "2026-01-01T00:00:00Z",
                                       "finalizers": ["kubernetes"]}}]}),
    );
    server
        .expect(Method::PATCH, &format!("{TENANT}/status"))
        .respond(200, tenant_json());
    let c = collector(&client, Vec::new());

    let action = crate::engine::finalizer_controller::reconcile(deleting_tenant(), c.0.clone())
        .await
        .unwrap();

    let calls = server.finish();
    assert!(
        !calls.iter().any(|c| c.path == TENANT),
        "no finalizer patch: {calls:?}"
    );
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(Duration::from_secs(2))
    );
    let status = &calls.last().unwrap().body["status"];
    assert_eq!(status["phase"], "Deleting", "{status}");
    assert_eq!(
        status["stuck"],
        json!(["Namespace abc123-app [kubernetes]"])
    );
}

#[tokio::test]
async fn the_finalizer_stays_while_an_api_group_failed_discovery() {
    let (client, server) = MockApi::new();
    script_crds(&server);
    server
        .expect(Method::GET, NAMESPACES)
        .respond(200, namespaces(&[]));
    server
        .expect(Method::PATCH, &format!("{TENANT}/status"))
        .respond(200, tenant_json());
    server.allow_events();
    let failed = vec![FailedGroup {
        group_version: "metrics.k8s.io/v1beta1".into(),
        error: "503".into(),
    }];
    let c = collector(&client, failed);

    crate::engine::finalizer_controller::reconcile(deleting_tenant(), c.0.clone())
        .await
        .unwrap();

    assert_eq!(server.events(), vec!["TeardownBlocked".to_string()]);
    let calls = server.finish();
    assert!(!calls.iter().any(|c| c.path == TENANT), "{calls:?}");
}
