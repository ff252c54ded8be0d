//! One tenant teardown pass against a scripted API server (`scan` strategy: every kind is
//! listed, so the calls show the whole decision): what is deleted, in which order, with which
//! preconditions, and above all what is not — another tenant's objects whose names share the
//! id's characters — and when the pass may say "done" (the finalizer is released only then).

use super::*;
use crate::testing::MockApi;
use http::Method;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

const NAMESPACES: &str = "/api/v1/namespaces";
const CLUSTER_ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn res(group: &str, kind: &str, plural: &str) -> DeletableResource {
    DeletableResource {
        resource: ApiResource {
            group: group.into(),
            version: "v1".into(),
            api_version: if group.is_empty() {
                "v1".into()
            } else {
                format!("{group}/v1")
            },
            kind: kind.into(),
            plural: plural.into(),
        },
        namespaced: false,
    }
}

fn resources() -> Vec<DeletableResource> {
    vec![
        res("", "Namespace", "namespaces"),
        res("rbac.authorization.k8s.io", "ClusterRole", "clusterroles"),
        res(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    ]
}

fn settings(dry_run: bool) -> PassSettings {
    PassSettings {
        strategy: TenantGcStrategy::Scan,
        scan_kinds: Vec::new(),
        dry_run,
        delete_concurrency: 4,
        archive: None,
    }
}

/// `(name, deleting with these finalizers)`
type Obj<'a> = (&'a str, Option<&'a [&'a str]>);

/// A metadata-only list, as the API server answers `PartialObjectMetadataList`.
fn list(objs: &[Obj]) -> Value {
    let items: Vec<Value> = objs
        .iter()
        .map(|(name, deleting)| {
            let mut m =
                json!({"name": name, "uid": format!("uid-{name}"), "resourceVersion": "10"});
            if let Some(f) = deleting {
                m["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
                m["finalizers"] = json!(f);
            }
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": m})
        })
        .collect();
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
           "metadata": {"resourceVersion": "10"}, "items": items})
}

/// A DELETE that took effect at once: the API server answers with a Status.
fn gone() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 200})
}

fn tenant() -> TenantId {
    TenantId::parse("abc123", None).unwrap()
}

async fn run_pass(client: &Client, dry_run: bool) -> TenantPassReport {
    pass(
        client,
        &tenant(),
        &resources(),
        &settings(dry_run),
        &TenantMetrics::default(),
        &NameIndex::default(),
        None,
    )
    .await
}

/// The cluster of most tests: tenant `abc123`'s objects beside names that only look alike.
fn script_lists(server: &MockApi) {
    server.expect(Method::GET, CRDS).respond(
        200,
        list(&[
            ("things.abc123-example.com", None),
            // Tenant abc1234's group: shares abc123's characters, not its prefix `abc123-`.
            ("things.abc1234-example.com", None),
            ("things.example.com", None),
        ]),
    );
    server.expect(Method::GET, CLUSTER_ROLES).respond(
        200,
        list(&[
            ("abc123-admin", None),
            ("abc123x-admin", None),
            ("admin", None),
        ]),
    );
    server.expect(Method::GET, NAMESPACES).respond(
        200,
        list(&[
            ("abc123-app", None),
            ("abc1234-app", None),
            ("abc12-app", None),
            ("xabc123-app", None),
            ("abc123", None),
        ]),
    );
}

#[tokio::test]
async fn only_the_tenants_objects_are_deleted_never_another_tenants_sharing_its_characters() {
    let (client, server) = MockApi::new();
    script_lists(&server);
    for path in [
        format!("{CRDS}/things.abc123-example.com"),
        format!("{CLUSTER_ROLES}/abc123-admin"),
        format!("{NAMESPACES}/abc123-app"),
    ] {
        server.expect(Method::DELETE, &path).respond(200, gone());
    }

    let report = run_pass(&client, false).await;

    let deletes: Vec<_> = server
        .finish()
        .into_iter()
        .filter(|c| c.method == Method::DELETE)
        .collect();
    let paths: Vec<&str> = deletes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.abc123-example.com",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/abc123-admin",
            "/api/v1/namespaces/abc123-app",
        ],
        "the tenant's CRDs first, its namespaces last, and nothing of abc1234, abc12, xabc123"
    );
    for d in &deletes {
        let name = d.path.rsplit('/').next().unwrap();
        assert_eq!(
            d.body["preconditions"],
            json!({"uid": format!("uid-{name}")}),
            "a same-named object created since the list is not deleted"
        );
    }
    assert_eq!(report.deleted, 3);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.done, "everything went at once: the finalizer may go");
}

