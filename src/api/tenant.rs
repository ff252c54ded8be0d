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
    /// The tenant id. KubeZoo's type is an int32 (`id: 111111`); a string is accepted too (earlier
    /// sweeper versions wrote one). The prefix of the tenant's objects is always the object's
    /// name; `spec.id` must agree with it (see tenant::id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<SpecId>,
    /// KubeZoo's resource quota for the tenant (`hard: {cpu: "4", ...}`): read as it is, never
    /// interpreted by sweeper.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub quota: Option<serde_json::Value>,
}

/// `spec.id` as KubeZoo writes it (an integer) or as a string.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(untagged)]
pub enum SpecId {
    Int(i64),
    Str(String),
}

impl std::fmt::Display for SpecId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecId::Int(i) => write!(f, "{i}"),
            SpecId::Str(s) => f.write_str(s),
        }
    }
}

impl JsonSchema for SpecId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SpecId".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "x-kubernetes-int-or-string": true,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
        })
    }
}

fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
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
