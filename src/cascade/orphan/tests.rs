//! attempt-to-orphan against a scripted API server: the exact calls that release an owner deleted
//! with propagationPolicy=Orphan, and what must not happen (no dependent deleted, the owner's
//! finalizer kept while a dependent still names it).

use super::*;
use crate::cascade::context::CascadeConfig;
use crate::engine::graph::node::{MetaLite, OwnerRefLite, flag};
use crate::testing::MockApi;
use http::Method;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ApiResource;
use serde_json::json;
use tokio::sync::mpsc;

const CM: &str = "/api/v1/namespaces/ns/configmaps";

fn uid(n: u64) -> Uid {
    Uid([0, n])
}

/// ConfigMap `name` (uid `n`, resourceVersion `rv`) owned by the ConfigMaps `owner-<o>`.
fn meta(n: u64, name: &str, rv: u64, flags: u8, owners: &[u64]) -> MetaLite {
    MetaLite {
        uid: uid(n),
        odd_uid: None,
        name: name.into(),
        namespace: Some("ns".into()),
        resource_version: rv,
        flags,
        owners: owners
            .iter()
            .map(|&o| OwnerRefLite {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: format!("owner-{o}"),
                uid: uid(o),
                controller: false,
                block_owner_deletion: false,
            })
            .collect(),
    }
}

/// The collector's context on a mock API server, with ConfigMap served; `objects` applied as
/// the watch would have.
fn world(dry_run: bool, objects: &[MetaLite]) -> (Ctx, MockApi) {
    let (client, server) = MockApi::new();
    let (tx, _absent) = mpsc::unbounded_channel();
    let config = CascadeConfig {
        dry_run,
        ..Default::default()
    };
    let ctx = Ctx::new(client, config, Default::default(), tx, None);
    {
        let mut g = ctx.write();
        let k = g.kinds.intern("v1", "ConfigMap");
        g.kinds.set_resolved([ResolvedKind {
            resource: ApiResource::erase::<ConfigMap>(&()),
            namespaced: true,
        }]);
        for m in objects {
            g.apply(k, m);
        }
    }
    (ctx, server)
}

fn owner_json(uid: &str, finalizers: &[&str]) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "owner-1", "namespace": "ns", "uid": uid, "resourceVersion": "5",
                        "finalizers": finalizers}})
}

#[tokio::test]
async fn each_dependent_drops_the_reference_then_the_owner_is_released() {
    let orphaning = flag::DELETING | flag::ORPHAN;
    let (ctx, server) = world(
        false,
        &[
            meta(1, "owner-1", 5, orphaning, &[]),
            meta(2, "dep", 7, 0, &[1, 9]),
        ],
    );
    let owner_uid = ctx.read().uid_text(&uid(1));
    server
        .expect(Method::PATCH, &format!("{CM}/dep"))
        .respond(200, json!({"metadata": {"name": "dep"}}));
    server
        .expect(Method::GET, &format!("{CM}/owner-1"))
        .respond(200, owner_json(&owner_uid, &["orphan", "example.com/keep"]));
    server
        .expect(Method::PATCH, &format!("{CM}/owner-1"))
        .respond(200, owner_json(&owner_uid, &["example.com/keep"]));

    attempt_to_orphan(&ctx, uid(1)).await.unwrap();

    let calls = server.finish();
    assert_eq!(calls.len(), 3, "{calls:#?}");
    let refs = &calls[0].body["metadata"]["ownerReferences"];
    assert_eq!(refs.as_array().map(Vec::len), Some(1), "{refs}");
    assert_eq!(
        refs[0]["name"], "owner-9",
        "the other owner's reference stays"
    );
    assert_eq!(calls[0].body["metadata"]["resourceVersion"], "7");
    assert_eq!(
        calls[2].body["metadata"]["finalizers"],
        json!(["example.com/keep"]),
        "only `orphan` is removed; another controller's finalizer stays"
    );
    assert!(
        calls.iter().all(|c| c.method != Method::DELETE),
        "orphaning deletes nothing"
    );
}

#[tokio::test]
async fn a_dependent_not_rewritten_keeps_the_owners_finalizer() {
    let (ctx, server) = world(
        false,
        &[
            meta(1, "owner-1", 5, flag::DELETING | flag::ORPHAN, &[]),
            meta(2, "dep", 7, 0, &[1]),
        ],
    );
    server
        .expect(Method::PATCH, &format!("{CM}/dep"))
        .respond_status(409, "Conflict");

    let failure = attempt_to_orphan(&ctx, uid(1)).await.unwrap_err();

    assert_eq!(failure.resource, "v1/ConfigMap");
    assert_eq!(failure.error.reason(), "conflict");
    let calls = server.finish();
    assert_eq!(calls.len(), 1, "no GET or PATCH of the owner: {calls:#?}");
}

#[tokio::test]
async fn an_owner_not_orphaning_and_a_dry_run_make_no_call() {
    // Deleting, but in the background: not this queue's.
    let (ctx, server) = world(
        false,
        &[
            meta(1, "owner-1", 5, flag::DELETING, &[]),
            meta(2, "dep", 7, 0, &[1]),
        ],
    );
    attempt_to_orphan(&ctx, uid(1)).await.unwrap();
    assert!(server.finish().is_empty());

    let (ctx, server) = world(
        true,
        &[
            meta(1, "owner-1", 5, flag::DELETING | flag::ORPHAN, &[]),
            meta(2, "dep", 7, 0, &[1]),
        ],
    );
    attempt_to_orphan(&ctx, uid(1)).await.unwrap();
    assert!(server.finish().is_empty(), "a dry run only reports");
}
