//! What ships in deploy/ cannot replace a management cluster's own CRDs.
//!
//! The kinds sweeper acts on (AWSCluster, AWSManagedControlPlane, Cluster, Tenant) are CAPA's,
//! Cluster API's and KubeZoo's. Sweeper's own minimal definitions of them exist only for clusters
//! without those projects, behind the chart's `crds.*` values (off by default) and `sweeper crds`.
//! So no plain file under deploy/ may define a CustomResourceDefinition: `kubectl apply -R -f
//! deploy/` (or `-k` of an overlay) must leave the upstream CRDs alone. The chart's templates are
//! Go templates, not manifests, and are checked by tests/helm.rs.

use serde::Deserialize;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read deploy/") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn no_plain_file_under_deploy_defines_a_crd() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let templates = root.join("helm/sweeper/templates");
    let mut all = Vec::new();
    files(&root, &mut all);
    let mut checked = 0;
    for f in all.iter().filter(|p| !p.starts_with(&templates)) {
        let ext = f.extension().and_then(|e| e.to_str()).unwrap_or_default();
        if !matches!(ext, "yaml" | "yml" | "json") {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("read");
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = serde_yaml::Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{}: not YAML: {e}", f.display()));
            checked += 1;
            assert!(
                value.get("kind").and_then(|k| k.as_str()) != Some("CustomResourceDefinition"),
                "{} defines a CRD: a management cluster's own would be replaced by `kubectl apply -R -f deploy/`",
                f.display()
            );
        }
    }
    assert!(checked >= 10, "only {checked} documents under deploy/");
}
