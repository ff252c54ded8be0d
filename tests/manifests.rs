//! deploy/manifests are valid against a real API server (server-side dry-run create).

mod support;

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn shipped_manifests_pass_server_side_dry_run() {
    let client = support::kube_client().await;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/manifests");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut checked = 0;
    for f in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
    {
        let text = std::fs::read_to_string(f).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = serde_json::to_value(serde_yaml::Value::deserialize(doc).unwrap()).unwrap();
            if value.is_null() {
                continue;
            }
            support::objects::dry_run_create(&client, value).await;
            checked += 1;
        }
    }
    assert!(
        checked >= 5,
        "namespace, service account, role, binding, deployment: checked {checked}"
    );
}

use serde::Deserialize;
