//! attempt-to-delete against a scripted API server (the Kubernetes GC's
//! `TestAttemptToDeleteItem`): each test builds the graph a watch would have built, runs one
//! attempt, and asserts the exact calls made — and, for every delete path, what is NOT deleted.

use super::*;
use crate::cascade::context::CascadeConfig;
use crate::engine::graph::kinds::ResolvedKind;
use crate::engine::graph::node::{MetaLite, OwnerRefLite, flag};
use crate::testing::MockApi;
use http::Method;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ApiResource;
use serde_json::json;
use std::sync::Arc;
use tokio::sync::mpsc;

const CM: &str = "/api/v1/namespaces/ns/configmaps";

fn uid(n: u64) -> Uid {
    Uid([0, n])
}

/// A ConfigMap `name` in `ns` at resourceVersion `rv`, owned by the ConfigMaps `owners`
/// (`(uid, blockOwnerDeletion)`), named `owner-<n>`.
fn meta(n: u64, name: &str, rv: u64, flags: u8, owners: &[(u64, bool)]) -> MetaLite {
    MetaLite {
        uid: uid(n),
        odd_uid: None,
        name: name.into(),
        namespace: Some("ns".into()),
        resource_version: rv,
        flags,
        owners: owners
            .iter()
            .map(|&(o, block)| OwnerRefLite {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: format!("owner-{o}"),
                uid: uid(o),
                controller: true,
                block_owner_deletion: block,
            })
            .collect(),
    }
}

struct World {
    ctx: Ctx,
    server: MockApi,
    absent_rx: mpsc::UnboundedReceiver<Uid>,
    kind: u16,
}

fn world(dry_run: bool) -> World {
    let (client, server) = MockApi::new();
    let (tx, absent_rx) = mpsc::unbounded_channel();
    let config = CascadeConfig {
        dry_run,
        ..Default::default()
    };
    let ctx = Ctx::new(client, config, Default::default(), tx, None);
    let kind = {
        let mut g = ctx.write();
        let k = g.kinds.intern("v1", "ConfigMap");
        g.kinds.set_resolved([ResolvedKind {
            resource: ApiResource::erase::<ConfigMap>(&()),
            namespaced: true,
        }]);
        k
    };
    World {
        ctx,
        server,
        absent_rx,
        kind,
    }
}

impl World {
    fn apply(&self, m: MetaLite) {
        self.ctx.write().apply(self.kind, &m);
    }

    fn uid_text(&self, n: u64) -> String {
        self.ctx.read().uid_text(&uid(n))
    }
}

/// A ConfigMap's metadata as the API server returns it.
fn cm_json(name: &str, uid: &str, rv: &str, finalizers: &[&str]) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv,
                        "finalizers": finalizers}})
}

#[tokio::test]
async fn a_dependent_whose_only_owner_is_gone_is_deleted_once_with_uid_and_version_preconditions() {
    let w = world(false);
    w.apply(meta(2, "dep", 7, 0, &[(1, false)]));
    w.ctx.write().virtual_absent(&uid(1));
    w.server
        .expect(Method::DELETE, &format!("{CM}/dep"))
        .respond(200, cm_json("dep", &w.uid_text(2), "8", &[]));

    attempt_to_delete(&w.ctx, uid(2))
        .await
        .map_err(|e| e.error)
        .unwrap();

    let calls = w.server.finish();
    assert_eq!(calls.len(), 1, "exactly one call, the DELETE: {calls:?}");
    let body = &calls[0].body;
    assert_eq!(body["preconditions"]["uid"], w.uid_text(2));
    assert_eq!(body["preconditions"]["resourceVersion"], "7");
    assert_eq!(body["propagationPolicy"], "Background");
}

#[tokio::test]
async fn a_dependent_with_a_solid_owner_is_not_deleted() {
    let w = world(false);
    w.apply(meta(1, "owner-1", 3, 0, &[]));
    w.apply(meta(2, "dep", 7, 0, &[(1, false)]));

    attempt_to_delete(&w.ctx, uid(2))
        .await
        .map_err(|e| e.error)
        .unwrap();

    assert!(
        w.server.finish().is_empty(),
        "no call at all, above all no DELETE"
    );
}

#[tokio::test]
async fn an_owner_still_being_looked_up_keeps_its_dependent() {
    let w = world(false);
    // The owner was never observed and not yet verified absent: Pending.
    w.apply(meta(2, "dep", 7, 0, &[(1, false)]));

    attempt_to_delete(&w.ctx, uid(2))
        .await
        .map_err(|e| e.error)
        .unwrap();

    assert!(
        w.server.finish().is_empty(),
        "nothing deleted while the owner may exist"
    );
}

