//! deploy/release.env: where sweeper is published, the one place the owner is written.

/// The value of `key` in deploy/release.env (`KEY=value` lines, `#` comments).
pub fn setting(key: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/release.env");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|l| l.split_once('=').filter(|(k, _)| k.trim() == key))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| panic!("{path} sets no {key}"))
}

/// The release image of this version: `<SWEEPER_IMAGE>:<Cargo.toml's version>`.
pub fn image() -> String {
    format!("{}:{}", setting("SWEEPER_IMAGE"), env!("CARGO_PKG_VERSION"))
}

/// Whether `image` names its registry, as Docker reads a reference: a first component with a
/// dot, a port or `localhost`. Without one, the image resolves on Docker Hub.
pub fn names_a_registry(image: &str) -> bool {
    image
        .split_once('/')
        .is_some_and(|(host, _)| host.contains('.') || host.contains(':') || host == "localhost")
}

/// Every container image of the pods `objects` define (Deployments, Jobs, Pods).
pub fn images(objects: &[serde_json::Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for o in objects {
        let spec = match o["kind"].as_str() {
            Some("Pod") => &o["spec"],
            Some("Deployment" | "Job" | "DaemonSet" | "StatefulSet") => {
                &o["spec"]["template"]["spec"]
            }
            _ => continue,
        };
        for list in ["initContainers", "containers"] {
            for c in spec[list].as_array().into_iter().flatten() {
                out.push((
                    format!(
                        "{} {}",
                        o["kind"].as_str().unwrap_or(""),
                        o["metadata"]["name"].as_str().unwrap_or("")
                    ),
                    c["image"].as_str().unwrap_or("").to_string(),
                ));
            }
        }
    }
    out
}
