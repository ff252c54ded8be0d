//! The upstream conformance fixtures (CAPA's and Cluster API's CRDs and CAPA's templates, from
//! the Go modules scripts/go/capa-webhooks pins; KubeZoo's Tenant, the project's own
//! transcription), resolved into the cache outside the clone by `scripts/fixtures.sh`. They are
//! data of other projects: tests read them in place and never copy them into this repository.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const ENV: &str = "SWEEPER_CONFORMANCE_FIXTURES";

/// The fixtures folder: `SWEEPER_CONFORMANCE_FIXTURES` (env-up's env file sets it), else what
/// `scripts/fixtures.sh` prints (a no-op once the cache holds them; the first run downloads the
/// modules). Unresolved, the test fails saying why and how to fetch them: a conformance test
/// without the upstream objects would pass against nothing, or against sweeper's own laxer CRDs,
/// and prove nothing (a skip here once let them pass silently outside CI).
pub fn fixtures() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::var_os(ENV)
            .map(PathBuf::from)
            .unwrap_or_else(resolve);
        assert!(
            dir.join("SOURCES").is_file(),
            "upstream conformance fixtures not found at {} (no SOURCES file): run \
             scripts/fixtures.sh, which fetches them from the pinned Go modules, or unset {ENV}",
            dir.display()
        );
        dir
    })
    .clone()
}

/// Runs `scripts/fixtures.sh` (CARGO_MANIFEST_DIR is the repository root) and takes its last line.
fn resolve() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fixtures.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed ({}): it fetches the upstream CRDs from the Go modules scripts/go/capa-webhooks \
         pins and needs Go and the module proxy:\n{}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().unwrap_or_default().trim())
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
