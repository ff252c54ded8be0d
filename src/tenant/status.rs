//! What the tenant collector writes on a Tenant: its status (phase, remaining objects, conditions)
//! and Warnings, each published once per change. KubeZoo's own Tenant CRD has no status subresource
//! (the status write answers 404 and the Events stand alone), so repeats are suppressed in memory,
//! not by comparing with a status that may not exist.

use super::pass::TenantPassReport;
use crate::api::tenant::{Condition, Tenant, TenantStatus};
use crate::engine::events::Publisher;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Debug, thiserror::Error)]
#[error("cannot update the status of tenant {name}: {source}")]
pub struct StatusError {
    pub name: String,
    #[source]
    pub source: kube::Error,
}

pub fn condition(type_: &str, ok: bool, reason: &str, message: String) -> Condition {
    Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_transition_time: Some(k8s_openapi::jiff::Timestamp::now().to_string()),
    }
}

/// Writes `status` unless it says what the object already says (status writes re-trigger the
/// controller: writing unchanged status would loop). Conditions keep their transition time while
/// their status holds.
pub async fn set_status(
    api: &Api<Tenant>,
    t: &Tenant,
    mut status: TenantStatus,
) -> Result<bool, StatusError> {
    let current = t.status.clone().unwrap_or_default();
    for c in &mut status.conditions {
        if let Some(old) = current
            .conditions
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
        {
            c.last_transition_time = old.last_transition_time.clone();
        }
    }
    if serde_json::to_value(&current).ok() == serde_json::to_value(&status).ok() {
        return Ok(false);
    }
    let name = t.name_any();
    let patch = serde_json::json!({ "status": status });
    match api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(source) => Err(StatusError { name, source }),
    }
}

/// Writes `status` through the status subresource without comparing (an object that did not
/// decode has no typed status to compare with); a CRD without the subresource is fine.
pub async fn force_status(
    api: &Api<Tenant>,
    name: &str,
    status: &TenantStatus,
) -> Result<(), StatusError> {
    let patch = serde_json::json!({ "status": status });
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) | Err(kube::Error::Api(_)) => Ok(()),
        Err(source) => Err(StatusError {
            name: name.to_string(),
            source,
        }),
    }
}

/// The status of a teardown that is not done.
pub fn status_of(report: &TenantPassReport, errors: &[String], dry_run: bool) -> TenantStatus {
    let phase = if dry_run {
        "DryRun"
    } else if errors.is_empty() {
        "Deleting"
    } else {
        "Blocked"
    };
    let message = if dry_run {
        format!("dry run: would delete {}", report.would_delete.join(", "))
    } else {
        format!("{} objects remain", report.remaining.values().sum::<u64>())
    };
    TenantStatus {
        phase: Some(phase.into()),
        remaining: Some(report.remaining.clone()),
        last_error: errors.first().cloned(),
        stuck: report.stuck.clone(),
        conditions: vec![condition("TeardownComplete", false, phase, message)],
    }
}

/// Warnings on tenants, each published once until it changes: a blocked teardown requeues every
/// few seconds. Forgotten when the tenant's finalizer is released.
pub struct Warnings {
    events: Publisher,
    last: Mutex<HashMap<String, String>>,
}

impl Warnings {
    pub fn new(events: Publisher) -> Self {
        Warnings {
            events,
            last: Mutex::default(),
        }
    }

    /// Publishes a Warning unless it repeats the last one on this object; true when published.
    pub async fn once<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        reason: &str,
        note: String,
    ) -> bool {
        let key = obj.meta().uid.clone().unwrap_or_default();
        let said = format!("{reason}: {note}");
        let repeat = self
            .last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, said.clone())
            .is_some_and(|last| last == said);
        if !repeat {
            self.events
                .emit(&obj.object_ref(&()), EventType::Warning, reason, note)
                .await;
        }
        !repeat
    }

    pub fn forget(&self, t: &Tenant) {
        if let Some(uid) = &t.metadata.uid {
            self.last
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(uid);
        }
    }
}
