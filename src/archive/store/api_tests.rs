//! The archive's API calls against a scripted API server: a record is written (pending, with the
//! object as read) before anything is deleted, and only for the version the decision saw; it is
//! settled in one write once every DELETE of its batch is answered; expired records go by bucket.

use super::*;
use crate::archive::ArchiveMode;
use crate::testing::MockApi;
use http::Method;
use k8s_openapi::api::core::v1::Service;
use serde_json::json;

const SVC: &str = "/api/v1/namespaces/ns/services";
const RECORDS: &str = "/api/v1/namespaces/ns/configmaps";
const HOME: &str = "/api/v1/namespaces/sweeper-system/configmaps";

fn archiver(client: &Client, mode: ArchiveMode) -> Archiver {
    let settings = Settings {
        mode,
        ..Default::default()
    };
    Archiver::new(
        client.clone(),
        settings,
        "cascade",
        ArchiveMetrics::default(),
    )
}

fn item(name: &str, expect_rv: Option<&str>) -> Item {
    Item {
        resource: ApiResource::erase::<Service>(&()),
        namespaced: true,
        namespace: Some("ns".into()),
        name: name.into(),
        uid: format!("uid-{name}"),
        expect_rv: expect_rv.map(String::from),
        reason: DeletionReason::default(),
        object: None,
        in_sweeper_namespace: false,
    }
}

fn service(name: &str, rv: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                        "resourceVersion": rv, "labels": {"app": "web"},
                        "managedFields": [{"manager": "kubectl"}]},
           "spec": {"ports": [{"port": 80}]}})
}

/// The list answer for `services`, as the archive's batched read gets it.
fn service_list(services: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceList", "metadata": {}, "items": services})
}

fn record_answer(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": data})
}

fn ticket(p: &Prepared) -> &Ticket {
    match p {
        Prepared::Recorded(t) => t,
        other => panic!("expected a record, got {other:?}"),
    }
}

#[tokio::test]
async fn an_object_is_recorded_whole_in_a_pending_record_before_its_delete() {
    let (client, server) = MockApi::new();
    server
        .expect(Method::GET, &format!("{SVC}/a"))
        .respond(200, service("a", "7"));
    server
        .expect(Method::POST, RECORDS)
        .respond(201, record_answer("r", json!({})));
    let a = archiver(&client, ArchiveMode::All);

    let out = a.record(vec![item("a", Some("7"))]).await;

    let t = ticket(&out[0]);
    assert_eq!(t.resource_version, "7", "the DELETE's precondition");
    assert_eq!(
        t.record.namespace, "ns",
        "beside the object, under its namespace's RBAC"
    );
    let calls = server.finish();
    assert_eq!(calls.len(), 2, "{calls:?}");
    let record = &calls[1].body;
    assert_eq!(record["metadata"]["name"], t.record.name.as_str());
    let labels = &record["metadata"]["labels"];
    assert_eq!(labels[LABEL_ARCHIVE], "true");
    assert_eq!(labels[LABEL_STATE], PENDING);
    assert_eq!(labels[LABEL_COLLECTOR], "cascade");
    assert!(labels[crate::archive::LABEL_EXPIRY_BUCKET].is_string());
    assert!(record["metadata"]["annotations"][ANNOTATION_EXPIRES].is_string());
    let entry: Value =
        serde_json::from_str(record["data"]["uid-a.json"].as_str().unwrap()).unwrap();
    assert_eq!(entry["resourceVersion"], "7");
    assert_eq!(entry["deletedBy"], "sweeper-cascade");
    assert_eq!(entry["object"]["spec"]["ports"][0]["port"], 80);
    assert!(
        entry["object"]["metadata"].get("managedFields").is_none(),
        "server-set metadata is stripped"
    );
}

#[tokio::test]
async fn an_object_changed_since_the_decision_is_not_recorded_and_must_not_be_deleted() {
    let (client, server) = MockApi::new();
    server
        .expect(Method::GET, &format!("{SVC}/a"))
        .respond(200, service("a", "8"));
    let a = archiver(&client, ArchiveMode::All);

    let out = a.record(vec![item("a", Some("7"))]).await;

    assert_eq!(out, vec![Prepared::Changed]);
    assert_eq!(server.finish().len(), 1, "no record written");
}

#[tokio::test]
async fn an_object_replaced_under_its_name_is_not_recorded() {
    let (client, server) = MockApi::new();
    let mut other = service("a", "7");
    other["metadata"]["uid"] = json!("someone-else");
    server
        .expect(Method::GET, &format!("{SVC}/a"))
        .respond(200, other);
    let a = archiver(&client, ArchiveMode::All);

    assert_eq!(
        a.record(vec![item("a", None)]).await,
        vec![Prepared::Changed]
    );
    server.finish();
}

