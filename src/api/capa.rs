//! Cluster API kinds the external collector reads: CAPA's `AWSCluster` and
//! `AWSManagedControlPlane`, and CAPI's `Cluster`. Only the fields sweeper needs are typed; every
//! other field is ignored when reading (so real CAPA objects work) and preserved by the API
//! server (the generated CRDs mark spec and status `x-kubernetes-preserve-unknown-fields`). The
//! CRDs ship in deploy/ for standalone use and tests; with CAPA installed, CAPA's own CRDs serve.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `infrastructure.cluster.x-k8s.io/v1beta2` AWSCluster.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "AWSCluster",
    namespaced,
    status = "GcStatus"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct AWSClusterSpec {
    /// The CAPA identity whose AWS principal acts for this cluster; `None`: the controller's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<IdentityRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
    /// The bucket CAPA keeps the machines' Ignition user data in (AWSCluster only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_bucket: Option<S3Bucket>,
}

/// CAPA's `spec.s3Bucket`: only its name is read (`name` is required in CAPA's CRD).
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct S3Bucket {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The bucket name a `spec.s3Bucket` states, if any (an empty name is none).
pub fn s3_bucket_name(bucket: Option<&S3Bucket>) -> Option<String> {
    bucket
        .and_then(|b| b.name.as_deref())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct NetworkSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpc: Option<VpcSpec>,
}

/// The VPC id a network spec names, if any (empty ids ignored).
pub fn vpc_ids(network: Option<&NetworkSpec>) -> Vec<String> {
    network
        .and_then(|n| n.vpc.as_ref())
        .and_then(|v| v.id.clone())
        .filter(|id| !id.is_empty())
        .into_iter()
        .collect()
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct VpcSpec {
    /// Set for a bring-your-own VPC (or filled in by CAPA for a managed one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// `controlplane.cluster.x-k8s.io/v1beta2` AWSManagedControlPlane (EKS).
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "controlplane.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "AWSManagedControlPlane",
    namespaced,
    status = "GcStatus"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct AWSManagedControlPlaneSpec {
    /// The CAPA identity whose AWS principal acts for this cluster; `None`: the controller's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<IdentityRef>,
    /// The EKS cluster name: the `<name>` in the cluster's tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eks_cluster_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
}

impl AWSManagedControlPlane {
    /// The EKS cluster name CAPA uses for this control plane: `spec.eksClusterName`, or, when it
    /// is missing or empty, the name CAPA's defaulting webhook gives it ([`default_eks_name`]).
    /// An object admitted through CAPA's webhook always has it set; one without it was created
    /// before the webhook was installed (or past it), and gets the default on its next update.
    pub fn eks_name(&self) -> String {
        match self.spec.eks_cluster_name.as_deref() {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => default_eks_name(
                self.metadata.namespace.as_deref().unwrap_or_default(),
                self.metadata.name.as_deref().unwrap_or_default(),
            ),
        }
    }
}

/// The EKS name CAPA's defaulting webhook gives an AWSManagedControlPlane with an empty
/// `spec.eksClusterName`, exactly as CAPA v2.13.0 derives it
/// (`controlplane/eks/webhooks/awsmanagedcontrolplane_webhook.go` `Default` calls
/// `pkg/eks/eks.go` `GenerateEKSName(name, namespace, 100)`): `<namespace>_<name>` with every `.`
/// of the name made `_`; when that is 100 bytes or longer, `capa_` and a 27-character hash of it
/// (`pkg/hash/base36.go`: the BLAKE2b digest of 27 bytes, each byte taken mod 36 into
/// `0-9a-z`, which is not an encoding, so two names can share it: the collision rule covers that).
pub fn default_eks_name(namespace: &str, name: &str) -> String {
    use blake2::digest::{Digest, consts::U27};
    const MAX: usize = 100;
    const PREFIX: &str = "capa_";
    const BASE36: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let joined = format!("{namespace}_{}", name.replace('.', "_"));
    if joined.len() < MAX {
        return joined;
    }
    // 27 = 32 - len("capa_"), as CAPA computes it: BLAKE2b with that output size (its parameter
    // block, not a truncation of a longer digest), which is what Go's blake2b.New(27, nil) is.
    let digest = blake2::Blake2b::<U27>::digest(joined.as_bytes());
    let hashed: String = digest
        .iter()
        .map(|b| BASE36[usize::from(*b) % 36] as char)
        .collect();
    format!("{PREFIX}{hashed}")
}

/// CAPI `cluster.x-k8s.io/v1beta1` Cluster: only the references sweeper resolves. Refs are
/// `{apiVersion, kind, name, namespace}` at this version.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "Cluster",
    namespaced
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<ObjectRef>,
    /// Cluster API's pause: providers (and sweeper) do nothing for the cluster while it is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// CAPI `cluster.x-k8s.io/v1beta2` Cluster, the version Cluster API stores: refs are
/// `{apiGroup, kind, name}` (same namespace as the Cluster, version found by discovery).
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Cluster",
    root = "ClusterV1beta2",
    namespaced
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ClusterSpecV1beta2 {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<ObjectRef>,
    /// Cluster API's pause: providers (and sweeper) do nothing for the cluster while it is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// The Cluster CRD sweeper ships (for standalone use and tests; with Cluster API installed, its
/// own CRD serves). It serves both versions and stores v1beta2, as Cluster API's does, so that
/// sweeper's own tests go through the same version resolution as a real Cluster API, and so that
/// a later Cluster API release serving only v1beta2 can replace it (a CRD whose storedVersions
/// held only v1beta1 could not be replaced by one without v1beta1). There is no conversion
/// webhook: like Cluster API's CRD without its webhook, an object reads back at either version
/// with the refs it was written with, which is why sweeper's ref type accepts both shapes.
pub fn cluster_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use kube::CustomResourceExt;
    let mut crd = ClusterV1beta2::crd();
    let mut v1beta1 = Cluster::crd().spec.versions;
    for v in &mut v1beta1 {
        v.storage = false;
    }
    crd.spec.versions.splice(0..0, v1beta1);
    crd
}

/// A reference to another object, in either of Cluster API's shapes: v1beta1
/// `{apiVersion, kind, name, namespace}` or v1beta2 `{apiGroup, kind, name}`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ObjectRef {
    // Options, not defaulted Strings: a defaulted field would put `default: null` in the
    // generated schema, which the API server rejects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The part of the status sweeper writes: its conditions (other status fields are CAPA's and are
/// preserved by the API server).
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct GcStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<crate::api::tenant::Condition>,
    /// CAPA's `status.oidcProvider` of an AWSManagedControlPlane (EKS with
    /// `associateOIDCProvider`): read to find the cluster's IRSA provider, never written (status
    /// writes patch the conditions alone). Left out of the schema sweeper ships: the field is
    /// CAPA's, and `x-kubernetes-preserve-unknown-fields` keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub oidc_provider: Option<OidcProviderStatus>,
}

/// CAPA's `OIDCProviderStatus` (upstream CRD: `arn`, `trustPolicy`; CAPA records no issuer URL
/// of its own, so the issuer is read from these).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OidcProviderStatus {
    /// `arn:aws:iam::<account>:oidc-provider/<issuer>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    /// The IRSA trust policy CAPA renders for the provider: its `Federated` principal is the
    /// provider's ARN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_policy: Option<String>,
}

impl OidcProviderStatus {
    /// The issuer CAPA recorded, without its scheme (`oidc.eks.<region>.amazonaws.com/id/<ID>`):
    /// from the ARN, else from the trust policy's `Federated` principal. `None` when neither
    /// names one (nothing recorded, or a shape sweeper does not know: then no provider is
    /// deleted, rather than a guessed one).
    pub fn issuer(&self) -> Option<String> {
        fn of_arn(arn: &str) -> Option<String> {
            arn.split_once(":oidc-provider/")
                .map(|(_, i)| i.trim().to_string())
                .filter(|i| !i.is_empty())
        }
        if let Some(i) = self.arn.as_deref().and_then(of_arn) {
            return Some(i);
        }
        let doc: serde_json::Value = serde_json::from_str(self.trust_policy.as_deref()?).ok()?;
        let statements = match &doc["Statement"] {
            serde_json::Value::Array(a) => a.clone(),
            one @ serde_json::Value::Object(_) => vec![one.clone()],
            _ => return None,
        };
        statements
            .iter()
            .find_map(|st| match &st["Principal"]["Federated"] {
                serde_json::Value::String(a) => of_arn(a),
                serde_json::Value::Array(a) => a.iter().filter_map(|v| v.as_str()).find_map(of_arn),
                _ => None,
            })
    }
}

/// `spec.identityRef` of AWSCluster and AWSManagedControlPlane, and `sourceIdentityRef` of a
/// role identity: which CAPA identity object (all cluster-scoped) names the AWS principal.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct IdentityRef {
    // Options, not defaulted Strings: see ObjectRef.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// CAPA's `allowedNamespaces` of an identity: which clusters' namespaces may use it.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AllowedNamespaces {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
}

