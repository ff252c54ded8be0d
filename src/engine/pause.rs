//! The operator's pause switch: `sweeper pause [--collector …]` / `sweeper resume`.
//!
//! The switch is kept in the cluster, so every replica (and the next process after a restart)
//! sees the same one: the ConfigMap [`CONFIGMAP`] in sweeper's namespace, one data key per paused
//! collector (its name, or `all`) whose value says when, by whom and why. The collectors' names
//! come from the caller (crate::catalog), so the engine holds no list of its own.
//! No ConfigMap, or no key for a collector, means running.
//!
//! Each replica watches that one ConfigMap (a field-selected watch: the change arrives within
//! milliseconds) and sets the collector's [`PauseFlag`], which is part of the collector's
//! [`Fence`](super::leader::Fence): the same check that stops a replica without the lease from
//! writing stops a paused collector, on every Kubernetes write and every AWS call. Nothing else
//! checks the pause. Until the switch has been read once, every collector counts as paused: a
//! replica that cannot tell must not delete.

use super::leader::PauseFlag;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::{WatchStreamExt, watcher};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::watch;

/// The ConfigMap holding the switch, in sweeper's namespace.
pub const CONFIGMAP: &str = "sweeper-pause";
/// The reason `sweeper uninstall` records (crate::uninstall): a replica that finds it was most
/// likely installed again after an uninstall, and says so.
pub const UNINSTALL_REASON: &str = "sweeper uninstall";
/// The key that pauses every collector.
pub const ALL: &str = "all";

pub use crate::metrics::{CollectorLabels, PausedGauge};

/// Who paused a collector, when and why: the value of its key in the ConfigMap.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseRecord {
    /// RFC 3339.
    #[serde(default)]
    pub since: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What the switch says: the paused collectors (already expanded from `all`).
pub type Paused = BTreeMap<String, PauseRecord>;

/// What the log and the Event say when `collector` is paused by record `r` (in `namespace`).
fn paused_note(collector: &str, r: &PauseRecord, namespace: &str) -> String {
    let note = format!(
        "{collector} collector paused{}{}{}: no delete, patch or AWS call leaves sweeper until `sweeper resume`",
        r.by.as_deref()
            .map(|b| format!(" by {b}"))
            .unwrap_or_default(),
        if r.since.is_empty() {
            String::new()
        } else {
            format!(" at {}", r.since)
        },
        r.reason
            .as_deref()
            .map(|x| format!(" ({x})"))
            .unwrap_or_default(),
    );
    if r.reason.as_deref() == Some(UNINSTALL_REASON) {
        format!(
            "{note}; paused by `sweeper uninstall`: if sweeper was installed again, `sweeper resume -n {namespace} --after-uninstall`"
        )
    } else {
        note
    }
}