#[tokio::test]
async fn a_solid_owner_keeps_the_dependent_and_only_the_dangling_reference_is_dropped() {
    let w = world(false);
    w.apply(meta(1, "owner-1", 3, 0, &[]));
    w.apply(meta(3, "dep", 7, 0, &[(1, false), (2, true)]));
    w.ctx.write().virtual_absent(&uid(2));
    w.server
        .expect(Method::PATCH, &format!("{CM}/dep"))
        .respond(200, cm_json("dep", &w.uid_text(3), "8", &[]));

    attempt_to_delete(&w.ctx, uid(3))
        .await
        .map_err(|e| e.error)
        .unwrap();

    let calls = w.server.finish();
    assert_eq!(calls.len(), 1, "one PATCH, no DELETE: {calls:?}");
    let meta = &calls[0].body["metadata"];
    assert_eq!(
        meta["resourceVersion"], "7",
        "guarded by the version it was computed from"
    );
    let refs = meta["ownerReferences"].as_array().unwrap();
    assert_eq!(refs.len(), 1, "{refs:?}");
    assert_eq!(refs[0]["uid"], w.uid_text(1), "the solid owner stays");
    assert_eq!(refs[0]["name"], "owner-1");
}

#[tokio::test]
async fn a_conflict_on_delete_is_returned_for_reclassification_and_the_fresh_view_decides() {
    let w = world(false);
    w.apply(meta(2, "dep", 7, 0, &[(1, false)]));
    w.ctx.write().virtual_absent(&uid(1));
    w.server
        .expect(Method::DELETE, &format!("{CM}/dep"))
        .respond_status(409, "Conflict");

    let err = attempt_to_delete(&w.ctx, uid(2)).await.unwrap_err().error;
    assert!(
        matches!(err, WorkError::Action(ActionError::Conflict { .. })),
        "a 409 is a conflict (re-classified without a warning), got {err}"
    );
    // The object changed: it was adopted by a live owner. The watch delivers that, and the
    // retry classifies the fresh view: nothing is deleted.
    w.apply(meta(4, "new-owner", 9, 0, &[]));
    let mut adopted = meta(2, "dep", 10, 0, &[(4, false)]);
    adopted.owners[0].name = "new-owner".into();
    w.apply(adopted);
    attempt_to_delete(&w.ctx, uid(2))
        .await
        .map_err(|e| e.error)
        .unwrap();

    let calls = w.server.finish();
    assert_eq!(calls.len(), 1, "only the refused DELETE: {calls:?}");
}

#[tokio::test]
async fn the_worker_retries_a_conflicted_delete_with_the_new_version_as_precondition() {
    let w = world(false);
    w.apply(meta(2, "dep", 7, 0, &[(1, false)]));
    w.ctx.write().virtual_absent(&uid(1));
    w.server
        .expect(Method::DELETE, &format!("{CM}/dep"))
        .respond_status(409, "Conflict");
    w.server
        .expect(Method::DELETE, &format!("{CM}/dep"))
        .respond(200, cm_json("dep", &w.uid_text(2), "9", &[]));
    let ctx = Arc::new(w.ctx);
    ctx.delete_q.add(uid(2));
    let worker = tokio::spawn(crate::cascade::driver::run(
        ctx.clone(),
        crate::cascade::driver::Queue::Delete,
    ));
    w.server.wait_for_calls(1).await;
    // The watch delivers the change that caused the conflict before the retry (its backoff).
    ctx.write()
        .apply(w.kind, &meta(2, "dep", 8, 0, &[(1, false)]));
    w.server.wait_for_calls(2).await;
    ctx.delete_q.shutdown();
    worker.await.unwrap();

    let calls = w.server.finish();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].body["preconditions"]["resourceVersion"], "7");
    assert_eq!(
        calls[1].body["preconditions"]["resourceVersion"], "8",
        "the retry re-read the graph"
    );
    assert_eq!(
        calls[1].body["preconditions"]["uid"],
        calls[0].body["preconditions"]["uid"]
    );
}

#[tokio::test]
async fn a_dry_run_deletes_nothing() {
    let w = world(true);
    w.apply(meta(2, "dep", 7, 0, &[(1, false)]));
    w.ctx.write().virtual_absent(&uid(1));

    attempt_to_delete(&w.ctx, uid(2))
        .await
        .map_err(|e| e.error)
        .unwrap();

    assert!(w.server.finish().is_empty());
}

