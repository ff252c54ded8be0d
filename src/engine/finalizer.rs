//! The finalizer framework the tenant and external collectors use: add our finalizer while the
//! object lives, run an idempotent cleanup once it is being deleted, and remove the finalizer
//! only when the cleanup reports done. Cleanup state is never stored: each pass re-derives it
//! from the world, so a crash at any point simply resumes.
//!
//! Patches are JSON patches with a `test` of the finalizer list (as kube-runtime's finalizer
//! helper does), so a concurrent change by another controller fails the patch instead of being
//! overwritten.

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;
use std::fmt::Debug;

#[derive(Debug, thiserror::Error)]
pub enum FinalizerError {
    #[error("cannot {action} finalizer {finalizer} on {object}: {source}")]
    Patch {
        action: &'static str,
        finalizer: String,
        object: String,
        #[source]
        source: kube::Error,
    },
}

/// What the collector should do with an object, from its finalizers and deletion state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Live and without our finalizer: add it.
    AddFinalizer,
    /// Live with our finalizer: nothing to clean yet.
    Live,
    /// Being deleted and holding our finalizer: run the cleanup.
    Cleanup,
    /// Being deleted without our finalizer: not ours to clean.
    NotOurs,
}

pub fn stage<K: Resource>(obj: &K, finalizer: &str) -> Stage {
    let has = obj.finalizers().iter().any(|f| f == finalizer);
    match (obj.meta().deletion_timestamp.is_some(), has) {
        (false, false) => Stage::AddFinalizer,
        (false, true) => Stage::Live,
        (true, true) => Stage::Cleanup,
        (true, false) => Stage::NotOurs,
    }
}

fn describe<K: Resource>(obj: &K) -> String
where
    K::DynamicType: Default,
{
    crate::engine::meta::label_of(obj)
}

/// Adds `finalizer` (no-op if present).
pub async fn add<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), FinalizerError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    if obj.finalizers().iter().any(|f| f == finalizer) {
        return Ok(());
    }
    let patch = if obj.meta().finalizers.is_none() {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ])
    } else {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": obj.finalizers()},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ])
    };
    patch_json(api, obj, patch, "add", finalizer).await
}

/// Removes `finalizer` (no-op if absent).
pub async fn remove<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), FinalizerError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    let Some(i) = obj.finalizers().iter().position(|f| f == finalizer) else {
        return Ok(());
    };
    let patch = json!([
        {"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": finalizer},
        {"op": "remove", "path": format!("/metadata/finalizers/{i}")},
    ]);
    patch_json(api, obj, patch, "remove", finalizer).await
}

async fn patch_json<K>(
    api: &Api<K>,
    obj: &K,
    patch: serde_json::Value,
    action: &'static str,
    finalizer: &str,
) -> Result<(), FinalizerError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("static JSON patch shape");
    match api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        // Gone already: nothing left to hold.
        Err(kube::Error::Api(s)) if s.code == 404 && action == "remove" => Ok(()),
        Err(source) => Err(FinalizerError::Patch {
            action,
            finalizer: finalizer.to_string(),
            object: describe(obj),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn cm(finalizers: &[&str], deleting: bool) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.finalizers = Some(finalizers.iter().map(|s| s.to_string()).collect());
        if deleting {
            c.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        }
        c
    }

    #[test]
    fn stages_follow_finalizer_and_deletion() {
        assert_eq!(stage(&cm(&[], false), "x"), Stage::AddFinalizer);
        assert_eq!(stage(&cm(&["x"], false), "x"), Stage::Live);
        assert_eq!(stage(&cm(&["y", "x"], true), "x"), Stage::Cleanup);
        assert_eq!(stage(&cm(&["y"], true), "x"), Stage::NotOurs);
    }
}