#[tokio::test]
async fn an_object_that_cannot_be_read_is_not_deleted_now() {
    let (client, server) = MockApi::new();
    server
        .expect(Method::GET, &format!("{SVC}/a"))
        .respond_status(403, "Forbidden");
    let a = archiver(&client, ArchiveMode::All);

    let out = a.record(vec![item("a", None)]).await;

    let Prepared::Failed(e) = &out[0] else {
        panic!("expected a failure, got {out:?}");
    };
    assert!(!e.paused());
    assert!(
        matches!(e.error(), ArchiveError::Read { object, .. } if object == "Service ns/a"),
        "the error names the object: {e}"
    );
    assert_eq!(server.finish().len(), 1, "no record written");
}

#[tokio::test]
async fn a_failed_record_write_fails_every_entry_of_its_record_and_answers_keep_their_order() {
    let (client, server) = MockApi::new();
    server.expect(Method::GET, SVC).respond(
        200,
        service_list(vec![
            service("a", "7"),
            service("b", "9"),
            service("c", "4"),
        ]),
    );
    server
        .expect(Method::POST, RECORDS)
        .respond_status(500, "InternalError");
    let a = archiver(&client, ArchiveMode::All);

    // b changed since the decision (9, not 8): answered without a record; a and c share one.
    let out = a
        .record(vec![
            item("a", Some("7")),
            item("b", Some("8")),
            item("c", Some("4")),
        ])
        .await;

    assert_eq!(out.len(), 3);
    assert_eq!(out[1], Prepared::Changed);
    for p in [&out[0], &out[2]] {
        let Prepared::Failed(e) = p else {
            panic!("expected a failure, got {out:?}");
        };
        assert!(
            matches!(e.error(), ArchiveError::Record { namespace, .. } if namespace == "ns"),
            "the error names the record: {e}"
        );
    }
    assert_eq!(out[0], out[2], "one write failed both entries");
    assert_eq!(server.finish().len(), 2, "one list, one create that failed");
}

#[tokio::test]
async fn a_record_the_namespace_refuses_is_written_in_sweepers_namespace() {
    let (client, server) = MockApi::new();
    server
        .expect(Method::GET, &format!("{SVC}/a"))
        .respond(200, service("a", "7"));
    server
        .expect(Method::POST, RECORDS)
        .respond_status(403, "Forbidden");
    server
        .expect(Method::POST, HOME)
        .respond(201, record_answer("r", json!({})));
    let a = archiver(&client, ArchiveMode::All);

    let out = a.record(vec![item("a", None)]).await;

    assert_eq!(ticket(&out[0]).record.namespace, "sweeper-system");
    server.finish();
}

#[tokio::test]
async fn archiving_off_or_not_selected_records_nothing() {
    let (client, server) = MockApi::new();
    let off = archiver(&client, ArchiveMode::None);
    assert_eq!(
        off.record(vec![item("a", None)]).await,
        vec![Prepared::Unrecorded]
    );
    assert!(server.calls().is_empty(), "--archive=none makes no call");

    server
        .expect(Method::GET, &format!("{SVC}/a"))
        .respond(200, service("a", "7"));
    let selector = crate::engine::selector::parse("app=db").unwrap();
    let some = archiver(&client, ArchiveMode::Selector(selector));
    assert_eq!(
        some.record(vec![item("a", None)]).await,
        vec![Prepared::Unrecorded]
    );
    let calls = server.finish();
    assert_eq!(
        calls.len(),
        1,
        "read, but no record for an unselected object: {calls:?}"
    );
}

#[tokio::test]
async fn an_object_over_the_size_cap_is_deleted_unrecorded_and_an_event_says_so() {
    let (client, server) = MockApi::new();
    server
        .expect(Method::GET, &format!("{SVC}/a"))
        .respond(200, service("a", "7"));
    server.allow_events();
    let settings = Settings {
        max_object_bytes: 10,
        ..Default::default()
    };
    let a = Archiver::new(client, settings, "cascade", ArchiveMetrics::default());

    assert_eq!(
        a.record(vec![item("a", None)]).await,
        vec![Prepared::Unrecorded]
    );

    assert_eq!(server.events(), vec!["NotArchived".to_string()]);
    assert!(server.finish().iter().all(|c| c.path != RECORDS));
}

