//! The API calls the cascade collector makes, each optimistic: deletes carry uid and
//! resourceVersion preconditions from the watched state, patches carry the resourceVersion, so a
//! stale view can never delete or rewrite the wrong thing; it gets a conflict and re-classifies.

use super::classify::Propagation;
use crate::engine::graph::kinds::ResolvedKind;
use kube::api::{
    DeleteParams, DynamicObject, PartialObjectMeta, Patch, PatchParams, Preconditions,
};
use kube::{Api, Client};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error("{verb} {kind} {name}: conflict (the object changed since it was observed)")]
    Conflict {
        verb: &'static str,
        kind: String,
        name: String,
    },
    #[error("{verb} {kind} {name}: {source}")]
    Api {
        verb: &'static str,
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The target of an action: a resolved resource, a namespace (None for cluster-scoped), a name.
pub struct ActionTarget<'a> {
    pub resource: &'a ResolvedKind,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

impl ActionTarget<'_> {
    fn api(&self, client: &Client) -> Api<DynamicObject> {
        match (self.resource.namespaced, self.namespace) {
            (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &self.resource.resource),
            _ => Api::all_with(client.clone(), &self.resource.resource),
        }
    }

    fn meta_api(&self, client: &Client) -> Api<PartialObjectMeta<DynamicObject>> {
        match (self.resource.namespaced, self.namespace) {
            (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &self.resource.resource),
            _ => Api::all_with(client.clone(), &self.resource.resource),
        }
    }

    fn err(&self, verb: &'static str, e: kube::Error) -> ActionError {
        let kind = self.resource.resource.kind.clone();
        let name = match self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.to_string(),
        };
        if is_status(&e, 409) {
            ActionError::Conflict { verb, kind, name }
        } else {
            ActionError::Api {
                verb,
                kind,
                name,
                source: e,
            }
        }
    }
}

impl ActionError {
    /// The failure's `reason` label in `sweeper_cascade_errors_total`: the API server's answer
    /// by class, or `transport` when none came; bounded, never the message.
    pub fn reason(&self) -> &'static str {
        let source = match self {
            ActionError::Conflict { .. } => return "conflict",
            ActionError::Api { source, .. } => source,
        };
        if crate::engine::client::refusal(source).is_some() {
            return "fenced";
        }
        match source {
            kube::Error::Api(s) => match s.code {
                401 | 403 => "forbidden",
                404 => "not_found",
                409 => "conflict",
                422 => "invalid",
                429 => "throttled",
                500.. => "server_error",
                _ => "rejected",
            },
            _ => "transport",
        }
    }

    /// Whether the collector's pause refused the call before it was sent.
    pub fn paused(&self) -> bool {
        matches!(self, ActionError::Api { source, .. } if crate::engine::client::refused_by_pause(source))
    }
}

pub fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

#[derive(Debug, PartialEq, Eq)]
pub enum ActionOutcome {
    Done,
    /// The object was already gone (404): nothing to do.
    Gone,
}

/// DELETE with uid (and, when known, resourceVersion) preconditions.
pub async fn delete(
    client: &Client,
    t: &ActionTarget<'_>,
    uid: &str,
    resource_version: u64,
    policy: Propagation,
) -> Result<ActionOutcome, ActionError> {
    let dp = DeleteParams {
        propagation_policy: Some(match policy {
            Propagation::Background => kube::api::PropagationPolicy::Background,
            Propagation::Foreground => kube::api::PropagationPolicy::Foreground,
            Propagation::Orphan => kube::api::PropagationPolicy::Orphan,
        }),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: (resource_version > 0).then(|| resource_version.to_string()),
        }),
        ..Default::default()
    };
    match t.api(client).delete(t.name, &dp).await {
        Ok(_) => Ok(ActionOutcome::Done),
        Err(e) if is_status(&e, 404) => Ok(ActionOutcome::Gone),
        Err(e) => Err(t.err("delete", e)),
    }
}