#[tokio::test]
async fn an_object_being_deleted_by_someone_else_is_left_alone() {
    let w = world(false);
    w.apply(meta(2, "dep", 7, flag::DELETING, &[(1, false)]));
    w.ctx.write().virtual_absent(&uid(1));

    attempt_to_delete(&w.ctx, uid(2))
        .await
        .map_err(|e| e.error)
        .unwrap();

    assert!(w.server.finish().is_empty());
}

#[tokio::test]
async fn a_virtual_owner_not_found_is_reported_absent_and_nothing_is_deleted() {
    let mut w = world(false);
    w.apply(meta(2, "dep", 7, 0, &[(1, false)]));
    w.server
        .expect(Method::GET, &format!("{CM}/owner-1"))
        .respond_status(404, "NotFound");

    attempt_to_delete(&w.ctx, uid(1))
        .await
        .map_err(|e| e.error)
        .unwrap();

    let calls = w.server.finish();
    assert_eq!(calls.len(), 1, "one lookup, no DELETE: {calls:?}");
    assert_eq!(w.absent_rx.try_recv().ok(), Some(uid(1)));
}

#[tokio::test]
async fn a_virtual_owner_replaced_under_its_name_is_absent() {
    let mut w = world(false);
    w.apply(meta(2, "dep", 7, 0, &[(1, false)]));
    w.server
        .expect(Method::GET, &format!("{CM}/owner-1"))
        .respond(200, cm_json("owner-1", "another-uid", "5", &[]));

    attempt_to_delete(&w.ctx, uid(1))
        .await
        .map_err(|e| e.error)
        .unwrap();

    w.server.finish();
    assert_eq!(w.absent_rx.try_recv().ok(), Some(uid(1)));
}

#[tokio::test]
async fn a_virtual_owner_that_exists_with_its_uid_keeps_its_dependents() {
    let mut w = world(false);
    w.apply(meta(2, "dep", 7, 0, &[(1, false)]));
    w.server
        .expect(Method::GET, &format!("{CM}/owner-1"))
        .respond(200, cm_json("owner-1", &w.uid_text(1), "5", &[]));

    attempt_to_delete(&w.ctx, uid(1))
        .await
        .map_err(|e| e.error)
        .unwrap();

    let calls = w.server.finish();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(
        w.absent_rx.try_recv().is_err(),
        "the owner exists: nothing collected"
    );
}

#[tokio::test]
async fn foreground_deletion_finishes_by_removing_only_its_finalizers_once_no_dependent_blocks() {
    let w = world(false);
    w.apply(meta(
        1,
        "owner-1",
        3,
        flag::DELETING | flag::FOREGROUND,
        &[],
    ));
    let owner_uid = w.uid_text(1);
    w.server
        .expect(Method::GET, &format!("{CM}/owner-1"))
        .respond(
            200,
            cm_json(
                "owner-1",
                &owner_uid,
                "4",
                &["example.com/keep", "foregroundDeletion"],
            ),
        );
    w.server
        .expect(Method::PATCH, &format!("{CM}/owner-1"))
        .respond(
            200,
            cm_json("owner-1", &owner_uid, "5", &["example.com/keep"]),
        );

    attempt_to_delete(&w.ctx, uid(1))
        .await
        .map_err(|e| e.error)
        .unwrap();

    let calls = w.server.finish();
    assert_eq!(calls.len(), 2, "read, then one PATCH; no DELETE: {calls:?}");
    assert_eq!(
        calls[1].body,
        json!({"metadata": {"finalizers": ["example.com/keep"], "resourceVersion": "4"}}),
        "another controller's finalizer survives; guarded by the version read"
    );
}

#[tokio::test]
async fn foreground_deletion_waits_while_a_dependent_blocks_and_queues_it() {
    let w = world(false);
    w.apply(meta(
        1,
        "owner-1",
        3,
        flag::DELETING | flag::FOREGROUND,
        &[],
    ));
    w.apply(meta(2, "dep", 7, 0, &[(1, true)]));
    // Drain what the graph queued so far; only the attempt's own queuing is looked at.
    while !w.ctx.delete_q.is_empty() {
        let u = w.ctx.delete_q.get().await.unwrap();
        w.ctx.delete_q.done(&u);
    }

    attempt_to_delete(&w.ctx, uid(1))
        .await
        .map_err(|e| e.error)
        .unwrap();

    assert!(
        w.server.finish().is_empty(),
        "the finalizer stays while a dependent blocks"
    );
    assert_eq!(
        w.ctx.delete_q.get().await,
        Some(uid(2)),
        "the blocking dependent is collected"
    );
}