/// Reads the switch from the ConfigMap's data. A key with a value that is not a record still
/// pauses (the operator meant something; failing safe means not deleting), and an unknown key is
/// reported in the returned warnings and ignored.
pub fn parse(
    data: &BTreeMap<String, String>,
    collectors: &[&'static str],
) -> (Paused, Vec<String>) {
    let mut out = Paused::new();
    let mut warnings = Vec::new();
    let record = |key: &str, value: &str, warnings: &mut Vec<String>| {
        serde_json::from_str::<PauseRecord>(value).unwrap_or_else(|e| {
            warnings.push(format!(
                "{CONFIGMAP} key {key:?}: value is not a pause record ({e}); the collector is paused anyway"
            ));
            PauseRecord {
                reason: Some(value.to_string()),
                ..Default::default()
            }
        })
    };
    for (key, value) in data {
        if key == ALL {
            let r = record(key, value, &mut warnings);
            for c in collectors {
                out.entry(c.to_string()).or_insert_with(|| r.clone());
            }
        } else if collectors.contains(&key.as_str()) {
            let r = record(key, value, &mut warnings);
            out.insert(key.clone(), r);
        } else {
            warnings.push(format!(
                "{CONFIGMAP} key {key:?} is not a collector ({}, or {ALL}); ignored",
                collectors.join(", ")
            ));
        }
    }
    (out, warnings)
}

/// One collector's flag and the channel that announces its changes.
type Flag = (Arc<AtomicBool>, watch::Sender<bool>);

/// This process's view of the switch: one flag per collector, the gauge, and the last state read.
#[derive(Clone)]
pub struct Switch {
    flags: Arc<BTreeMap<&'static str, Flag>>,
    state: watch::Sender<Option<Paused>>,
    gauge: PausedGauge,
}

impl Switch {
    /// Every collector of `collectors` starts paused until the switch is read.
    pub fn new(collectors: &[&'static str], gauge: PausedGauge) -> Self {
        let flags = collectors
            .iter()
            .map(|c| {
                (
                    *c,
                    (Arc::new(AtomicBool::new(true)), watch::channel(true).0),
                )
            })
            .collect();
        Switch {
            flags: Arc::new(flags),
            state: watch::channel(None).0,
            gauge,
        }
    }

    /// The flag a collector's fence carries; an error, never a panic, for a collector the
    /// switch was not made with.
    pub fn flag(&self, collector: &'static str) -> Result<PauseFlag, SwitchError> {
        let (paused, tx) =
            self.flags
                .get(collector)
                .ok_or_else(|| SwitchError::UnknownCollector {
                    name: collector.to_string(),
                    known: self.names().join(", "),
                })?;
        Ok(PauseFlag {
            collector,
            paused: paused.clone(),
            changed: tx.subscribe(),
        })
    }

    /// The collectors this switch pauses.
    fn names(&self) -> Vec<&'static str> {
        self.flags.keys().copied().collect()
    }

    /// The paused collectors, or None before the switch was first read.
    pub fn current(&self) -> Option<Paused> {
        self.state.borrow().clone()
    }

    /// Applies a newly read state; returns the collectors whose state changed (`true` = now
    /// paused).
    pub fn apply(&self, paused: Paused) -> Vec<(&'static str, bool)> {
        let first = self.state.borrow().is_none();
        let mut changed = Vec::new();
        for (name, (flag, tx)) in self.flags.iter() {
            let now = paused.contains_key(*name);
            let before = flag.swap(now, Ordering::AcqRel);
            self.gauge
                .get_or_create(&CollectorLabels {
                    collector: name.to_string(),
                })
                .set(i64::from(now));
            if before != now {
                tx.send_replace(now);
            }
            // The first read reports only the paused collectors (starting unpaused is no
            // "resume"); later reads report every change.
            if (first && now) || (!first && before != now) {
                changed.push((*name, now));
            }
        }
        self.state.send_replace(Some(paused));
        changed
    }

    /// Watches the switch until `shutdown`: applies each change, logs it, and (through `events`,
    /// a client fenced only by the lease, so only the leader publishes) puts an Event on the
    /// ConfigMap. The watch has client-go's backoff; while it fails the last state read stands.
    pub async fn run(
        self,
        client: kube::Client,
        namespace: String,
        events: super::events::Publisher,
        health: super::guard::WatchHealth,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        use futures::StreamExt;
        let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
        let cfg = watcher::Config::default().fields(&format!("metadata.name={CONFIGMAP}"));
        let mut stream = watcher::watcher(api, cfg).default_backoff().boxed();
        let mut pending: Option<Paused> = None;
        loop {
            let ev = tokio::select! {
                _ = shutdown.cancelled() => return,
                ev = stream.next() => match ev { Some(ev) => ev, None => return },
            };
            let read = match ev {
                Ok(watcher::Event::Init) => {
                    pending = Some(Paused::new());
                    None
                }
                Ok(watcher::Event::InitApply(cm)) => {
                    pending = Some(self.read(&cm));
                    None
                }
                Ok(watcher::Event::InitDone) => Some(pending.take().unwrap_or_default()),
                Ok(watcher::Event::Apply(cm)) => Some(self.read(&cm)),
                Ok(watcher::Event::Delete(_)) => Some(Paused::new()),
                Err(e) => {
                    tracing::warn!(configmap = %format!("{namespace}/{CONFIGMAP}"), error = %e, "cannot watch the pause switch; the last state read stands");
                    health.state.set_failing(
                        health.component,
                        format!("cannot read the pause switch {namespace}/{CONFIGMAP}: {e}"),
                    );
                    continue;
                }
            };
            let Some(paused) = read else { continue };
            health.state.set_ready(health.component, true);
            let changes = self.apply(paused.clone());
            health.state.set_note(
                "paused",
                (!paused.is_empty()).then(|| paused.keys().cloned().collect::<Vec<_>>().join(", ")),
            );
            for (collector, now) in changes {
                let (reason, note) = match paused.get(collector).filter(|_| now) {
                    Some(r) => {
                        let note = paused_note(collector, r, &namespace);
                        tracing::warn!(collector, "{note}");
                        ("Paused", note)
                    }
                    None => {
                        let note = format!("{collector} collector resumed; queued work continues");
                        tracing::info!(collector, "{note}");
                        ("Resumed", note)
                    }
                };
                let reference = ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("ConfigMap".into()),
                    namespace: Some(namespace.clone()),
                    name: Some(CONFIGMAP.into()),
                    ..Default::default()
                };
                events
                    .emit(&reference, EventType::Normal, reason, note)
                    .await;
            }
        }
    }

    fn read(&self, cm: &ConfigMap) -> Paused {
        let (paused, warnings) = parse(&cm.data.clone().unwrap_or_default(), &self.names());
        for w in warnings {
            tracing::warn!("{w}");
        }
        paused
    }
}

