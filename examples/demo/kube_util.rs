//! Small Kubernetes helpers the demo's set-up and clean-up share.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Labels every object the demo creates carries (besides the ones the collectors read).
pub const DEMO_LABEL: &str = "demo.sweeper.dev/part";

pub fn labels(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Polls `f` every 250 ms until it holds or `timeout` passes.
pub async fn eventually<F, Fut>(timeout: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if f().await {
            return true;
        }
        if start.elapsed() > timeout {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub async fn create_namespace(c: &Client, name: &str, l: &[(&str, &str)]) -> Res<()> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    ns.metadata.labels = labels(l);
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(|e| format!("create namespace {name}: {e}"))?;
    Ok(())
}

/// Creates `obj`, naming it in the error.
pub async fn create<K>(api: &Api<K>, obj: &K) -> Res<K>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + Debug,
    K::DynamicType: Default,
{
    api.create(&PostParams::default(), obj).await.map_err(|e| {
        format!(
            "create {} {}: {e}",
            K::kind(&Default::default()),
            obj.meta().name.as_deref().unwrap_or("?")
        )
        .into()
    })
}

/// Deletes `name` (background propagation); missing is fine.
pub async fn delete<K>(api: &Api<K>, name: &str) -> Res<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(format!("delete {name}: {e}").into()),
    }
}

/// Deletes `name` and strips its finalizers, so a leftover goes even when no collector runs.
/// Only for the demo's own kinds: never for CRDs (their finalizer removes the custom resources).
pub async fn delete_and_release<K>(api: &Api<K>, name: &str) -> Res<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    delete(api, name).await?;
    let release = serde_json::json!({"metadata": {"finalizers": null}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&release))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(format!("release finalizers of {name}: {e}").into()),
    }
}

/// True once `name` no longer exists.
pub async fn is_gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    matches!(api.get_metadata_opt(name).await, Ok(None))
}
