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
}