#[tokio::test]
async fn a_pass_is_not_done_while_an_object_is_held_by_finalizers() {
    let (client, server) = MockApi::new();
    server.expect(Method::GET, CRDS).respond(200, list(&[]));
    server
        .expect(Method::GET, CLUSTER_ROLES)
        .respond(200, list(&[("abc123-admin", None)]));
    server
        .expect(Method::GET, NAMESPACES)
        .respond(200, list(&[("abc123-app", Some(&["kubernetes"]))]));
    // Deleted, but a finalizer holds it: the API server answers with the object.
    server
        .expect(Method::DELETE, &format!("{CLUSTER_ROLES}/abc123-admin"))
        .respond(
            200,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "abc123-admin", "finalizers": ["x"],
                                "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        );

    let report = run_pass(&client, false).await;

    let calls = server.finish();
    assert!(
        !calls
            .iter()
            .any(|c| c.method == Method::DELETE && c.path.starts_with(NAMESPACES)),
        "a namespace already being deleted is not deleted again: {calls:?}"
    );
    assert!(!report.done, "the finalizer must stay");
    assert_eq!(
        report.stuck,
        vec!["Namespace abc123-app [kubernetes]".to_string()]
    );
    assert_eq!(report.remaining.get("Namespace"), Some(&1));
}

#[tokio::test]
async fn a_tenant_with_nothing_left_is_done_without_a_delete() {
    let (client, server) = MockApi::new();
    server
        .expect(Method::GET, CRDS)
        .respond(200, list(&[("things.example.com", None)]));
    server
        .expect(Method::GET, CLUSTER_ROLES)
        .respond(200, list(&[("admin", None)]));
    server
        .expect(Method::GET, NAMESPACES)
        .respond(200, list(&[("abc1234-app", None)]));

    let report = run_pass(&client, false).await;

    let calls = server.finish();
    assert!(calls.iter().all(|c| c.method == Method::GET), "{calls:?}");
    assert!(report.done);
    assert_eq!(report.deleted, 0);
}

#[tokio::test]
async fn a_kind_that_cannot_be_listed_keeps_the_finalizer_but_the_rest_is_still_deleted() {
    let (client, server) = MockApi::new();
    server.expect(Method::GET, CRDS).respond(200, list(&[]));
    server
        .expect(Method::GET, CLUSTER_ROLES)
        .respond_status(403, "Forbidden");
    server
        .expect(Method::GET, NAMESPACES)
        .respond(200, list(&[("abc123-app", None)]));
    server
        .expect(Method::DELETE, &format!("{NAMESPACES}/abc123-app"))
        .respond(200, gone());

    let report = run_pass(&client, false).await;

    server.finish();
    assert_eq!(report.deleted, 1);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert!(
        !report.done,
        "an unlisted kind may still hold the tenant's objects"
    );
}

#[tokio::test]
async fn a_failed_delete_keeps_the_finalizer() {
    let (client, server) = MockApi::new();
    server.expect(Method::GET, CRDS).respond(200, list(&[]));
    server
        .expect(Method::GET, CLUSTER_ROLES)
        .respond(200, list(&[]));
    server
        .expect(Method::GET, NAMESPACES)
        .respond(200, list(&[("abc123-app", None)]));
    server
        .expect(Method::DELETE, &format!("{NAMESPACES}/abc123-app"))
        .respond_status(403, "Forbidden");

    let report = run_pass(&client, false).await;

    server.finish();
    assert_eq!(report.deleted, 0);
    assert!(
        matches!(report.errors.as_slice(), [PassError::Delete { name, .. }] if name == "abc123-app")
    );
    assert!(!report.done);
}

#[tokio::test]
async fn a_dry_run_lists_what_it_would_delete_and_deletes_nothing() {
    let (client, server) = MockApi::new();
    script_lists(&server);

    let report = run_pass(&client, true).await;

    let calls = server.finish();
    assert!(calls.iter().all(|c| c.method == Method::GET), "{calls:?}");
    let mut would = report.would_delete.clone();
    would.sort();
    assert_eq!(
        would,
        vec![
            "Namespace abc123-app",
            "apiextensions.k8s.io/CustomResourceDefinition things.abc123-example.com",
            "rbac.authorization.k8s.io/ClusterRole abc123-admin",
        ]
    );
    assert!(!report.done, "a dry run never releases");
}

#[tokio::test]
async fn with_the_archive_each_object_is_recorded_first_and_deleted_at_the_archived_version() {
    let (client, server) = MockApi::new();
    server.expect(Method::GET, CRDS).respond(200, list(&[]));
    server
        .expect(Method::GET, CLUSTER_ROLES)
        .respond(200, list(&[]));
    server
        .expect(Method::GET, NAMESPACES)
        .respond(200, list(&[("abc123-app", None)]));
    // The archive reads the whole object, then writes the record in sweeper's namespace.
    server
        .expect(Method::GET, &format!("{NAMESPACES}/abc123-app"))
        .respond(
            200,
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "abc123-app", "uid": "uid-abc123-app", "resourceVersion": "11"}}),
        );
    server
        .expect(
            Method::POST,
            &format!("{NAMESPACES}/sweeper-system/configmaps"),
        )
        .respond(
            201,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "r"}}),
        );
    server
        .expect(Method::DELETE, &format!("{NAMESPACES}/abc123-app"))
        .respond(200, gone());
    server
        .expect(
            Method::PATCH,
            &format!("{NAMESPACES}/sweeper-system/configmaps/*"),
        )
        .respond(
            200,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "r"},
                             "data": {"uid-abc123-app.json": "{}"}}),
        );
    let mut s = settings(false);
    s.archive = Some(std::sync::Arc::new(crate::archive::store::Archiver::new(
        client.clone(),
        Default::default(),
        "tenant",
        Default::default(),
    )));

    let report = pass(
        &client,
        &tenant(),
        &resources(),
        &s,
        &TenantMetrics::default(),
        &NameIndex::default(),
        None,
    )
    .await;

    let calls: Vec<_> = server
        .finish()
        .into_iter()
        .filter(|c| c.path.starts_with(&format!("{NAMESPACES}/")))
        .collect();
    let order: Vec<Method> = calls.iter().map(|c| c.method.clone()).collect();
    assert_eq!(
        order,
        vec![Method::GET, Method::POST, Method::DELETE, Method::PATCH]
    );
    assert_eq!(
        calls[1].body["metadata"]["labels"]["sweeper.dev/archive-tenant"],
        "abc123"
    );
    assert_eq!(
        calls[2].body["preconditions"],
        json!({"uid": "uid-abc123-app", "resourceVersion": "11"})
    );
    assert!(report.done);
}

