//! Publishing Kubernetes Events (events.k8s.io/v1) on the objects collectors act on.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// One collector's Event source: its controller name and action, and this replica as instance.
#[derive(Clone)]
pub struct Publisher {
    recorder: Recorder,
    action: &'static str,
}

impl Publisher {
    pub fn new(client: kube::Client, controller: &str, action: &'static str) -> Self {
        let reporter = Reporter {
            controller: controller.into(),
            instance: instance(),
        };
        Publisher {
            recorder: Recorder::new(client, reporter),
            action,
        }
    }

    pub async fn emit(
        &self,
        reference: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: self.action.into(),
            secondary: None,
        };
        publish(&self.recorder, &ev, reference).await;
    }
}

/// This replica's name in Events: the pod name (the Deployment passes it as the leader-election
/// identity), else the host name.
fn instance() -> Option<String> {
    ["POD_NAME", "SWEEPER_LEADER_ELECT_IDENTITY", "HOSTNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// Publishes `ev` about `reference`. Events about cluster-scoped objects live in `default`;
/// API servers before 1.22 reject such an Event unless the reference names that namespace too,
/// so on a 422 the reference is retried with `namespace: default`.
pub async fn publish(recorder: &Recorder, ev: &Event, reference: &ObjectReference) {
    let first = recorder.publish(ev, reference).await;
    let result = match first {
        Err(kube::Error::Api(s)) if s.code == 422 && reference.namespace.is_none() => {
            let mut r = reference.clone();
            r.namespace = Some("default".into());
            recorder.publish(ev, &r).await
        }
        other => other,
    };
    if let Err(e) = result {
        tracing::warn!(error = %e, reason = %ev.reason, object = ?reference.name, "cannot publish Event");
    }
}
