//! Building and checking objects for collector tests.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, PostParams, PropagationPolicy};
use kube::{Api, Client, Resource, ResourceExt};
use std::time::Duration;

pub fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K, block: Option<bool>) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: owner.name_any(),
        uid: owner.uid().expect("owner has a uid"),
        block_owner_deletion: block,
        controller: None,
    }
}

pub fn fake_ref(kind: &str, api_version: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        block_owner_deletion: None,
        controller: None,
    }
}

pub async fn configmap(
    client: &Client,
    ns: &str,
    name: &str,
    owners: Vec<OwnerReference>,
) -> ConfigMap {
    configmap_with(client, ns, name, owners, vec![]).await
}

pub async fn configmap_with(
    client: &Client,
    ns: &str,
    name: &str,
    owners: Vec<OwnerReference>,
    finalizers: Vec<String>,
) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    if !owners.is_empty() {
        cm.metadata.owner_references = Some(owners);
    }
    if !finalizers.is_empty() {
        cm.metadata.finalizers = Some(finalizers);
    }
    api.create(&PostParams::default(), &cm)
        .await
        .unwrap_or_else(|e| panic!("create configmap {ns}/{name}: {e}"))
}

pub async fn delete_cm(client: &Client, ns: &str, name: &str, policy: PropagationPolicy) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let dp = DeleteParams {
        propagation_policy: Some(policy),
        ..Default::default()
    };
    api.delete(name, &dp)
        .await
        .unwrap_or_else(|e| panic!("delete configmap {ns}/{name}: {e}"));
}

pub async fn cm(client: &Client, ns: &str, name: &str) -> Option<ConfigMap> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .expect("get configmap")
}

/// Waits until the configmap is gone; false on timeout.
pub async fn cm_gone(client: &Client, ns: &str, name: &str, timeout: Duration) -> bool {
    super::sweeper::eventually(timeout, || async { cm(client, ns, name).await.is_none() }).await
}

/// Removes every finalizer from the configmap (so a test can let it go).
pub async fn clear_finalizers(client: &Client, ns: &str, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({"metadata": {"finalizers": null}});
    let _ = api
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await;
}

pub fn owner_uids(cm: &ConfigMap) -> Vec<String> {
    cm.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| r.uid.clone())
        .collect()
}

/// Waits until the CRD `name` is established (its resources are served).
pub async fn wait_established(client: &Client, name: &str) {
    wait_established_within(client, name, Duration::from_secs(60)).await
}

pub async fn wait_established_within(client: &Client, name: &str, timeout: Duration) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let est = kube::runtime::wait::await_condition(
        crds,
        name,
        kube::runtime::wait::conditions::is_crd_established(),
    );
    tokio::time::timeout(timeout, est)
        .await
        .unwrap_or_else(|_| panic!("CRD {name} not established in {timeout:?}"))
        .expect("watch CRD");
}

/// Creates a schemaless CRD `<plural>.<group>` (v1, kind `kind`, `scope` Namespaced or Cluster)
/// and waits up to `timeout` until it is established; returns its resource.
pub async fn schemaless_crd(
    client: &Client,
    group: &str,
    kind: &str,
    scope: &str,
    timeout: Duration,
) -> kube::api::ApiResource {
    let plural = format!("{}s", kind.to_lowercase());
    let name = format!("{plural}.{group}");
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"group": group, "scope": scope,
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    wait_established_within(client, &name, timeout).await;
    kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, "v1", kind),
        &plural,
    )
}

/// Deletes the CRD of `ar` (e.g. one [`schemaless_crd`] made); already gone is fine.
pub async fn delete_crd(client: &Client, ar: &kube::api::ApiResource) {
    let _ = Api::<CustomResourceDefinition>::all(client.clone())
        .delete(&format!("{}.{}", ar.plural, ar.group), &Default::default())
        .await;
}

