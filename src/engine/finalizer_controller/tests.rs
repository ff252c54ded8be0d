//! The engine's finalizer dispatch against a scripted API server: a scripted collector (a
//! ConfigMap kind whose passes the test chooses) shows which finalizer patches the engine sends,
//! and that nothing is released while a teardown is incomplete or its input is bad.

use super::*;
use crate::testing::MockApi;
use http::Method;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use serde_json::json;
use std::collections::VecDeque;
use std::sync::Mutex;

const FINALIZER: &str = "sweeper.dev/test";
const CM: &str = "/api/v1/namespaces/ns/configmaps/obj";
const JSON_PATCH: &str = "application/json-patch+json";

/// A collector whose answers the test scripts, recording which hooks the engine called.
struct Scripted {
    client: Client,
    guard_first: bool,
    selected: bool,
    /// What validation says: None is Valid.
    invalid: Option<(bool, Option<Duration>)>,
    passes: Mutex<VecDeque<Pass>>,
    hooks: Mutex<Vec<&'static str>>,
}

impl Scripted {
    fn hook(&self, h: &'static str) {
        self.hooks.lock().unwrap().push(h);
    }
    fn hooks(&self) -> Vec<&'static str> {
        self.hooks.lock().unwrap().clone()
    }
}

impl Reconciler for Scripted {
    type Object = ConfigMap;
    type Input = ();
    type Admitted = ();
    type Error = FinalizerError;

    fn finalizer(&self) -> &'static str {
        FINALIZER
    }
    fn guard_before_validating(&self) -> bool {
        self.guard_first
    }
    fn selects(&self, _obj: &ConfigMap) -> bool {
        self.selected
    }
    fn api(&self, _obj: &ConfigMap) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), "ns")
    }
    async fn validate(
        &self,
        _o: &ConfigMap,
        _s: Stage,
        _admitted: (),
    ) -> Result<Checked<()>, FinalizerError> {
        self.hook("validate");
        Ok(match self.invalid {
            None => Checked::Valid(()),
            Some((release, retry)) => Checked::Invalid { release, retry },
        })
    }
    async fn live(&self, _o: &ConfigMap, _p: ()) -> Result<(), FinalizerError> {
        self.hook("live");
        Ok(())
    }
    async fn pass(&self, _o: &ConfigMap, _p: ()) -> Result<Pass, FinalizerError> {
        self.hook("pass");
        Ok(self
            .passes
            .lock()
            .unwrap()
            .pop_front()
            .expect("a pass the test scripted"))
    }
    async fn undecodable(
        &self,
        _g: &Guarded<ConfigMap>,
        _bad: &Invalid,
    ) -> Result<(), FinalizerError> {
        self.hook("undecodable");
        Ok(())
    }
    fn released(&self, _o: &ConfigMap) {
        self.hook("released");
    }
}

fn scripted(client: &Client) -> Scripted {
    Scripted {
        client: client.clone(),
        guard_first: false,
        selected: true,
        invalid: None,
        passes: Mutex::new(VecDeque::new()),
        hooks: Mutex::new(Vec::new()),
    }
}

fn driver(client: &Client, t: Scripted) -> Arc<FinalizerController<Scripted>> {
    Arc::new(FinalizerController {
        collector: "test",
        reconciler: t,
        metrics: TeardownMetrics {
            in_progress: Gauge::default(),
            seconds: Histogram::new([1.0]),
            completed: Counter::default(),
            reconcile_failures: Family::default(),
        },
        registry: TeardownRegistry::default(),
        done_reason: "TestTeardownDone",
        retry_after: Duration::from_secs(10),
        events: Publisher::new(client.clone(), "sweeper-test", "Test"),
        fence: crate::engine::leader::Fence::open(),
        concurrency: 0,
    })
}

fn object(finalizers: Option<&[&str]>, deleting: bool) -> Arc<Guarded<ConfigMap>> {
    let mut c = ConfigMap::default();
    c.metadata.name = Some("obj".into());
    c.metadata.namespace = Some("ns".into());
    c.metadata.uid = Some("u-1".into());
    c.metadata.finalizers = finalizers.map(|f| f.iter().map(|s| s.to_string()).collect());
    if deleting {
        c.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    }
    Arc::new(Guarded(Ok(c)))
}

fn patched() -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "obj", "namespace": "ns"}})
}

