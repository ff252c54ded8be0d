//! The plain manifests (deploy/manifests: kustomize bases and overlays), rendered as
//! `kubectl kustomize` renders them (kubectl 1.21 or later on PATH, for kustomize components).

use serde::Deserialize;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The overlays a user applies (directories under deploy/manifests).
pub const OVERLAYS: [&str; 2] = ["external-only", "full"];

/// Every kustomization a user applies: the overlays, and the uninstall Job applied before
/// removing one of them.
pub const APPLIED: [&str; 3] = ["external-only", "full", "uninstall"];

/// `kubectl kustomize deploy/manifests/<overlay>`, one JSON value per object.
pub fn render(overlay: &str) -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/manifests")
        .join(overlay);
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("run `kubectl kustomize` (kubectl 1.21 or later must be on PATH): {e}")
        });
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_yaml::Deserializer::from_str(&String::from_utf8(out.stdout).expect("utf-8"))
        .map(|doc| {
            serde_json::to_value(serde_yaml::Value::deserialize(doc).expect("YAML")).expect("JSON")
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// Whether `obj` is the AWS settings ConfigMap of deploy/manifests/aws (`sweeper-aws-<hash>`).
pub fn is_aws_settings(obj: &Value) -> bool {
    obj["kind"] == "ConfigMap"
        && obj["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("sweeper-aws"))
}