/// Makes sure every kind sweeper ships a CRD for is served. On the default test server (env-up
/// applied the upstream CRDs, `SWEEPER_UPSTREAM_CRDS=1`) each kind gets its upstream CRD, as it
/// is: CAPA's, Cluster API's and KubeZoo's users run those, so no test may pass only because
/// sweeper's own looser definition stood in. (Installing an upstream CRD over itself changes
/// nothing; it puts it back after a test swapped in a schemaless one.) On the 1.20 fallback,
/// which cannot take them unmodified, sweeper's own CRDs (as `sweeper crds` prints them) stand in.
pub async fn install_sweeper_crds(client: &Client) {
    let upstream = super::EnvFacts::load()
        .try_get("SWEEPER_UPSTREAM_CRDS")
        .as_deref()
        == Some("1");
    for crd in ::sweeper::api::all_crds() {
        let file = upstream
            .then(|| super::conformance::crd_file(&crd.name_any()))
            .flatten();
        match file {
            Some(rel) => super::conformance::install_crd(client, &rel).await,
            None => replace_crd(client, crd).await,
        }
    }
}

/// Installs `crd`, replacing whatever CRD of that name exists, and waits until it is established.
/// A replace the server refuses because the installed CRD's stored versions (or its immutable
/// fields) do not fit the new one is done as delete, wait until gone, create: that deletes every
/// object of the CRD, which is what a test that swaps CRDs wants anyway.
pub async fn replace_crd(client: &Client, mut crd: CustomResourceDefinition) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    let mut installed = false;
    for _ in 0..10 {
        let existing = crds
            .get_opt(&name)
            .await
            .unwrap_or_else(|e| panic!("read CRD {name}: {e}"));
        let result = match existing {
            None => {
                crd.metadata.resource_version = None;
                crds.create(&PostParams::default(), &crd).await
            }
            Some(old) if old.metadata.deletion_timestamp.is_some() => {
                wait_crd_gone(client, &old).await;
                continue;
            }
            Some(old) => {
                crd.metadata.resource_version = old.metadata.resource_version.clone();
                match crds.replace(&name, &PostParams::default(), &crd).await {
                    Err(kube::Error::Api(s))
                        if s.code == 422
                            && (s.message.contains("storedVersions")
                                || s.message.contains("immutable")) =>
                    {
                        let _ = crds.delete(&name, &DeleteParams::default()).await;
                        wait_crd_gone(client, &old).await;
                        continue;
                    }
                    other => other,
                }
            }
        };
        match result {
            Ok(_) => {
                installed = true;
                break;
            }
            // Another test created or changed it meanwhile: read it again.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => panic!("install CRD {name}: {e}"),
        }
    }
    assert!(
        installed,
        "install CRD {name}: still conflicting after 10 tries"
    );
    wait_established(client, &name).await;
    // A replaced CRD is Established from before: wait until discovery serves every new version.
    for v in crd.spec.versions.iter().filter(|v| v.served) {
        let gv = format!("{}/{}", crd.spec.group, v.name);
        let served = super::sweeper::eventually(Duration::from_secs(30), || async {
            client
                .list_api_group_resources(&gv)
                .await
                .is_ok_and(|l| l.resources.iter().any(|r| r.name == crd.spec.names.plural))
        })
        .await;
        assert!(served, "CRD {name}: {gv} not served 30s after install");
    }
}

/// Waits until the deleted CRD `old` is gone. Its objects are deleted with it; one still holding a
/// finalizer (a collector that is not running any more) would keep the CRD forever, so their
/// finalizers are cleared: the test that swaps CRDs owns the cluster at that moment.
async fn wait_crd_gone(client: &Client, old: &CustomResourceDefinition) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = old.name_any();
    let version = old
        .spec
        .versions
        .iter()
        .find(|v| v.served)
        .map(|v| v.name.clone())
        .unwrap_or_default();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&old.spec.group, &version, &old.spec.names.kind),
        &old.spec.names.plural,
    );
    let objects: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let gone = super::sweeper::eventually(Duration::from_secs(90), || async {
        if crds.get_opt(&name).await.ok().flatten().is_none() {
            return true;
        }
        for o in objects
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            if o.finalizers().is_empty() {
                continue;
            }
            let api: Api<DynamicObject> = match o.namespace() {
                Some(ns) => Api::namespaced_with(client.clone(), &ns, &ar),
                None => Api::all_with(client.clone(), &ar),
            };
            let patch = serde_json::json!({"metadata": {"finalizers": null}});
            let _ = api
                .patch(
                    &o.name_any(),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await;
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        false
    })
    .await;
    assert!(gone, "CRD {name} still there 90s after its deletion");
}