#[tokio::test]
async fn a_batch_of_one_namespace_is_read_by_one_list_and_kept_in_one_record() {
    let (client, server) = MockApi::new();
    server.expect(Method::GET, SVC).respond(
        200,
        service_list(vec![
            service("a", "7"),
            service("b", "9"),
            service("c", "3"),
        ]),
    );
    server
        .expect(Method::POST, RECORDS)
        .respond(201, record_answer("r", json!({})));
    let a = archiver(&client, ArchiveMode::All);

    let out = a
        .record(vec![item("a", Some("7")), item("b", Some("9"))])
        .await;

    let (ta, tb) = (ticket(&out[0]), ticket(&out[1]));
    assert_eq!(ta.record, tb.record, "one record for the batch");
    let calls = server.finish();
    assert_eq!(calls.len(), 2, "one list, one create: {calls:?}");
    assert_eq!(calls[0].query_param("limit").as_deref(), Some("500"));
    let data = calls[1].body["data"].as_object().unwrap();
    assert_eq!(data.len(), 2, "c was listed but is not archived: {data:?}");
}

/// Records `a` and `b` in one record and returns their tickets.
async fn two_recorded(server: &MockApi, a: &Archiver) -> (Ticket, Ticket) {
    server.expect(Method::GET, SVC).respond(
        200,
        service_list(vec![service("a", "7"), service("b", "9")]),
    );
    server
        .expect(Method::POST, RECORDS)
        .respond(201, record_answer("r", json!({})));
    let out = a.record(vec![item("a", None), item("b", None)]).await;
    (ticket(&out[0]).clone(), ticket(&out[1]).clone())
}

#[tokio::test]
async fn a_record_is_settled_once_every_delete_of_its_batch_is_answered_and_false_entries_go() {
    let (client, server) = MockApi::new();
    let a = archiver(&client, ArchiveMode::All);
    let (ta, tb) = two_recorded(&server, &a).await;
    let record = format!("{RECORDS}/{}", ta.record.name);
    server.expect(Method::PATCH, &record).respond(
        200,
        record_answer(&ta.record.name, json!({"uid-a.json": "{}"})),
    );

    a.settle(&ta, true).await;
    assert_eq!(
        server.calls().len(),
        2,
        "b's DELETE is not answered yet: no write"
    );
    a.settle(&tb, false).await;

    let calls = server.finish();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[2].content_type, "application/merge-patch+json");
    assert_eq!(
        calls[2].body,
        json!({"metadata": {"labels": {LABEL_STATE: COMPLETE}}, "data": {"uid-b.json": null}}),
        "complete, without the entry of the object its DELETE did not delete"
    );
}

#[tokio::test]
async fn a_record_left_without_entries_is_deleted() {
    let (client, server) = MockApi::new();
    let a = archiver(&client, ArchiveMode::All);
    let (ta, tb) = two_recorded(&server, &a).await;
    let record = format!("{RECORDS}/{}", ta.record.name);
    server
        .expect(Method::PATCH, &record)
        .respond(200, record_answer(&ta.record.name, json!({})));
    server
        .expect(Method::DELETE, &record)
        .respond(200, record_answer(&ta.record.name, json!({})));

    a.settle(&ta, false).await;
    a.settle(&tb, false).await;

    let calls = server.finish();
    assert_eq!(calls.len(), 4, "{calls:?}");
}

#[tokio::test]
async fn a_failed_settle_is_retried_before_the_next_batch() {
    let (client, server) = MockApi::new();
    let a = archiver(&client, ArchiveMode::All);
    let (ta, tb) = two_recorded(&server, &a).await;
    let record = format!("{RECORDS}/{}", ta.record.name);
    server
        .expect(Method::PATCH, &record)
        .respond_status(500, "InternalError");
    a.settle(&ta, true).await;
    a.settle(&tb, true).await;
    server.expect(Method::PATCH, &record).respond(
        200,
        record_answer(&ta.record.name, json!({"uid-a.json": "{}"})),
    );

    // The next batch settles what failed first; it has nothing of its own to read.
    assert!(a.record(Vec::new()).await.is_empty());

    let calls = server.finish();
    assert_eq!(calls.len(), 4, "{calls:?}");
    assert_eq!(calls[3].body, calls[2].body, "the same settle, again");
}

fn record_meta(name: &str, bucket: Option<&str>, expires: Option<&str>) -> Value {
    let mut m = json!({"name": name, "namespace": "ns", "labels": {LABEL_ARCHIVE: "true"}});
    if let Some(b) = bucket {
        m["labels"][crate::archive::LABEL_EXPIRY_BUCKET] = json!(b);
    }
    if let Some(e) = expires {
        m["annotations"] = json!({ANNOTATION_EXPIRES: e});
    }
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": m})
}

fn meta_list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {}, "items": items})
}

