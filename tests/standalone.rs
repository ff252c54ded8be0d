//! A clone stands on its own (issue #75): nothing outside docs/ names the folder of reference
//! fixtures some development machines keep beside the checkout, nor the second repository the
//! public CI once checked out for them. The upstream CRDs come from their pinned Go modules
//! (scripts/fixtures.sh) and KubeZoo's from the project's own transcription
//! (scripts/fixtures/kubezoo): a platform team's clone has nothing beside it.

use std::path::Path;
use std::process::Command;

/// The names a tracked file outside docs/ must not contain, spelled in pieces so this file does
/// not contain them either.
fn forbidden() -> [String; 3] {
    [
        format!("{}/{}", "..", "shared"),
        format!("{}/{}", "shared", "conformance"),
        format!("{}_{}", "SHARED", "REPO"),
    ]
}

fn tracked_files(root: &Path) -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .expect("git ls-files: the test reads the repository's tracked files");
    assert!(out.status.success(), "git ls-files failed: {out:?}");
    String::from_utf8(out.stdout)
        .expect("file names are UTF-8")
        .split('\0')
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn no_tracked_file_outside_docs_names_the_folder_beside_the_clone() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = tracked_files(root);
    assert!(
        files.iter().any(|f| f == "scripts/fixtures.sh"),
        "git ls-files listed {} files, without scripts/fixtures.sh: not this repository?",
        files.len()
    );
    let mut found = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with("docs/")) {
        // A file deleted in the work tree but still tracked, or a binary file: nothing to read.
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        for name in forbidden() {
            for (n, line) in text.lines().enumerate() {
                if line.contains(&name) {
                    found.push(format!("{file}:{}: {name}", n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "tracked files outside docs/ name what a clone does not have beside it (fetch upstream \
         artifacts with scripts/fixtures.sh instead):\n{}",
        found.join("\n")
    );
}

/// The script the tests, env-up and the demo read the fixtures from resolves them from the Go
/// modules the webhooks' go.mod pins: the same CAPA and Cluster API releases, nothing else.
#[test]
fn fixtures_come_from_the_modules_the_webhooks_pin() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(root.join("scripts/fixtures.sh")).unwrap();
    assert!(
        script.contains("go mod download -json"),
        "fixtures.sh downloads the modules"
    );
    assert!(
        script.contains("scripts/go/capa-webhooks"),
        "fixtures.sh reads the webhooks' pins"
    );
    let go_mod = std::fs::read_to_string(root.join("scripts/go/capa-webhooks/go.mod")).unwrap();
    for module in [
        "sigs.k8s.io/cluster-api-provider-aws/v2 v",
        "sigs.k8s.io/cluster-api v",
    ] {
        assert!(
            go_mod.contains(module),
            "the webhooks' go.mod pins {module}…"
        );
    }
    for file in ["tenants.tenant.kubezoo.io.yaml", "tenant-111111.yaml"] {
        let text =
            std::fs::read_to_string(root.join("scripts/fixtures/kubezoo").join(file)).unwrap();
        assert!(
            text.starts_with('#') && text.contains("kubewharf/kubezoo at commit"),
            "{file}: its header names the KubeZoo files and commit it describes"
        );
    }
}
