//! CAPA and Cluster API objects as the upstream projects define them: their CRDs from
//! `scripts/fixtures.sh` (see support::conformance), objects from CAPA's own templates, and the
//! reads the conformance tests make of them; and [`aws_cluster`], a minimal AWSCluster of
//! sweeper's own type for the external collector's tests.

#![allow(dead_code)] // each test binary uses a different part

use super::conformance;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use sweeper::api::capa::{AWSCluster, Cluster, ClusterSpec, ObjectRef};

pub const FINALIZER: &str = "sweeper.dev/external-resource-gc";

/// The label that makes the test environment's CAPA webhooks skip an object, as if it had been
/// created before CAPA's webhook was installed: for the bad-input tests' malformed objects only
/// (scripts/go/capa-webhooks, `BypassLabel`). Every other object goes through CAPA's admission.
pub const CREATED_BEFORE_WEBHOOK: &str = "sweeper.dev/test-created-before-capa-webhook";

/// The reason of sweeper's condition (`ExternalResourcesDeleted`) on an object read through CAPA's
/// CRDs, once it has one.
pub async fn our_reason(api: &Api<DynamicObject>, name: &str) -> Option<String> {
    let o = api.get_opt(name).await.ok()??;
    o.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ExternalResourcesDeleted")
        .and_then(|c| c["reason"].as_str().map(str::to_string))
}

/// CAPA's and Cluster API's CRDs, replacing sweeper's (the next test's install_sweeper_crds puts
/// sweeper's back).
pub async fn upstream_crds(c: &Client) {
    for rel in [
        "capa/infrastructure.cluster.x-k8s.io_awsclusters.yaml",
        "capa/infrastructure.cluster.x-k8s.io_awsmanagedclusters.yaml",
        "capa/controlplane.cluster.x-k8s.io_awsmanagedcontrolplanes.yaml",
        "capi/cluster.x-k8s.io_clusters.yaml",
    ] {
        conformance::install_crd(c, rel).await;
    }
}

/// Replaces every `${VAR}` in the strings of `v`.
pub fn substitute(v: &mut Value, vars: &[(&str, &str)]) {
    match v {
        Value::String(s) => {
            for (k, val) in vars {
                *s = s.replace(&format!("${{{k}}}"), val);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| substitute(i, vars)),
        Value::Object(map) => map.values_mut().for_each(|i| substitute(i, vars)),
        _ => {}
    }
}

/// The template's object of `kind`, variables substituted.
pub fn from_template(rel: &str, kind: &str, vars: &[(&str, &str)]) -> Value {
    let mut doc = conformance::docs(rel)
        .into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("{rel} has no {kind}"));
    substitute(&mut doc, vars);
    doc
}

pub fn api(c: &Client, ns: &str, api_version: &str, kind: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        &format!("{}s", kind.to_lowercase()),
    );
    Api::namespaced_with(c.clone(), ns, &ar)
}

pub async fn create(api: &Api<DynamicObject>, v: Value) -> DynamicObject {
    let obj: DynamicObject = serde_json::from_value(v).expect("an object");
    let name = obj.name_any();
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"))
}

