//! Test support for integration tests against the real servers that `make env-up` starts.
//!
//! Connection facts come from the environment `scripts/env-up.sh` exports (`source .state/env`),
//! or, when those variables are unset, from the env file it writes in `.state/`. A missing server
//! is a test FAILURE that says how to start it — never a silent pass.
//!
//! Each test takes a [`TestScope`]: a unique name (namespace, name prefix, AWS tag value) so tests
//! running in parallel never see each other's objects. Dropping it deletes its namespace. A test's
//! sweeper is confined to it too ([`TestScope::sweeper_flags`]), so one test's sweeper never acts
//! on another test's AWSClusters or Tenants.
#![allow(dead_code)] // each test binary uses a different part of this module

pub mod aws;
pub mod capa;
pub mod capa_cluster;
pub mod capa_manager;
pub mod chart;
pub mod conformance;
pub mod inventory;
pub mod kustomize;
pub mod objects;
pub mod release;
pub mod sweeper;
pub mod tenant;

use k8s_openapi::api::core::v1::Namespace;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use sweeper_aws::sdk::aws_config;

const HOW_TO_START: &str = "start the test environment with `./scripts/env-up.sh` (or `make env-up`) and `source .state/env` (or run `make test`)";

/// The variables that say where LocalStack is and who calls it, as the AWS SDK reads them.
pub const AWS_ENV: [&str; 4] = [
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
];

/// The variables env-up.sh exports; process environment first, then the env file.
#[derive(Debug, Clone)]
pub struct EnvFacts(HashMap<String, String>);

impl EnvFacts {
    pub fn load() -> Self {
        let mut vars = HashMap::new();
        let state = std::env::var("SWEEPER_STATE")
            .map(PathBuf::from)
            .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".state"));
        if let Ok(text) = std::fs::read_to_string(state.join("env")) {
            for line in text.lines() {
                if let Some((k, v)) = line.trim().trim_start_matches("export ").split_once('=') {
                    vars.insert(k.to_string(), v.to_string());
                }
            }
        }
        for key in [
            "KUBECONFIG",
            "AWS_ENDPOINT_URL",
            "AWS_REGION",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "SWEEPER_K8S_BIN",
            "SWEEPER_SA_KUBECONFIG",
            "SWEEPER_EXTERNAL_SA_KUBECONFIG",
            "SWEEPER_AUDIT_LOG",
        ] {
            if let Ok(v) = std::env::var(key) {
                vars.insert(key.to_string(), v);
            }
        }
        EnvFacts(vars)
    }

    pub fn try_get(&self, key: &str) -> Option<String> {
        self.0.get(key).cloned()
    }

    pub fn get(&self, key: &str) -> String {
        self.0
            .get(key)
            .cloned()
            .unwrap_or_else(|| panic!("{key} is not set: {HOW_TO_START}"))
    }

    /// LocalStack's coordinates ([`AWS_ENV`]), as a process the tests start (sweeper, CAPA's
    /// controller) reads them from its environment.
    pub fn aws_env(&self) -> Vec<(&'static str, String)> {
        AWS_ENV.into_iter().map(|k| (k, self.get(k))).collect()
    }
}

/// A kube config for the test apiserver (fails the test with instructions if it isn't set up).
pub async fn kube_config() -> Config {
    ::sweeper::install_crypto_provider();
    let path = EnvFacts::load().get("KUBECONFIG");
    let kubeconfig = Kubeconfig::read_from(&path)
        .unwrap_or_else(|e| panic!("cannot read kubeconfig {path}: {e}; {HOW_TO_START}"));
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("bad kubeconfig {path}: {e}"))
}

/// A client connected to the test kube-apiserver; fails the test if the server doesn't answer.
pub async fn kube_client() -> Client {
    let config = kube_config().await;
    let url = config.cluster_url.clone();
    let client = Client::try_from(config).expect("kube client");
    if let Err(e) = client.apiserver_version().await {
        panic!("kube-apiserver at {url} is not reachable ({e:?}): {HOW_TO_START}");
    }
    client
}

/// AWS SDK config pointing at LocalStack; fails the test if LocalStack doesn't answer.
pub async fn aws_config() -> aws_config::SdkConfig {
    let facts = EnvFacts::load();
    let endpoint = facts.get("AWS_ENDPOINT_URL");
    let health = format!("{endpoint}/_localstack/health");
    let reachable = tokio::net::TcpStream::connect(
        endpoint
            .trim_start_matches("http://")
            .trim_start_matches("https://"),
    )
    .await
    .is_ok();
    assert!(
        reachable,
        "LocalStack at {health} is not reachable: {HOW_TO_START}"
    );
    aws_config_as(
        &facts.get("AWS_REGION"),
        &facts.get("AWS_ACCESS_KEY_ID"),
        &facts.get("AWS_SECRET_ACCESS_KEY"),
    )
    .await
}

/// LocalStack as another principal and region: `access_key` a 12-digit account id acts in that
/// account there.
pub async fn aws_config_as(
    region: &str,
    access_key: &str,
    secret_key: &str,
) -> aws_config::SdkConfig {
    let endpoint = EnvFacts::load().get("AWS_ENDPOINT_URL");
    let creds = sweeper_aws::sdk::ec2::config::Credentials::new(
        access_key,
        secret_key,
        None,
        None,
        "sweeper-tests",
    );
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new(region.to_string()))
        .credentials_provider(creds)
        .load()
        .await
}