// CAPA's three identity kinds, typed for reading only: CAPA's CRDs serve them, sweeper ships no
// CRD for them (they are not in `sweeper crds`).

/// `infrastructure.cluster.x-k8s.io/v1beta2` AWSClusterControllerIdentity (singleton `default`):
/// the controller's own credentials, limited by `allowedNamespaces`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "AWSClusterControllerIdentity"
)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterControllerIdentitySpec {
    #[serde(default)]
    pub allowed_namespaces: Option<AllowedNamespaces>,
}

/// `infrastructure.cluster.x-k8s.io/v1beta2` AWSClusterRoleIdentity: a role assumed with the
/// credentials of `sourceIdentityRef` (or the controller's own).
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "AWSClusterRoleIdentity"
)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterRoleIdentitySpec {
    #[serde(default)]
    pub allowed_namespaces: Option<AllowedNamespaces>,
    #[serde(default, rename = "roleARN")]
    pub role_arn: String,
    #[serde(default)]
    pub session_name: Option<String>,
    #[serde(default)]
    pub duration_seconds: Option<i64>,
    #[serde(default, rename = "externalID")]
    pub external_id: Option<String>,
    #[serde(default)]
    pub inline_policy: Option<String>,
    #[serde(default, rename = "policyARNs")]
    pub policy_arns: Option<Vec<String>>,
    #[serde(default)]
    pub source_identity_ref: Option<IdentityRef>,
}

