//! Writing sweeper's condition onto a CAPA object without disturbing CAPA's own conditions:
//! read the status as JSON, replace only our condition type, write back guarded by
//! resourceVersion (a JSON merge patch replaces lists whole, so a blind patch would drop CAPA's).

use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

pub const CONDITION: &str = "ExternalResourcesDeleted";

/// Sets our condition on `name`; a no-op (returning false) when status, reason and message are
/// unchanged, so a requeue loop neither rewrites the status nor repeats its Event.
pub async fn set(
    api: &Api<DynamicObject>,
    name: &str,
    status: bool,
    reason: &str,
    message: &str,
) -> Result<bool, kube::Error> {
    let obj = api.get(name).await?;
    let mut conditions: Vec<Value> = obj.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let status_s = if status { "True" } else { "False" };
    let existing = conditions.iter().position(|c| c["type"] == CONDITION);
    if let Some(i) = existing {
        let c = &conditions[i];
        if c["status"] == status_s && c["reason"] == reason && c["message"] == message {
            return Ok(false);
        }
    }
    let since = existing
        .filter(|&i| conditions[i]["status"] == status_s)
        .and_then(|i| {
            conditions[i]["lastTransitionTime"]
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_else(|| {
            k8s_openapi::jiff::Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string()
        });
    let ours = json!({
        "type": CONDITION,
        "status": status_s,
        "severity": if status { "" } else { "Warning" },
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    });
    match existing {
        Some(i) => conditions[i] = ours,
        None => conditions.push(ours),
    }
    let patch = json!({
        "metadata": {"resourceVersion": obj.metadata.resource_version},
        "status": {"conditions": conditions},
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(true)
}
