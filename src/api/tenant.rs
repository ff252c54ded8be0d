//! `Tenant` (tenant.kubezoo.io/v1alpha1): KubeZoo's tenant, cluster-scoped. Only the fields the
//! tenant collector needs; unknown fields in real KubeZoo objects are preserved by the API server
//! and ignored here.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "tenant.kubezoo.io",
    version = "v1alpha1",
    kind = "Tenant",
    status = "TenantStatus",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct TenantSpec {
    /// The tenant id: 6 characters of [a-z0-9]; in KubeZoo it equals the object's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantStatus {
    /// Where the teardown stands (e.g. Active, Deleting, Blocked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Objects still to delete, by `group/kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<std::collections::BTreeMap<String, u64>>,
    /// The last error the teardown hit, naming the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Objects being deleted but held by finalizers (e.g. namespaces still terminating).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stuck: Vec<String>,
    /// `IdValid` and `TeardownComplete`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A status condition in the usual Kubernetes shape.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}