fn found(kind: &str, name: &str, deleting: bool, finalizers: &[&str]) -> Found {
    Found {
        resource: res("rbac.authorization.k8s.io", kind, "x").resource,
        name: name.into(),
        uid: format!("uid-{name}"),
        deleting,
        finalizers: finalizers.iter().map(|f| f.to_string()).collect(),
    }
}

#[test]
fn triage_deletes_only_what_is_not_already_going_and_a_dry_run_nothing() {
    let stage = [
        found("ClusterRole", "t1-a", false, &[]),
        found("ClusterRole", "t1-held", true, &["example.com/hold"]),
        found("ClusterRole", "t1-going", true, &[]),
    ];
    let mut report = TenantPassReport::default();
    let todo = triage(stage.iter().collect(), false, &mut report);
    assert_eq!(
        todo.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
        ["t1-a"]
    );
    assert_eq!(report.remaining["rbac.authorization.k8s.io/ClusterRole"], 3);
    assert_eq!(
        report.stuck,
        ["rbac.authorization.k8s.io/ClusterRole t1-held [example.com/hold]"]
    );

    let mut report = TenantPassReport::default();
    let todo = triage(stage.iter().collect(), true, &mut report);
    assert!(todo.is_empty(), "a dry run deletes nothing");
    assert_eq!(
        report.would_delete,
        ["rbac.authorization.k8s.io/ClusterRole t1-a"]
    );
}

#[test]
fn only_objects_the_archive_recorded_unchanged_are_deleted() {
    use crate::archive::store::{ArchiveError, Prepared, RecordRef, Ticket};
    let ticket = |uid: &str| Ticket {
        record: RecordRef {
            namespace: "sweeper-system".into(),
            name: "r".into(),
            kind: crate::archive::record_kind::RecordKind::ConfigMap,
        },
        uid: uid.into(),
        resource_version: "1".into(),
    };
    let ready = vec![
        (found("CustomResourceDefinition", "a", false, &[]), vec![]),
        (found("ClusterRole", "changed", false, &[]), vec![]),
        (found("ClusterRole", "failed", false, &[]), vec![]),
    ];
    // The CRD's item and one of its custom resources (gone meanwhile), then the other two.
    let of = vec![(0, true), (0, false), (1, true), (2, true)];
    let prepared = vec![
        Prepared::Recorded(ticket("uid-a")),
        Prepared::Changed,
        Prepared::Changed,
        Prepared::Failed(ArchiveError::List(kube::Error::LinesCodecMaxLineLengthExceeded).into()),
    ];
    let (tickets, go, errors) = admitted(&ready, prepared, of);
    assert_eq!(
        go,
        [true, false, false],
        "changed or unrecorded objects wait"
    );
    assert_eq!(tickets[0], [ticket("uid-a")]);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].to_string().contains("failed"), "{}", errors[0]);
}

#[test]
fn a_teardown_is_checked_against_the_deleting_tenants_own_revision() {
    // (being deleted, the Tenant's resourceVersion) -> the revision the last check proves against
    let table = [
        (true, Some("4711"), Some(4711)),
        (false, Some("4711"), None), // not deleting: no teardown began; the store is read
        (true, None, None),
        (true, Some("opaque-7"), None), // not etcd's number: the store is read
    ];
    for (deleting, rv, want) in table {
        assert_eq!(teardown_revision(deleting, rv), want, "{deleting} {rv:?}");
    }
}