/// The CAPI owner reference and label CAPI's cluster controller puts on infrastructure objects.
pub fn owned_by_cluster(v: &mut Value, cluster: &DynamicObject) {
    let types = cluster.types.clone().expect("Cluster has apiVersion");
    v["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] = json!(cluster.name_any());
    v["metadata"]["ownerReferences"] = json!([{
        "apiVersion": types.api_version, "kind": "Cluster", "name": cluster.name_any(),
        "uid": cluster.uid().expect("uid"), "controller": false, "blockOwnerDeletion": true,
    }]);
}

/// A network CAPA made for cluster `name`: VPC and subnet tagged as CAPA tags what it owns, the
/// VPC with CAPA's `common` role.
pub async fn capa_network(aws: &sweeper_aws::phases::AwsClients, name: &str) -> super::aws::Net {
    use super::aws::{network, tag};
    let capa_key = format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{name}");
    let net = network(aws).await;
    for id in [&net.vpc, &net.subnet] {
        tag(aws, id, &capa_key, "owned").await;
    }
    tag(
        aws,
        &net.vpc,
        "sigs.k8s.io/cluster-api-provider-aws/role",
        "common",
    )
    .await;
    net
}

pub fn capa_conditions() -> Value {
    let t = "2026-01-01T00:00:00Z";
    json!([
        {"type": "Ready", "status": "True", "lastTransitionTime": t},
        {"type": "VpcReady", "status": "True", "lastTransitionTime": t},
        {"type": "LoadBalancerReady", "status": "True", "lastTransitionTime": t},
        {"type": "ClusterSecurityGroupsReady", "status": "False", "severity": "Info",
         "reason": "Deleting", "message": "cluster security groups are being deleted", "lastTransitionTime": t},
    ])
}

pub async fn set_status(api: &Api<DynamicObject>, name: &str, status: Value) {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": status})),
    )
    .await
    .unwrap_or_else(|e| panic!("status of {name}: {e}"));
}

pub async fn has_finalizer(api: &Api<DynamicObject>, name: &str) -> bool {
    api.get_opt(name)
        .await
        .unwrap()
        .is_some_and(|o| o.finalizers().iter().any(|f| f == FINALIZER))
}

pub async fn gone(api: &Api<DynamicObject>, name: &str) -> bool {
    api.get_opt(name).await.unwrap().is_none()
}

pub fn vars<'a>(name: &'a str, region: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![
        ("CLUSTER_NAME", name),
        ("AWS_REGION", region),
        ("AWS_SSH_KEY_NAME", "default"),
        ("KUBERNETES_VERSION", "v1.33.0"),
    ]
}

/// The Cluster and the AWSCluster (owned by it) of CAPA's own template for `name` in `ns`, with
/// `edit` applied to the AWSCluster before it is created; returns the AWSCluster API.
pub async fn template_cluster(
    c: &Client,
    ns: &str,
    name: &str,
    edit: impl FnOnce(&mut Value),
) -> Api<DynamicObject> {
    let region = crate::support::EnvFacts::load().get("AWS_REGION");
    let vars = vars(name, &region);
    let tpl = "capa/templates/cluster-template.yaml";
    let clusters = api(c, ns, "cluster.x-k8s.io/v1beta1", "Cluster");
    let cluster = create(&clusters, from_template(tpl, "Cluster", &vars)).await;
    let mut ac = from_template(tpl, "AWSCluster", &vars);
    owned_by_cluster(&mut ac, &cluster);
    edit(&mut ac);
    let infra = api(
        c,
        ns,
        "infrastructure.cluster.x-k8s.io/v1beta2",
        "AWSCluster",
    );
    create(&infra, ac).await;
    infra
}

/// The AWSCluster [`aws_cluster`] creates for CAPI cluster `cluster`.
pub fn infra_name(cluster: &str) -> String {
    format!("{cluster}-infra")
}

/// A minimal AWSCluster (sweeper's own type, on the CRDs `install_sweeper_crds` installs, not
/// CAPA's template) for CAPI cluster `cluster` in `ns`: named [`infra_name`], owned by its
/// Cluster (created first, pointing at it) and labelled as Cluster API does, with `annotations`.
/// Returns the AWSCluster API.
pub async fn aws_cluster(
    c: &Client,
    ns: &str,
    cluster: &str,
    annotations: &[(&str, &str)],
) -> Api<AWSCluster> {
    let cl = Cluster::new(
        cluster,
        ClusterSpec {
            infrastructure_ref: Some(ObjectRef {
                api_version: Some("infrastructure.cluster.x-k8s.io/v1beta2".into()),
                api_group: None,
                kind: Some("AWSCluster".into()),
                name: Some(infra_name(cluster)),
                namespace: None,
            }),
            control_plane_ref: None,
            paused: None,
        },
    );
    let cl = Api::<Cluster>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &cl)
        .await
        .expect("create Cluster");
    let api: Api<AWSCluster> = Api::namespaced(c.clone(), ns);
    let mut ac = AWSCluster::new(&infra_name(cluster), Default::default());
    ac.metadata.labels = Some(
        [(
            "cluster.x-k8s.io/cluster-name".to_string(),
            cluster.to_string(),
        )]
        .into(),
    );
    ac.metadata.owner_references = Some(vec![owner_reference(&cl)]);
    ac.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    api.create(&PostParams::default(), &ac)
        .await
        .expect("create AWSCluster");
    api
}