#[tokio::test]
async fn expiry_deletes_ended_buckets_in_one_call_and_keeps_what_is_not_due() {
    let (client, server) = MockApi::new();
    server.expect(Method::GET, "/api/v1/configmaps").respond(
        200,
        meta_list(vec![
            record_meta("ended-1", Some("1000"), None),
            record_meta("ended-2", Some("1000"), None),
            record_meta("future", Some("99999999999"), None),
            record_meta("old-expired", None, Some("2020-01-01T00:00:00Z")),
            record_meta("old-kept", None, Some("2999-01-01T00:00:00Z")),
        ]),
    );
    server
        .expect(Method::GET, "/api/v1/secrets")
        .respond(200, meta_list(vec![]));
    server.expect(Method::DELETE, RECORDS).respond(
        200,
        json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {}, "items": []}),
    );
    server
        .expect(Method::DELETE, &format!("{RECORDS}/old-expired"))
        .respond(200, record_answer("old-expired", json!({})));
    let a = archiver(&client, ArchiveMode::All);

    let gone = a.expire().await.unwrap();

    assert_eq!(gone, 3);
    let calls = server.finish();
    assert_eq!(
        calls[0].query_param("labelSelector").as_deref(),
        Some("sweeper.dev/archive=true")
    );
    let collection = calls
        .iter()
        .find(|c| c.method == Method::DELETE && c.path == RECORDS)
        .unwrap();
    assert_eq!(
        collection.query_param("labelSelector").as_deref(),
        Some("sweeper.dev/archive=true,sweeper.dev/archive-expiry-bucket=1000"),
        "only the ended bucket, only archive records"
    );
    assert_eq!(calls.len(), 4, "nothing else deleted: {calls:?}");
}

#[tokio::test]
async fn an_archiver_expiring_only_configmaps_lists_no_secrets() {
    let (client, server) = MockApi::new();
    server.expect(Method::GET, "/api/v1/configmaps").respond(
        200,
        meta_list(vec![record_meta("future", Some("99999999999"), None)]),
    );
    let a = Archiver::new(
        client,
        Settings::default(),
        "external",
        ArchiveMetrics::default(),
    )
    .expiring_only(&[RecordKind::ConfigMap]);

    assert_eq!(a.expire().await.unwrap(), 0);

    assert_eq!(server.finish().len(), 1, "no Secret list, no delete");
}

fn entry_json(name: &str) -> String {
    serde_json::to_string(&ArchiveEntry {
        api_version: "v1".into(),
        kind: "Service".into(),
        namespace: Some("ns".into()),
        name: name.into(),
        uid: format!("uid-{name}"),
        resource_version: "7".into(),
        deleted_by: "sweeper-cascade".into(),
        reason: DeletionReason::default(),
        archived_at: "2026-01-01T00:00:00Z".into(),
        object: service(name, "7"),
    })
    .unwrap()
}

#[tokio::test]
async fn a_pending_record_left_by_another_process_keeps_only_the_entries_of_objects_gone() {
    let (client, server) = MockApi::new();
    let pending = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "left", "namespace": "ns",
                     "labels": {LABEL_ARCHIVE: "true", LABEL_STATE: PENDING}},
        "data": {"uid-a.json": entry_json("a"), "uid-b.json": entry_json("b")}});
    server.expect(Method::GET, "/api/v1/configmaps").respond(
        200,
        json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {}, "items": [pending.clone()]}),
    );
    server.expect(Method::GET, "/api/v1/secrets").respond(
        200,
        json!({"apiVersion": "v1", "kind": "SecretList", "metadata": {}, "items": []}),
    );
    // Discovery, once for both entries.
    server.expect(Method::GET, "/api/v1").respond(
        200,
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
               "resources": [{"name": "services", "singularName": "service", "namespaced": true,
                              "kind": "Service", "verbs": ["get", "list", "delete"]}]}),
    );
    // a was never deleted (the process stopped first); b is gone: one list tells for both,
    // not a GET each.
    server.expect(Method::GET, SVC).respond(
        200,
        service_list(vec![service("a", "7"), service("other", "3")]),
    );
    server.expect(Method::GET, RECORDS).respond(
        200,
        json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {}, "items": [pending]}),
    );
    server
        .expect(Method::PATCH, &format!("{RECORDS}/left"))
        .respond(200, record_answer("left", json!({"uid-b.json": "{}"})));
    let a = archiver(&client, ArchiveMode::All);

    assert_eq!(a.reconcile_pending().await.unwrap(), 1);

    let calls = server.finish();
    let selector = calls[0].query_param("labelSelector").unwrap();
    assert!(
        selector.contains("sweeper.dev/archive-state=pending"),
        "{selector}"
    );
    assert!(
        selector.contains("sweeper.dev/archive-writer!="),
        "never this process's own records: {selector}"
    );
    let settle = calls.last().unwrap();
    assert_eq!(
        settle.body,
        json!({"metadata": {"labels": {LABEL_STATE: COMPLETE}}, "data": {"uid-a.json": null}}),
        "a still exists: its entry goes; b's stays"
    );
}