#[tokio::test]
async fn a_new_object_gets_the_finalizer_by_a_json_patch_that_tests_the_list_first() {
    let (client, server) = MockApi::new();
    server.expect(Method::PATCH, CM).respond(200, patched());
    let d = driver(&client, scripted(&client));

    let action = reconcile(object(None, false), d.clone()).await.unwrap();

    assert_eq!(action, Action::await_change());
    let calls = server.finish();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].content_type, JSON_PATCH);
    assert_eq!(
        calls[0].body,
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
        ])
    );
    assert_eq!(d.reconciler.hooks(), vec!["validate"]);
}

#[tokio::test]
async fn the_finalizer_is_appended_after_other_controllers_finalizers() {
    let (client, server) = MockApi::new();
    server.expect(Method::PATCH, CM).respond(200, patched());
    let d = driver(&client, scripted(&client));

    reconcile(object(Some(&["other.io/x"]), false), d)
        .await
        .unwrap();

    let calls = server.finish();
    assert_eq!(
        calls[0].body,
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": ["other.io/x"]},
            {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER},
        ])
    );
}

#[tokio::test]
async fn a_collector_that_guards_first_adds_the_finalizer_before_validating() {
    let (client, server) = MockApi::new();
    server.expect(Method::PATCH, CM).respond(200, patched());
    let mut t = scripted(&client);
    t.guard_first = true;
    t.invalid = Some((false, None));
    let d = driver(&client, t);

    reconcile(object(None, false), d.clone()).await.unwrap();

    assert_eq!(
        server.finish().len(),
        1,
        "the finalizer, whatever the input"
    );
    assert!(d.reconciler.hooks().is_empty(), "not validated yet");
}

#[tokio::test]
async fn a_live_object_holding_the_finalizer_costs_no_call() {
    let (client, server) = MockApi::new();
    let d = driver(&client, scripted(&client));

    reconcile(object(Some(&[FINALIZER]), false), d.clone())
        .await
        .unwrap();

    assert!(server.finish().is_empty());
    assert_eq!(d.reconciler.hooks(), vec!["validate", "live"]);
}

#[tokio::test]
async fn nothing_is_released_while_the_teardown_has_work_left() {
    let (client, server) = MockApi::new();
    let t = scripted(&client);
    t.passes.lock().unwrap().push_back(Pass::Left {
        phase: "deleting".into(),
        detail: "3 left".into(),
        after: Duration::from_secs(7),
    });
    let d = driver(&client, t);

    let action = reconcile(object(Some(&[FINALIZER]), true), d.clone())
        .await
        .unwrap();

    assert!(server.finish().is_empty(), "no finalizer patch, no Event");
    assert_eq!(action, Action::requeue(Duration::from_secs(7)));
    assert_eq!(d.reconciler.hooks(), vec!["validate", "pass"]);
    assert_eq!(d.metrics.in_progress.get(), 1);
    let status = d.registry.list();
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].phase, "deleting");
}

#[tokio::test]
async fn a_finished_teardown_removes_only_our_finalizer_and_reports_completion() {
    let (client, server) = MockApi::new();
    server.expect(Method::PATCH, CM).respond(200, patched());
    server
        .expect(Method::POST, "/apis/events.k8s.io/v1/namespaces/ns/events")
        .respond(
            201,
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}}),
        );
    let t = scripted(&client);
    t.passes.lock().unwrap().push_back(Pass::Done {
        note: "all gone".into(),
    });
    let d = driver(&client, t);

    let action = reconcile(object(Some(&["other.io/x", FINALIZER]), true), d.clone())
        .await
        .unwrap();

    assert_eq!(action, Action::await_change());
    let calls = server.finish();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].content_type, JSON_PATCH);
    assert_eq!(
        calls[0].body,
        json!([
            {"op": "test", "path": "/metadata/finalizers/1", "value": FINALIZER},
            {"op": "remove", "path": "/metadata/finalizers/1"},
        ]),
        "the other controller's finalizer at index 0 is untouched"
    );
    assert_eq!(calls[1].body["reason"], "TestTeardownDone");
    assert!(
        calls[1].body["note"]
            .as_str()
            .unwrap()
            .starts_with("all gone (")
    );
    assert_eq!(d.reconciler.hooks(), vec!["validate", "pass", "released"]);
    assert_eq!(d.metrics.completed.get(), 1);
}