#[tokio::test]
async fn a_completed_background_cascade_releases_cascade_complete_and_reports_it() {
    let w = world(false);
    w.apply(meta(
        1,
        "owner-1",
        3,
        flag::DELETING | flag::CASCADE_COMPLETE,
        &[],
    ));
    let owner_uid = w.uid_text(1);
    w.server.allow_events();
    w.server
        .expect(Method::GET, &format!("{CM}/owner-1"))
        .respond(
            200,
            cm_json("owner-1", &owner_uid, "4", &[FINALIZER_CASCADE_COMPLETE]),
        );
    w.server
        .expect(Method::PATCH, &format!("{CM}/owner-1"))
        .respond(200, cm_json("owner-1", &owner_uid, "5", &[]));

    attempt_to_delete(&w.ctx, uid(1))
        .await
        .map_err(|e| e.error)
        .unwrap();

    assert_eq!(w.server.events(), vec!["CascadeComplete".to_string()]);
    let calls = w.server.finish();
    let patch = calls.iter().find(|c| c.method == Method::PATCH).unwrap();
    assert_eq!(patch.body["metadata"]["finalizers"], json!([]));
    assert!(calls.iter().all(|c| c.method != Method::DELETE));
}

#[tokio::test]
async fn a_background_cascade_with_dependents_left_keeps_its_finalizer() {
    let w = world(false);
    w.apply(meta(
        1,
        "owner-1",
        3,
        flag::DELETING | flag::CASCADE_COMPLETE,
        &[],
    ));
    w.apply(meta(2, "dep", 7, 0, &[(1, false)]));

    attempt_to_delete(&w.ctx, uid(1))
        .await
        .map_err(|e| e.error)
        .unwrap();

    assert!(
        w.server.finish().is_empty(),
        "no release, no delete of the owner"
    );
}

#[tokio::test]
async fn the_archive_record_is_written_before_the_delete_which_is_guarded_by_the_archived_version()
{
    let (client, server) = MockApi::new();
    let (tx, _absent_rx) = mpsc::unbounded_channel();
    let archiver = Arc::new(crate::archive::store::Archiver::new(
        client.clone(),
        Default::default(),
        "cascade",
        Default::default(),
    ));
    let batcher =
        crate::archive::batch::Batcher::start(archiver, 10, crate::archive::batch::GATHER);
    let ctx = Ctx::new(
        client,
        CascadeConfig::default(),
        Default::default(),
        tx,
        Some(batcher),
    );
    let kind = {
        let mut g = ctx.write();
        let k = g.kinds.intern("v1", "ConfigMap");
        g.kinds.set_resolved([ResolvedKind {
            resource: ApiResource::erase::<ConfigMap>(&()),
            namespaced: true,
        }]);
        k
    };
    ctx.write()
        .apply(kind, &meta(2, "dep", 7, 0, &[(1, false)]));
    ctx.write().virtual_absent(&uid(1));
    let dep_uid = ctx.read().uid_text(&uid(2));
    server
        .expect(Method::GET, &format!("{CM}/dep"))
        .respond(200, cm_json("dep", &dep_uid, "7", &[]));
    server.expect(Method::POST, CM).respond(
        201,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "r"}}),
    );
    server
        .expect(Method::DELETE, &format!("{CM}/dep"))
        .respond(200, cm_json("dep", &dep_uid, "8", &[]));
    server
        .expect(Method::PATCH, &format!("{CM}/sweeper-archive-cascade-*"))
        .respond(
            200,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "r"},
                             "data": {format!("{dep_uid}.json"): "{}"}}),
        );

    attempt_to_delete(&ctx, uid(2))
        .await
        .map_err(|e| e.error)
        .unwrap();

    let calls = server.finish();
    let order: Vec<Method> = calls.iter().map(|c| c.method.clone()).collect();
    assert_eq!(
        order,
        vec![Method::GET, Method::POST, Method::DELETE, Method::PATCH],
        "read, record, delete, settle: {calls:?}"
    );
    let record = &calls[1].body;
    assert_eq!(
        record["metadata"]["labels"]["sweeper.dev/archive-state"],
        "pending"
    );
    let entry: serde_json::Value =
        serde_json::from_str(record["data"][format!("{dep_uid}.json")].as_str().unwrap()).unwrap();
    assert_eq!(entry["resourceVersion"], "7");
    assert_eq!(calls[2].body["preconditions"]["resourceVersion"], "7");
    assert_eq!(calls[2].body["preconditions"]["uid"], dep_uid);
    assert_eq!(
        calls[3].body["metadata"]["labels"]["sweeper.dev/archive-state"], "complete",
        "settled as deleted: the entry stays"
    );
    assert_eq!(calls[3].body["data"], json!({}), "no entry removed");
}