/// `infrastructure.cluster.x-k8s.io/v1beta2` AWSClusterStaticIdentity: an access key in a Secret
/// in CAPA's own namespace.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "AWSClusterStaticIdentity"
)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterStaticIdentitySpec {
    #[serde(default)]
    pub allowed_namespaces: Option<AllowedNamespaces>,
    #[serde(default)]
    pub secret_ref: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str =
        "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/EXAMPLE1";
    const ISSUER: &str = "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLE1";

    #[test]
    fn the_recorded_issuer_comes_from_the_arn_or_the_trust_policy() {
        let st = OidcProviderStatus {
            arn: Some(ARN.into()),
            trust_policy: None,
        };
        assert_eq!(st.issuer().as_deref(), Some(ISSUER));
        // CAPA's buildOIDCTrustPolicy: Principal.Federated is a list holding the provider's ARN.
        let policy = format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{{"Federated":["{ARN}"]}},"Action":["sts:AssumeRoleWithWebIdentity"]}}]}}"#
        );
        let st = OidcProviderStatus {
            arn: Some(String::new()),
            trust_policy: Some(policy),
        };
        assert_eq!(st.issuer().as_deref(), Some(ISSUER));
    }

    /// The expected names are what CAPA v2.13.0's own `eks.GenerateEKSName(name, namespace, 100)`
    /// returned for these inputs (a Go program against the module scripts/go/capa-webhooks pins).
    #[test]
    fn the_default_eks_name_is_capas() {
        let x96 = "x".repeat(96);
        let x97 = "x".repeat(97);
        let long = "long-name".repeat(20);
        let n63 = "n".repeat(63);
        let kept = format!("ns_{x96}");
        for (namespace, name, want) in [
            ("ns", "cp", "ns_cp"),
            ("eksns", "ek1-control-plane", "eksns_ek1-control-plane"),
            ("team-a", "a.b.c", "team-a_a_b_c"),
            ("ns", x96.as_str(), kept.as_str()),
            ("ns", x97.as_str(), "capa_b9jqgzvzoigvoeikcy4nqegugcv"),
            (
                n63.as_str(),
                long.as_str(),
                "capa_0qekuxjprdkcu8vxtdza1y07i62",
            ),
        ] {
            assert_eq!(
                default_eks_name(namespace, name),
                want,
                "{namespace}/{name}"
            );
        }
    }

    #[test]
    fn an_empty_eks_cluster_name_is_defaulted_and_a_set_one_kept() {
        let mut cp = AWSManagedControlPlane::new("cp.1", Default::default());
        cp.metadata.namespace = Some("team-a".into());
        assert_eq!(cp.eks_name(), "team-a_cp_1", "missing");
        cp.spec.eks_cluster_name = Some(String::new());
        assert_eq!(cp.eks_name(), "team-a_cp_1", "empty, as Go's \"\" is");
        cp.spec.eks_cluster_name = Some("prod".into());
        assert_eq!(cp.eks_name(), "prod");
        // Not empty to CAPA either: kept as it is, for the name check to refuse.
        cp.spec.eks_cluster_name = Some(" ".into());
        assert_eq!(cp.eks_name(), " ");
    }

    #[test]
    fn nothing_recorded_names_no_issuer() {
        assert_eq!(OidcProviderStatus::default().issuer(), None);
        let st = OidcProviderStatus {
            arn: Some("arn:aws:iam::1:role/x".into()),
            trust_policy: Some("not json".into()),
        };
        assert_eq!(st.issuer(), None);
    }

    #[test]
    fn capas_status_reads_with_the_oidc_provider() {
        let status: GcStatus = serde_json::from_value(serde_json::json!({
            "ready": true,
            "oidcProvider": {"arn": ARN, "trustPolicy": "{}"},
            "conditions": []
        }))
        .unwrap();
        assert_eq!(
            status.oidc_provider.and_then(|p| p.issuer()).as_deref(),
            Some(ISSUER)
        );
    }
}