#[tokio::test]
async fn a_finalizer_removal_answered_404_means_already_gone() {
    let (client, server) = MockApi::new();
    server
        .expect(Method::PATCH, CM)
        .respond_status(404, "NotFound");
    server.allow_events();
    let t = scripted(&client);
    t.passes
        .lock()
        .unwrap()
        .push_back(Pass::Done { note: "x".into() });
    let d = driver(&client, t);

    let r = reconcile(object(Some(&[FINALIZER]), true), d).await;

    assert!(r.is_ok(), "{:?}", r.err());
    server.finish();
}

#[tokio::test]
async fn a_failed_finalizer_removal_is_an_error_and_no_completion_is_reported() {
    let (client, server) = MockApi::new();
    server
        .expect(Method::PATCH, CM)
        .respond_status(422, "Invalid");
    let t = scripted(&client);
    t.passes
        .lock()
        .unwrap()
        .push_back(Pass::Done { note: "x".into() });
    let d = driver(&client, t);

    let e = reconcile(object(Some(&[FINALIZER]), true), d.clone())
        .await
        .unwrap_err();

    assert_eq!(e.metric_label(), "finalizer_patch");
    assert_eq!(server.finish().len(), 1, "no Event");
    assert_eq!(d.metrics.completed.get(), 0);
    assert!(!d.reconciler.hooks().contains(&"released"));
}

#[tokio::test]
async fn bad_input_during_deletion_keeps_the_finalizer_and_runs_no_pass() {
    let (client, server) = MockApi::new();
    let mut t = scripted(&client);
    t.invalid = Some((false, Some(Duration::from_secs(30))));
    let d = driver(&client, t);

    let action = reconcile(object(Some(&[FINALIZER]), true), d.clone())
        .await
        .unwrap();

    assert!(server.finish().is_empty(), "no finalizer patch");
    assert_eq!(action, Action::requeue(Duration::from_secs(30)));
    assert_eq!(d.reconciler.hooks(), vec!["validate"]);
}

#[tokio::test]
async fn bad_input_that_can_never_be_fixed_releases_the_finalizer_without_a_pass() {
    let (client, server) = MockApi::new();
    server.expect(Method::PATCH, CM).respond(200, patched());
    let mut t = scripted(&client);
    t.invalid = Some((true, None));
    let d = driver(&client, t);

    reconcile(object(Some(&[FINALIZER]), true), d.clone())
        .await
        .unwrap();

    let calls = server.finish();
    assert_eq!(
        calls[0].body[1],
        json!({"op": "remove", "path": "/metadata/finalizers/0"})
    );
    assert_eq!(d.reconciler.hooks(), vec!["validate", "released"]);
}

#[tokio::test]
async fn an_object_no_longer_selected_is_released_with_nothing_torn_down() {
    let (client, server) = MockApi::new();
    server.expect(Method::PATCH, CM).respond(200, patched());
    let mut t = scripted(&client);
    t.selected = false;
    let d = driver(&client, t);

    reconcile(object(Some(&[FINALIZER]), true), d.clone())
        .await
        .unwrap();

    assert_eq!(server.finish().len(), 1);
    assert_eq!(
        d.reconciler.hooks(),
        vec!["released"],
        "no validate, no pass"
    );
}

#[tokio::test]
async fn an_unselected_object_without_the_finalizer_is_never_touched() {
    let (client, server) = MockApi::new();
    let mut t = scripted(&client);
    t.selected = false;
    let d = driver(&client, t);

    reconcile(object(None, false), d.clone()).await.unwrap();

    assert!(server.finish().is_empty(), "no finalizer added");
    assert!(d.reconciler.hooks().is_empty());
}

#[tokio::test]
async fn a_deletion_without_our_finalizer_is_not_ours_to_tear_down() {
    let (client, server) = MockApi::new();
    let d = driver(&client, scripted(&client));

    reconcile(object(Some(&["other.io/x"]), true), d.clone())
        .await
        .unwrap();

    assert!(server.finish().is_empty());
    assert!(d.reconciler.hooks().is_empty());
}

#[tokio::test]
async fn an_undecodable_object_is_reported_and_nothing_else_happens() {
    let (client, server) = MockApi::new();
    let d = driver(&client, scripted(&client));
    let bad = Arc::new(Guarded::<ConfigMap>(Err(Invalid {
        field: "data".into(),
        error: "expected a map".into(),
        metadata: Default::default(),
    })));

    reconcile(bad, d.clone()).await.unwrap();

    assert!(server.finish().is_empty());
    assert_eq!(d.reconciler.hooks(), vec!["undecodable"]);
}