/// A unique, DNS-1123-safe name for one test: `<prefix>-<pid>-<counter>-<random>`.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let r: u32 = rand::random::<u32>() % 0xffff;
    format!("{prefix}-{}-{n}-{r:04x}", std::process::id() % 100_000)
}

/// The label a test puts on its Tenants: they are cluster-scoped, so no namespace confines them,
/// and its sweeper's `--tenant-scope-selector` selects this label with the test's name.
pub const SCOPE_LABEL: &str = "sweeper.dev/test-scope";

/// One test's private corner of the servers: a namespace (created on demand), a name prefix and an
/// AWS tag value. Dropping it deletes the namespace (the namespace controller removes its content).
pub struct TestScope {
    pub name: String,
    pub client: Client,
    config: Config,
    namespace_created: bool,
}

impl TestScope {
    pub async fn new(prefix: &str) -> Self {
        let config = kube_config().await;
        let client = kube_client().await;
        TestScope {
            name: unique_name(prefix),
            client,
            config,
            namespace_created: false,
        }
    }

    /// The test's namespace, created on first use.
    pub async fn namespace(&mut self) -> String {
        if !self.namespace_created {
            let api: Api<Namespace> = Api::all(self.client.clone());
            let ns: Namespace = serde_json::from_value(serde_json::json!({
                "metadata": {"name": self.name, "labels": {"sweeper.dev/test": "true"}}
            }))
            .unwrap();
            api.create(&Default::default(), &ns)
                .await
                .unwrap_or_else(|e| panic!("create namespace {}: {e}", self.name));
            self.namespace_created = true;
        }
        self.name.clone()
    }

    /// The labels that put a Tenant in this test's scope ([`SCOPE_LABEL`]).
    pub fn tenant_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(SCOPE_LABEL.to_string(), self.name.clone())])
    }

    /// The flags that confine a `sweeper run` to this test (`--scope-namespaces` plus
    /// `--tenant-scope-selector`): its external collector watches only the test's namespace (its
    /// name, whether or not created yet), its tenant collector only the Tenants labelled with
    /// [`TestScope::tenant_labels`]. The cascade collector has no scope (ownerReferences cross
    /// namespaces): a cascade test's sweeper sees the whole cluster whatever the flags.
    pub fn sweeper_flags(&self) -> Vec<String> {
        vec![
            "--scope-namespaces".into(),
            self.name.clone(),
            "--tenant-scope-selector".into(),
            format!("{SCOPE_LABEL}={}", self.name),
        ]
    }
}

impl Drop for TestScope {
    fn drop(&mut self) {
        if !self.namespace_created {
            return;
        }
        let config = self.config.clone();
        let name = self.name.clone();
        cleanup_from_drop(async move {
            if let Ok(client) = Client::try_from(config) {
                let api: Api<Namespace> = Api::all(client.clone());
                let _ = api.delete(&name, &Default::default()).await;
                release_held_clusters(&client, &name).await;
            }
        });
    }
}

/// Takes sweeper's finalizer off the cluster objects a test leaves in namespace `ns`. The test's
/// sweeper is gone by now (a scope is made first, so dropped last), and an object it held (a
/// teardown it refused, by design, or one cut short) would keep the namespace Terminating for
/// ever. The namespace controller retries such a namespace without end: three of them cost the
/// API server about 26 requests/s (seen as 66 requests/s in a benchmark held to 40), counted in
/// every later test and benchmark on the same server. scripts/clear-test-leftovers.sh does the
/// same for what a killed run left.
async fn release_held_clusters(client: &Client, ns: &str) {
    use kube::api::{Patch, PatchParams};
    const HELD: [(&str, &str); 2] = [
        ("infrastructure.cluster.x-k8s.io/v1beta2", "AWSCluster"),
        (
            "controlplane.cluster.x-k8s.io/v1beta2",
            "AWSManagedControlPlane",
        ),
    ];
    for (api_version, kind) in HELD {
        let api = capa::api(client, ns, api_version, kind);
        // Not installed, or nothing there: nothing is held.
        let Ok(list) = api.list_metadata(&Default::default()).await else {
            continue;
        };
        for o in list.items {
            // Sweeper's, and CAPA's own controller's (tests/capa_controller.rs runs it, and it
            // stops with its test): held by a process that is gone.
            const RELEASED: [&str; 2] = [capa::FINALIZER, capa_cluster::CAPA_FINALIZER];
            let finalizers = o.metadata.finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|f| RELEASED.contains(&f.as_str())) {
                continue;
            }
            let kept: Vec<&String> = finalizers
                .iter()
                .filter(|f| !RELEASED.contains(&f.as_str()))
                .collect();
            // The resourceVersion makes the patch refuse a stale list instead of dropping a
            // finalizer another controller added since.
            let patch = serde_json::json!({"metadata": {
                "finalizers": kept,
                "resourceVersion": o.metadata.resource_version,
            }});
            let _ = api
                .patch(
                    &o.metadata.name.unwrap_or_default(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await;
        }
    }
}

/// Runs async clean-up from a `Drop`, which can't be async: a fresh runtime on a side thread
/// (a client's connections belong to the runtime that made them, so `work` makes its own).
pub fn cleanup_from_drop(work: impl std::future::Future<Output = ()> + Send + 'static) {
    let _ = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(work);
    })
    .join();
}
