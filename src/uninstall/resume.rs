//! Resuming what the last uninstall paused, and nothing else.

use super::{UNINSTALL_REASON, UninstallError};
use crate::engine::pause;
use kube::Client;
use kube::api::Api;

/// `sweeper resume --after-uninstall`: resumes the collectors a `sweeper uninstall` paused (its
/// [`UNINSTALL_REASON`]), and only those: a pause an operator set is theirs to lift. The chart's
/// post-install hook runs it, so a reinstall does not start paused by the last uninstall. Returns
/// the collectors resumed.
pub async fn resume_after_uninstall(
    client: &Client,
    namespace: &str,
) -> Result<Vec<String>, UninstallError> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let err = |source| UninstallError::Pause {
        namespace: namespace.to_string(),
        source,
    };
    let names = crate::catalog::names();
    let current = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get_opt(pause::CONFIGMAP)
        .await
        .map_err(|source| {
            err(pause::SwitchError::Api {
                namespace: namespace.to_string(),
                source,
            })
        })?;
    let data = current.and_then(|c| c.data).unwrap_or_default();
    let (paused, _) = pause::parse(&data, &names);
    let ours: Vec<String> = paused
        .iter()
        .filter(|(_, r)| r.reason.as_deref() == Some(UNINSTALL_REASON))
        .map(|(c, _)| c.clone())
        .collect();
    for c in &ours {
        pause::set(client, namespace, Some(c), None, &names)
            .await
            .map_err(err)?;
    }
    Ok(ours)
}