/// Errors of `sweeper pause` / `sweeper resume`.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error("unknown collector {name:?}: use one of {known}")]
    UnknownCollector { name: String, known: String },
    #[error("cannot read or write ConfigMap {namespace}/{CONFIGMAP}: {source}")]
    Api {
        namespace: String,
        #[source]
        source: kube::Error,
    },
}

/// Sets (`pause`) or clears the switch for `collector` (None: all), as the caller's identity.
/// Resuming one collector while `all` is set pauses the other two by name instead.
pub async fn set(
    client: &kube::Client,
    namespace: &str,
    collector: Option<&str>,
    pause: Option<PauseRecord>,
    collectors: &[&'static str],
) -> Result<Paused, SwitchError> {
    if let Some(c) = collector
        && !collectors.contains(&c)
    {
        return Err(SwitchError::UnknownCollector {
            name: c.to_string(),
            known: collectors.join(", "),
        });
    }
    let err = |source| SwitchError::Api {
        namespace: namespace.to_string(),
        source,
    };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let current = api.get_opt(CONFIGMAP).await.map_err(err)?;
    let data = current.and_then(|c| c.data).unwrap_or_default();
    let patch = keys_to_write(collector, pause.as_ref(), &data, collectors);
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "namespace": namespace},
        "data": patch,
    });
    // Server-side apply would make the CLI own every key; a merge patch on an existing object, or
    // a create, touches only the keys named.
    let written = match api
        .patch(CONFIGMAP, &PatchParams::default(), &Patch::Merge(&body))
        .await
    {
        Ok(cm) => cm,
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let data: BTreeMap<String, String> = patch
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?)))
                .collect();
            let cm = ConfigMap {
                metadata: kube::api::ObjectMeta {
                    name: Some(CONFIGMAP.into()),
                    namespace: Some(namespace.into()),
                    ..Default::default()
                },
                data: Some(data),
                ..Default::default()
            };
            api.create(&Default::default(), &cm).await.map_err(err)?
        }
        Err(e) => return Err(err(e)),
    };
    Ok(parse(&written.data.unwrap_or_default(), collectors).0)
}