/// The owner reference Cluster API's Cluster controller puts on the objects it owns.
pub fn owner_reference(
    cluster: &Cluster,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "cluster.x-k8s.io/v1beta1".into(),
        kind: "Cluster".into(),
        name: cluster.name_any(),
        uid: cluster.uid().expect("a created Cluster has a uid"),
        controller: Some(false),
        block_owner_deletion: Some(true),
    }
}

/// Every entry of the external collector's audit records of `cluster` in `ns`: wherever the
/// sweeper that wrote them keeps them (its own namespace), found by their labels.
pub async fn audit_entries(c: &Client, ns: &str, cluster: &str) -> Vec<Value> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let selector = sweeper::external::core::audit::selector(ns, cluster);
    Api::<ConfigMap>::all(c.clone())
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .flat_map(|r| r.data.unwrap_or_default().into_values())
        .map(|e| serde_json::from_str(&e).expect("an audit entry is JSON"))
        .collect()
}

/// CAPA's three identity CRDs (cluster-scoped: AWSClusterControllerIdentity,
/// AWSClusterRoleIdentity, AWSClusterStaticIdentity), as CAPA ships them.
pub async fn identity_crds(c: &Client) {
    for plural in [
        "awsclustercontrolleridentities",
        "awsclusterroleidentities",
        "awsclusterstaticidentities",
    ] {
        let group = "infrastructure.cluster.x-k8s.io";
        conformance::install_crd(c, &format!("capa/{group}_{plural}.yaml")).await;
        super::objects::wait_established(c, &format!("{plural}.{group}")).await;
    }
}

/// An API for a cluster-scoped CAPA identity kind (plural `...identities`).
pub fn cluster_api(c: &Client, api_version: &str, kind: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let plural = format!("{}ies", kind.to_lowercase().trim_end_matches('y'));
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural);
    Api::all_with(c.clone(), &ar)
}

/// The EKS objects of CAPA's cluster-template-eks.yaml for Cluster `name`, with
/// `spec.eksClusterName` set as CAPA's defaulting webhook would (its default form is
/// `<namespace>_<control plane name>`); returns the control plane's name.
pub async fn eks_cluster(
    c: &Client,
    ns: &str,
    name: &str,
    region: &str,
    eks_name: &str,
) -> (Api<DynamicObject>, Api<DynamicObject>, String) {
    eks_cluster_with(c, ns, name, region, |cp| {
        cp["spec"]["eksClusterName"] = json!(eks_name);
    })
    .await
}

/// [`eks_cluster`] with `edit` applied to the control plane (owned by its Cluster already)
/// instead of setting `spec.eksClusterName`.
pub async fn eks_cluster_with(
    c: &Client,
    ns: &str,
    name: &str,
    region: &str,
    edit: impl FnOnce(&mut Value),
) -> (Api<DynamicObject>, Api<DynamicObject>, String) {
    let vars = vars(name, region);
    let tpl = "capa/templates/cluster-template-eks.yaml";
    let clusters = api(c, ns, "cluster.x-k8s.io/v1beta1", "Cluster");
    let cluster = create(&clusters, from_template(tpl, "Cluster", &vars)).await;
    let mut mc = from_template(tpl, "AWSManagedCluster", &vars);
    owned_by_cluster(&mut mc, &cluster);
    let managed = api(
        c,
        ns,
        "infrastructure.cluster.x-k8s.io/v1beta2",
        "AWSManagedCluster",
    );
    create(&managed, mc).await;
    let mut cp = from_template(tpl, "AWSManagedControlPlane", &vars);
    owned_by_cluster(&mut cp, &cluster);
    edit(&mut cp);
    let cps = api(
        c,
        ns,
        "controlplane.cluster.x-k8s.io/v1beta2",
        "AWSManagedControlPlane",
    );
    let cp = create(&cps, cp).await;
    set_status(
        &cps,
        &cp.name_any(),
        json!({"ready": true, "initialized": true, "conditions": capa_conditions()}),
    )
    .await;
    (cps, managed, cp.name_any())
}