/// Replaces `metadata.ownerReferences` (merge patch; lists are replaced whole), guarded by the
/// resourceVersion the new list was computed from.
pub async fn set_owner_references(
    client: &Client,
    t: &ActionTarget<'_>,
    resource_version: u64,
    refs: serde_json::Value,
) -> Result<ActionOutcome, ActionError> {
    let mut meta = json!({ "ownerReferences": refs });
    if resource_version > 0 {
        meta["resourceVersion"] = json!(resource_version.to_string());
    }
    merge_patch(
        client,
        t,
        "patch ownerReferences of",
        json!({ "metadata": meta }),
    )
    .await
}

/// Removes `finalizers` from the object if present: reads the current list (finalizers of
/// other controllers must survive untouched) and writes it back guarded by resourceVersion.
/// `expected_uid` guards against a recreated object with the same name.
pub async fn remove_finalizers(
    client: &Client,
    t: &ActionTarget<'_>,
    expected_uid: &str,
    finalizers: &[&str],
) -> Result<ActionOutcome, ActionError> {
    let current = match t.meta_api(client).get_opt(t.name).await {
        Ok(Some(m)) => m.metadata,
        Ok(None) => return Ok(ActionOutcome::Gone),
        Err(e) => return Err(t.err("read", e)),
    };
    if current.uid.as_deref() != Some(expected_uid) {
        return Ok(ActionOutcome::Gone);
    }
    let list = current.finalizers.unwrap_or_default();
    if !list.iter().any(|f| finalizers.contains(&f.as_str())) {
        return Ok(ActionOutcome::Done);
    }
    let kept: Vec<&String> = list
        .iter()
        .filter(|f| !finalizers.contains(&f.as_str()))
        .collect();
    let patch = json!({ "metadata": {
        "finalizers": kept,
        "resourceVersion": current.resource_version,
    }});
    merge_patch(client, t, "remove finalizer from", patch).await
}

/// A merge patch of the target, the one way this collector writes an object: gone (404) is
/// [`ActionOutcome::Gone`], a conflict (409, the resourceVersion the patch carries moved on) is
/// [`ActionError::Conflict`], anything else an error naming `verb` and the object.
async fn merge_patch(
    client: &Client,
    t: &ActionTarget<'_>,
    verb: &'static str,
    patch: serde_json::Value,
) -> Result<ActionOutcome, ActionError> {
    match t
        .api(client)
        .patch(t.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(ActionOutcome::Done),
        Err(e) if is_status(&e, 404) => Ok(ActionOutcome::Gone),
        Err(e) => Err(t.err(verb, e)),
    }
}

/// Whether `finalizers` are off the object with `uid` (it is gone, replaced, or holds none of
/// them): asked when a release's answer was lost, to settle its archive entry truthfully.
pub async fn finalizers_released(
    client: &Client,
    t: &ActionTarget<'_>,
    uid: &str,
    finalizers: &[&str],
) -> Result<bool, ActionError> {
    match t.meta_api(client).get_opt(t.name).await {
        Ok(Some(m)) if m.metadata.uid.as_deref() == Some(uid) => Ok(!m
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| finalizers.contains(&f.as_str()))),
        Ok(_) => Ok(true),
        Err(e) => Err(t.err("look up", e)),
    }
}

/// Whether the object with `uid` is gone or being deleted (a DELETE of it took effect): asked
/// when a DELETE's answer was lost, to settle its archive entry truthfully.
pub async fn deleted_or_deleting(
    client: &Client,
    t: &ActionTarget<'_>,
    uid: &str,
) -> Result<bool, ActionError> {
    match t.meta_api(client).get_opt(t.name).await {
        Ok(m) => Ok(crate::engine::meta::deleted_or_deleting(
            m.as_ref().map(|m| &m.metadata),
            uid,
        )),
        Err(e) => Err(t.err("look up", e)),
    }
}

/// Whether the object exists with `uid` (a live lookup for a virtual owner).
pub async fn exists_with_uid(
    client: &Client,
    t: &ActionTarget<'_>,
    uid: &str,
) -> Result<bool, ActionError> {
    match t.meta_api(client).get_opt(t.name).await {
        Ok(Some(m)) => Ok(m.metadata.uid.as_deref() == Some(uid)),
        Ok(None) => Ok(false),
        Err(e) => Err(t.err("look up", e)),
    }
}