/// The keys [`set`] writes (`None`: removed), given the switch's current `data`. Pure.
fn keys_to_write(
    collector: Option<&str>,
    pause: Option<&PauseRecord>,
    data: &BTreeMap<String, String>,
    collectors: &[&'static str],
) -> BTreeMap<String, Option<String>> {
    let record = |r: &PauseRecord| Some(serde_json::to_string(r).unwrap_or_default());
    let mut patch: BTreeMap<String, Option<String>> = BTreeMap::new();
    match (collector, pause) {
        (None, Some(r)) => {
            patch.insert(ALL.into(), record(r));
        }
        (None, None) => {
            for k in data.keys() {
                patch.insert(k.clone(), None);
            }
        }
        (Some(c), Some(r)) => {
            patch.insert(c.into(), record(r));
        }
        // Resuming one while `all` is set: the others stay paused, now by name, with the
        // record `all` had.
        (Some(c), None) => {
            patch.insert(c.into(), None);
            if let Some(all) = data.get(ALL) {
                patch.insert(ALL.into(), None);
                for other in collectors.iter().filter(|o| **o != c) {
                    if !data.contains_key(*other) {
                        patch.insert(other.to_string(), Some(all.clone()));
                    }
                }
            }
        }
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_note_says_who_when_why_and_how_to_resume_after_an_uninstall() {
        let record = |by: Option<&str>, since: &str, reason: Option<&str>| PauseRecord {
            since: since.into(),
            by: by.map(Into::into),
            reason: reason.map(Into::into),
        };
        let cases = [
            (
                record(None, "", None),
                "cascade collector paused: no delete",
                false,
            ),
            (
                record(Some("alice"), "2026-01-01T00:00:00Z", Some("incident")),
                "cascade collector paused by alice at 2026-01-01T00:00:00Z (incident): no delete",
                false,
            ),
            (
                record(None, "", Some(UNINSTALL_REASON)),
                "cascade collector paused (",
                true,
            ),
        ];
        for (r, starts, after_uninstall) in cases {
            let note = paused_note("cascade", &r, "sweeper-system");
            assert!(note.starts_with(starts), "{note}");
            assert_eq!(
                note.contains("sweeper resume -n sweeper-system --after-uninstall"),
                after_uninstall,
                "{note}"
            );
        }
    }

    /// The switch is made for whatever collectors the caller names; these are sweeper's.
    const COLLECTORS: [&str; 3] = ["cascade", "tenant", "external"];

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn all_pauses_every_collector_and_a_named_key_keeps_its_own_record() {
        let (p, w) = parse(
            &data(&[
                ("all", r#"{"since":"t1","reason":"incident"}"#),
                ("cascade", r#"{"since":"t0"}"#),
            ]),
            &COLLECTORS,
        );
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(p.len(), 3);
        assert_eq!(p["cascade"].since, "t0");
        assert_eq!(p["tenant"].reason.as_deref(), Some("incident"));
    }

    #[test]
    fn a_bad_value_still_pauses_and_an_unknown_key_is_reported() {
        let (p, w) = parse(
            &data(&[("tenant", "yes please"), ("cascde", "{}")]),
            &COLLECTORS,
        );
        assert_eq!(p.keys().collect::<Vec<_>>(), vec!["tenant"]);
        assert_eq!(p["tenant"].reason.as_deref(), Some("yes please"));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w.iter().any(|m| m.contains("\"cascde\"")), "{w:?}");
    }

    #[test]
    fn flags_start_paused_and_follow_the_switch() {
        let s = Switch::new(&COLLECTORS, PausedGauge::default());
        let f = s.flag("cascade").unwrap();
        assert!(
            f.paused.load(Ordering::Acquire),
            "unknown must count as paused"
        );
        let changed = s.apply(Paused::new());
        assert!(
            changed.is_empty(),
            "starting unpaused is no resume: {changed:?}"
        );
        assert!(!f.paused.load(Ordering::Acquire));
        let (p, _) = parse(&data(&[("cascade", "{}")]), &COLLECTORS);
        assert_eq!(s.apply(p), vec![("cascade", true)]);
        assert!(f.paused.load(Ordering::Acquire));
        assert!(!s.flag("tenant").unwrap().paused.load(Ordering::Acquire));
        assert_eq!(s.apply(Paused::new()), vec![("cascade", false)]);
    }

    #[tokio::test]
    async fn a_paused_fence_refuses_and_wakes_on_resume() {
        use super::super::leader::{Fence, Refusal};
        let s = Switch::new(&COLLECTORS, PausedGauge::default());
        let fence = Fence::open().paused_by(s.flag("external").unwrap());
        assert_eq!(fence.check(), Err(Refusal::Paused("external")));
        let waiter = {
            let fence = fence.clone();
            tokio::spawn(async move { fence.resumed().await })
        };
        s.apply(Paused::new());
        tokio::time::timeout(std::time::Duration::from_secs(1), waiter)
            .await
            .expect("resumed() wakes on resume")
            .unwrap();
        assert_eq!(fence.check(), Ok(()));
        // A collector the switch was not made with is an error, not a panic.
        assert!(matches!(
            s.flag("cleanup"),
            Err(SwitchError::UnknownCollector { .. })
        ));
        // The lease still rules: a closed lease fence refuses an unpaused collector.
        let closed = Fence::closed().paused_by(s.flag("external").unwrap());
        assert_eq!(closed.check(), Err(Refusal::NotLeader));
    }

    mod set_calls {
        //! `set` against a scripted API server: what it reads, the exact keys it writes, and
        //! that a bad collector name writes nothing.
        use super::super::*;
        use crate::testing::MockApi;
        use http::Method;
        use serde_json::json;

        const CM: &str = "/api/v1/namespaces/sweeper-system/configmaps/sweeper-pause";
        const NAMES: [&str; 3] = ["cascade", "tenant", "external"];

        fn cm(data: serde_json::Value) -> serde_json::Value {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": CONFIGMAP, "namespace": "sweeper-system"}, "data": data})
        }

        #[tokio::test]
        async fn resuming_one_collector_while_all_is_paused_keeps_the_others_paused_by_name() {
            let (client, server) = MockApi::new();
            let all = r#"{"since":"2026-01-01T00:00:00Z"}"#;
            server
                .expect(Method::GET, CM)
                .respond(200, cm(json!({"all": all})));
            server
                .expect(Method::PATCH, CM)
                .respond(200, cm(json!({"tenant": all, "external": all})));

            let paused = set(&client, "sweeper-system", Some("cascade"), None, &NAMES)
                .await
                .unwrap();

            let calls = server.finish();
            assert_eq!(calls.len(), 2);
            assert_eq!(
                calls[1].body["data"],
                json!({"all": null, "cascade": null, "tenant": all, "external": all})
            );
            assert_eq!(paused.keys().collect::<Vec<_>>(), ["external", "tenant"]);
        }

        #[tokio::test]
        async fn without_the_configmap_pausing_creates_it_with_only_the_key_set() {
            let (client, server) = MockApi::new();
            server
                .expect(Method::GET, CM)
                .respond_status(404, "NotFound");
            server
                .expect(Method::PATCH, CM)
                .respond_status(404, "NotFound");
            server
                .expect(Method::POST, "/api/v1/namespaces/sweeper-system/configmaps")
                .respond(201, cm(json!({"all": "{}"})));
            let record = PauseRecord {
                since: "2026-01-01T00:00:00Z".into(),
                by: Some("ops".into()),
                reason: None,
            };

            let paused = set(
                &client,
                "sweeper-system",
                None,
                Some(record.clone()),
                &NAMES,
            )
            .await
            .unwrap();

            let calls = server.finish();
            let created: PauseRecord =
                serde_json::from_str(calls[2].body["data"]["all"].as_str().unwrap()).unwrap();
            assert_eq!(created, record);
            assert_eq!(paused.len(), 3, "`all` pauses every collector");
        }

        #[tokio::test]
        async fn an_unknown_collector_is_refused_before_any_call() {
            let (client, server) = MockApi::new();
            let err = set(&client, "sweeper-system", Some("nope"), None, &NAMES)
                .await
                .unwrap_err();
            assert!(err.to_string().contains("nope"), "{err}");
            assert!(server.finish().is_empty());
        }
    }
}
