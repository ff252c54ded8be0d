//! Publishing Kubernetes Events (events.k8s.io/v1) on the objects collectors act on.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder};

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