#[tokio::test]
async fn settling_reads_one_by_one_where_a_list_would_cost_more_calls() {
    let (client, server) = MockApi::new();
    let pending = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "left", "namespace": "ns",
                     "labels": {LABEL_ARCHIVE: "true", LABEL_STATE: PENDING}},
        "data": {"uid-a.json": entry_json("a"), "uid-b.json": entry_json("b")}});
    server.expect(Method::GET, "/api/v1/configmaps").respond(
        200,
        json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {}, "items": [pending.clone()]}),
    );
    server.expect(Method::GET, "/api/v1/secrets").respond(
        200,
        json!({"apiVersion": "v1", "kind": "SecretList", "metadata": {}, "items": []}),
    );
    server.expect(Method::GET, "/api/v1").respond(
        200,
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
               "resources": [{"name": "services", "singularName": "service", "namespaced": true,
                              "kind": "Service", "verbs": ["get", "list", "delete"]}]}),
    );
    // The first page holds neither, and 5,000 more services are 10 more pages: two GETs cost less.
    server.expect(Method::GET, SVC).respond(
        200,
        json!({"apiVersion": "v1", "kind": "ServiceList",
               "metadata": {"continue": "next", "remainingItemCount": 5000},
               "items": [service("other", "3")]}),
    );
    server
        .expect(Method::GET, &format!("{SVC}/a"))
        .respond(200, service("a", "7"));
    server
        .expect(Method::GET, &format!("{SVC}/b"))
        .respond_status(404, "NotFound");
    server.expect(Method::GET, RECORDS).respond(
        200,
        json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {}, "items": [pending]}),
    );
    server
        .expect(Method::PATCH, &format!("{RECORDS}/left"))
        .respond(200, record_answer("left", json!({"uid-b.json": "{}"})));
    let a = archiver(&client, ArchiveMode::All);

    assert_eq!(a.reconcile_pending().await.unwrap(), 1);

    let calls = server.finish();
    assert_eq!(
        calls.iter().filter(|c| c.line().contains(SVC)).count(),
        3,
        "one page, then a GET each: {:?}",
        calls.iter().map(|c| c.line()).collect::<Vec<_>>()
    );
    assert_eq!(
        calls.last().unwrap().body,
        json!({"metadata": {"labels": {LABEL_STATE: COMPLETE}}, "data": {"uid-a.json": null}}),
        "a still exists: its entry goes; b's stays"
    );
}

/// The expiry loop makes no call before the collector's pause switch was first read (its flag
/// reads paused until then: a pass before it had every delete refused and waited a whole
/// interval for the next), and runs at once when it is.
#[tokio::test]
async fn the_expiry_loop_waits_for_the_pause_switch_and_runs_when_it_is_read() {
    use crate::engine::leader::Fence;
    use crate::engine::pause::{Paused, PausedGauge, Switch};
    let (client, server) = MockApi::new();
    server.expect(Method::GET, "/api/v1/configmaps").respond(
        200,
        meta_list(vec![record_meta(
            "old-expired",
            None,
            Some("2020-01-01T00:00:00Z"),
        )]),
    );
    server
        .expect(Method::DELETE, &format!("{RECORDS}/old-expired"))
        .respond(200, record_answer("old-expired", json!({})));
    let a = std::sync::Arc::new(
        Archiver::new(
            client,
            Settings::default(),
            "cascade",
            ArchiveMetrics::default(),
        )
        .expiring_only(&[RecordKind::ConfigMap]),
    );
    let switch = Switch::new(&["cascade"], PausedGauge::default());
    let fence = Fence::open().paused_by(switch.flag("cascade").unwrap());
    let stop = tokio_util::sync::CancellationToken::new();
    let looping = tokio::spawn(a.expire_loop(Duration::from_secs(300), fence, stop.clone()));
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(
        server.calls().is_empty(),
        "no call before the switch is read: {:?}",
        server.calls()
    );

    switch.apply(Paused::new());
    server.wait_for_calls(2).await;

    stop.cancel();
    looping.await.unwrap();
    let calls = server.finish();
    assert_eq!(calls[1].method, Method::DELETE, "{calls:?}");
}
