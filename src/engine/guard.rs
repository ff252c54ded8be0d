//! One object that cannot be decoded never stalls a collector.
//!
//! kube's `Controller::new` decodes a whole list page at once: a single object whose spec does
//! not fit our type fails the list, the watch retries without end, and no object of the kind is
//! served (issue 10: a KubeZoo Tenant with an integer `spec.id` silenced the tenant collector).
//! [`Guarded`] decodes each object on its own (kube's `DeserializeGuard` pattern), keeping the
//! metadata of a bad object and the path of the field that failed, so the collector can report
//! it on the object and go on with the others.
//!
//! [`controller`] builds a kube `Controller` over guarded objects whose watch has client-go's
//! backoff and reports its health: while the watch keeps failing, the collector's component is
//! not ready and the reason is on /readyz and /status.

use crate::engine::health::Health;
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::controller::Controller;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Resource};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;
use std::fmt::Debug;
use std::hash::Hash;

/// A `K`, or why this one object could not be read as a `K`.
#[derive(Clone, Debug)]
pub struct Guarded<K>(pub Result<K, Invalid>);

/// An object that did not decode: its metadata (so it can be named, evented and requeued) and
/// the field that failed.
#[derive(Clone, Debug, thiserror::Error)]
#[error("field {field}: {error}")]
pub struct Invalid {
    /// The path of the failing field, e.g. `spec.id` (`.` when the object itself is not a map).
    pub field: String,
    pub error: String,
    pub metadata: ObjectMeta,
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Guarded<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        match serde_path_to_error::deserialize::<_, K>(&value) {
            Ok(k) => Ok(Guarded(Ok(k))),
            Err(e) => {
                // Without readable metadata there is nothing to name or requeue: that is a
                // protocol error, not a bad object, and fails as before.
                let metadata =
                    ObjectMeta::deserialize(&value["metadata"]).map_err(D::Error::custom)?;
                Ok(Guarded(Err(Invalid {
                    field: e.path().to_string(),
                    error: e.into_inner().to_string(),
                    metadata,
                })))
            }
        }
    }
}

impl<K: Resource> Resource for Guarded<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        match &self.0 {
            Ok(k) => k.meta(),
            Err(i) => &i.metadata,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match &mut self.0 {
            Ok(k) => k.meta_mut(),
            Err(i) => &mut i.metadata,
        }
    }
}

/// Where a collector's watch health goes: its readiness component.
#[derive(Clone)]
pub struct WatchHealth {
    pub state: Health,
    pub component: &'static str,
}

impl WatchHealth {
    fn observe<T>(&self, event: &Result<T, watcher::Error>) {
        match event {
            Ok(_) => self.state.set_ready(self.component, true),
            Err(e) => {
                tracing::warn!(component = self.component, error = %e, "watch failing; retrying with backoff");
                self.state
                    .set_failing(self.component, format!("watch failing: {e}"));
            }
        }
    }
}

/// A Controller over guarded `K`s: per-object decoding, client-go's watch backoff (800 ms to
/// 30 s with jitter; the plain `Controller::new` retries a failing watch at once), and the
/// watch's health reported on `health`. `config`: the watch's parameters (a label selector).
/// `deleted` is told of each object the watch sees deleted.
pub fn controller<K>(
    api: Api<Guarded<K>>,
    config: watcher::Config,
    health: WatchHealth,
    deleted: impl Fn(&Guarded<K>) + Send + 'static,
) -> Controller<Guarded<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Debug + Unpin,
{
    let (reader, writer) = reflector::store();
    let stream = watcher::watcher(api, config)
        .default_backoff()
        .inspect(move |event| {
            health.observe(event);
            if let Ok(watcher::Event::Delete(g)) = event {
                deleted(g);
            }
        })
        .reflect(writer)
        .applied_objects()
        .boxed();
    Controller::for_stream(stream, reader)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::tenant::Tenant;
    use kube::ResourceExt;

    #[test]
    fn a_bad_field_is_named_and_the_metadata_kept() {
        let bad: Guarded<Tenant> = serde_json::from_value(serde_json::json!({
            "apiVersion": "tenant.kubezoo.io/v1alpha1", "kind": "Tenant",
            "metadata": {"name": "abc123", "uid": "u1"},
            "spec": {"id": {"nested": true}},
        }))
        .unwrap();
        let invalid = bad.0.as_ref().unwrap_err();
        assert_eq!(invalid.field, "spec.id");
        assert_eq!(bad.name_any(), "abc123");
        assert!(
            invalid.to_string().starts_with("field spec.id: "),
            "{invalid}"
        );
    }

    #[test]
    fn a_list_with_one_bad_object_still_yields_the_others() {
        let list: Vec<Guarded<Tenant>> = serde_json::from_value(serde_json::json!([
            {"metadata": {"name": "111111"}, "spec": {"id": 111111, "quota": {"hard": {"cpu": "4"}}}},
            {"metadata": {"name": "222222"}, "spec": "not an object"},
            {"metadata": {"name": "abc123"}, "spec": {"id": "abc123"}},
        ]))
        .unwrap();
        let ok: Vec<String> = list
            .iter()
            .filter_map(|g| g.0.as_ref().ok())
            .map(|t| t.name_any())
            .collect();
        assert_eq!(ok, vec!["111111", "abc123"]);
        assert_eq!(list[1].0.as_ref().unwrap_err().field, "spec");
    }
}
