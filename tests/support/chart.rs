//! The chart's renderer, shared by the tests that read what deploy/helm/sweeper renders
//! (tests/helm.rs, and tests/uninstall.rs, which runs the pre-delete hook's command).
//!
//! The renderer is the real helm: scripts/provision-helm.sh builds it from helm.sh/helm/v3 at the
//! version scripts/go/helm pins (cached outside the clone).

use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
pub const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/helm/sweeper");

/// helm, built (or found in the cache) by scripts/provision-helm.sh.
pub fn helm() -> PathBuf {
    let out = Command::new(Path::new(ROOT).join("scripts/provision-helm.sh"))
        .output()
        .expect("run scripts/provision-helm.sh");
    assert!(
        out.status.success(),
        "scripts/provision-helm.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8(out.stdout).expect("utf-8 path");
    PathBuf::from(path.lines().last().expect("the binary's path").trim())
}

/// `helm template NAME CHART --namespace NS ARGS...`, parsed into one JSON value per document.
pub fn render(release: &str, namespace: &str, args: &[&str]) -> Vec<Value> {
    try_render(release, namespace, args)
        .unwrap_or_else(|stderr| panic!("rendering the chart failed:\n{stderr}"))
}

/// [`render`], or the renderer's error output when the chart refuses the values.
pub fn try_render(release: &str, namespace: &str, args: &[&str]) -> Result<Vec<Value>, String> {
    let out = Command::new(helm())
        .args(["template", release, CHART, "--namespace", namespace])
        .args(args)
        .output()
        .expect("run helm template");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(yaml_docs(
        &String::from_utf8(out.stdout).expect("utf-8 render"),
    ))
}

pub fn yaml_docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| {
            let value = serde_yaml::Value::deserialize(doc).expect("valid YAML");
            serde_json::to_value(value).expect("YAML that is JSON")
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// The chart as a release packages it (`helm package`, the archive the release workflow pushes),
/// rendered from that archive with `helm template NAME ARCHIVE --namespace NS ARGS...`.
pub fn render_packaged(release: &str, namespace: &str, args: &[&str]) -> Vec<Value> {
    let dir = std::env::temp_dir().join(format!(
        "sweeper-chart-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let out = Command::new(helm())
        .args(["package", CHART, "--destination"])
        .arg(&dir)
        .output()
        .expect("run helm package");
    assert!(
        out.status.success(),
        "helm package failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let archive = std::fs::read_dir(&dir)
        .expect("read the package directory")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "tgz"))
        .expect("helm package wrote a .tgz");
    let out = Command::new(helm())
        .args(["template", release])
        .arg(&archive)
        .args(["--namespace", namespace])
        .args(args)
        .output()
        .expect("run helm template on the archive");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "rendering the packaged chart failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_docs(&String::from_utf8(out.stdout).expect("utf-8 render"))
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default()
}
