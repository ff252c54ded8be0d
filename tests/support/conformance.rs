//! The upstream conformance fixtures (CAPA's and Cluster API's CRDs and templates, KubeZoo's
//! Tenant), read from `../shared/conformance` beside the repository (or
//! `SWEEPER_CONFORMANCE_FIXTURES`). They are data of other projects: tests read them in place and
//! never copy them into this repository.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

const ENV: &str = "SWEEPER_CONFORMANCE_FIXTURES";

/// The fixtures folder. Missing, the test fails naming where it looked and how to point it
/// elsewhere, wherever it runs: a conformance test without the upstream objects would pass against
/// nothing, or against sweeper's own laxer CRDs, and prove nothing (a skip here once let them
/// pass silently outside CI). `scripts/env-up.sh` refuses to start without them for the same
/// reason, except for `make demo` (`SWEEPER_ALLOW_OWN_CRDS=1`).
pub fn fixtures() -> PathBuf {
    let dir = std::env::var_os(ENV).map(PathBuf::from).unwrap_or_else(|| {
        // CARGO_MANIFEST_DIR is the repository root; CI clones the repository with shared/ beside it.
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance")
    });
    assert!(
        dir.is_dir(),
        "upstream conformance fixtures not found at {}: check the repository out beside shared/ \
         (../shared/conformance) or set {ENV} to the folder",
        dir.display()
    );
    dir
}

/// The documents of a multi-document YAML file under the fixtures folder, empty ones skipped.
pub fn docs(rel: &str) -> Vec<Value> {
    let path = fixtures().join(rel);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read fixture {}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            Value::deserialize(d)
                .unwrap_or_else(|e| panic!("parse fixture {}: {e}", path.display()))
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// The adjustments the conformance README states for the project's kube-apiserver 1.20, made here
/// because that server is what the tests run on (a real cluster takes the files unmodified):
/// - `x-kubernetes-validations` (CEL rules, Kubernetes 1.25+) makes 1.20 reject the CRD: removed
///   everywhere;
/// - `default: ""` on string fields (AWSManagedControlPlane) is rejected by 1.20: dropped.
///
/// Nothing else is changed.
pub fn adjust_for_1_20(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("x-kubernetes-validations");
            if map.get("type").and_then(Value::as_str) == Some("string")
                && map.get("default").and_then(Value::as_str) == Some("")
            {
                map.remove("default");
            }
            map.values_mut().for_each(adjust_for_1_20);
        }
        Value::Array(items) => items.iter_mut().for_each(adjust_for_1_20),
        _ => {}
    }
}

/// Whether the test server is the 1.20 fallback (`SWEEPER_KUBE=1.20` in env-up's env file): the
/// only server that needs [`adjust_for_1_20`]. The default server takes the CRDs as they are.
pub fn server_is_1_20() -> bool {
    super::EnvFacts::load().try_get("SWEEPER_KUBE").as_deref() == Some("1.20")
}

/// Installs the upstream CRD in `rel` (as it is; adjusted only on the 1.20 fallback, see
/// [`adjust_for_1_20`]), replacing whatever CRD of that name is installed (e.g. a test's
/// schemaless one), and waits until it is established. Installing it over itself changes nothing.
pub async fn install_crd(client: &kube::Client, rel: &str) {
    let mut docs = docs(rel);
    assert_eq!(docs.len(), 1, "{rel}: expected one CRD document");
    let mut doc = docs.remove(0);
    if server_is_1_20() {
        adjust_for_1_20(&mut doc);
    }
    let crd: CustomResourceDefinition =
        serde_json::from_value(doc).unwrap_or_else(|e| panic!("{rel} is not a CRD: {e}"));
    super::objects::replace_crd(client, crd).await;
}

/// The fixture file holding the upstream CRD named `name` (`<plural>.<group>`), if there is one.
pub fn crd_file(name: &str) -> Option<String> {
    let dir = fixtures();
    for sub in ["capa", "capi", "kubezoo"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            if !file.ends_with(".yaml") {
                continue;
            }
            let rel = format!("{sub}/{file}");
            let found = docs(&rel)
                .iter()
                .any(|d| d["kind"] == "CustomResourceDefinition" && d["metadata"]["name"] == name);
            if found {
                return Some(rel);
            }
        }
    }
    None
}