/// Server-side dry-run create of one manifest object (YAML/JSON as a value); returns its
/// `Kind name`. Namespaced objects go to `default` (a dry run does not create their namespace);
/// 409 (exists already, e.g. after a real apply) still means valid. Panics naming the object.
pub async fn dry_run_create(client: &Client, value: serde_json::Value) -> String {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let mut obj: DynamicObject = serde_json::from_value(value).expect("a Kubernetes object");
    let tm = obj.types.clone().expect("apiVersion and kind");
    let (group, version) = tm
        .api_version
        .split_once('/')
        .unwrap_or(("", tm.api_version.as_str()));
    // Every kind we ship pluralizes regularly: serviceaccounts, roles, networkpolicies, ...
    let lower = tm.kind.to_lowercase();
    let plural = match lower.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{lower}s"),
    };
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, &tm.kind),
        &plural,
    );
    let api: Api<DynamicObject> = match &obj.metadata.namespace {
        Some(_) => Api::namespaced_with(client.clone(), "default", &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    if obj.metadata.namespace.is_some() {
        obj.metadata.namespace = Some("default".to_string());
    }
    let label = format!(
        "{} {}",
        tm.kind,
        obj.metadata.name.clone().unwrap_or_default()
    );
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&pp, &obj).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("{label}: {e}"),
    }
    label
}

/// An aggregated API group whose backend service does not exist: its discovery fails until it is
/// removed.
pub struct BrokenApiGroup {
    api: Api<kube::api::DynamicObject>,
    name: String,
}

impl BrokenApiGroup {
    pub async fn create(client: &Client, group: &str) -> Self {
        use kube::api::DynamicObject;
        let api = api_services(client.clone());
        let name = format!("v1.{group}");
        let svc: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": name},
            "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
                     "insecureSkipTLSVerify": true, "service": {"namespace": "default", "name": "does-not-exist"}}
        }))
        .unwrap();
        api.create(&PostParams::default(), &svc)
            .await
            .expect("create APIService");
        BrokenApiGroup { api, name }
    }

    /// Deletes the APIService: the group is gone, so discovery no longer fails on it.
    pub async fn remove(&self) -> Result<(), kube::Error> {
        self.api
            .delete(&self.name, &Default::default())
            .await
            .map(|_| ())
    }
}

/// A test that fails before `remove` must not leave the group failing every later test's
/// discovery: the APIService goes with the value (already gone is fine).
impl Drop for BrokenApiGroup {
    fn drop(&mut self) {
        let name = self.name.clone();
        super::cleanup_from_drop(async move {
            let api = api_services(super::kube_client().await);
            let _ = api.delete(&name, &Default::default()).await;
        });
    }
}

fn api_services(client: Client) -> Api<kube::api::DynamicObject> {
    use kube::api::{ApiResource, GroupVersionKind};
    Api::all_with(
        client,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
            "apiservices",
        ),
    )
}

/// The Warning Events about the object named `name`, as `Reason: note`.
pub async fn warnings_about(c: &Client, name: &str) -> Vec<String> {
    Api::<k8s_openapi::api::events::v1::Event>::all(c.clone())
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default()
            )
        })
        .collect()
}

/// Whether an Event (events.k8s.io/v1) in `ns` satisfies `pred`.
pub async fn any_event(
    c: &Client,
    ns: &str,
    pred: impl Fn(&k8s_openapi::api::events::v1::Event) -> bool,
) -> bool {
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(c.clone(), ns)
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(pred)
}