/// Creates (or replaces) a cluster-scoped identity object.
pub async fn identity(c: &Client, kind: &str, name: &str, spec: Value) {
    let ids = cluster_api(c, "infrastructure.cluster.x-k8s.io/v1beta2", kind);
    // The controller identity `default` is shared: CAPA's defaulting webhook gives it to every
    // AWSCluster without an identityRef (env-up makes it, as CAPA's manager does). Replacing it
    // would leave every other test's clusters without their identity for a moment: keep it when
    // it is there with the same spec.
    if kind == "AWSClusterControllerIdentity"
        && let Some(existing) = ids.get_opt(name).await.unwrap()
        && existing.data["spec"] == spec
    {
        return;
    }
    let _ = ids.delete(name, &Default::default()).await;
    assert!(
        crate::support::sweeper::eventually(std::time::Duration::from_secs(120), || async {
            ids.get_opt(name).await.unwrap().is_none()
        })
        .await,
        "old {kind} {name} gone"
    );
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": kind, "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap();
    ids.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {kind} {name}: {e}"));
}

/// A static identity's Secret in `ns`: LocalStack takes a 12-digit access key id as the account.
pub async fn static_secret(c: &Client, ns: &str, name: &str, account: &str) {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(c.clone(), ns);
    let s = serde_json::from_value(json!({
        "metadata": {"name": name},
        "stringData": {"AccessKeyID": account, "SecretAccessKey": "test"},
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
}

/// A 12-digit LocalStack account no earlier run used (from the time in microseconds): a test's
/// AWS resources in an account of their own, so inventories and teardowns see no other test's.
pub fn fresh_account() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    format!("{}", 400_000_000_000 + micros % 500_000_000_000)
}

/// A fresh account behind a CAPA static identity allowed in `ns` (its Secret in `capa-system`,
/// names from `prefix`), CAPA's identity CRDs installed first: (account, identity name).
pub async fn fresh_static_identity(c: &Client, ns: &str, prefix: &str) -> (String, String) {
    identity_crds(c).await;
    let account = fresh_account();
    let stat = super::unique_name(&format!("{prefix}static"));
    let secret = super::unique_name(&format!("{prefix}creds"));
    static_secret(c, "capa-system", &secret, &account).await;
    let spec = json!({"secretRef": secret, "allowedNamespaces": {"list": [ns]}});
    identity(c, "AWSClusterStaticIdentity", &stat, spec).await;
    (account, stat)
}

/// A merge patch of `name`, failing the test with the patch and the server's answer.
pub async fn merge(api: &Api<DynamicObject>, name: &str, patch: Value) {
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patch {name} with {patch}: {e}"));
}

/// Sets (or, with `None`, removes) one annotation.
pub async fn annotate(api: &Api<DynamicObject>, name: &str, key: &str, value: Option<&str>) {
    merge(
        api,
        name,
        json!({"metadata": {"annotations": {key: value}}}),
    )
    .await;
}

/// Strips every finalizer, as clusterctl does before it deletes a source object (or a user after
/// uninstalling the controller that held one).
pub async fn strip_finalizers(api: &Api<DynamicObject>, name: &str) {
    merge(api, name, json!({"metadata": {"finalizers": null}})).await;
}
