//! deploy/manifests are valid against a real API server (server-side dry-run create).

mod support;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};

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
            let obj: DynamicObject = serde_json::from_value(value).unwrap();
            let tm = obj.types.clone().expect("apiVersion and kind");
            let (group, version) = tm
                .api_version
                .split_once('/')
                .unwrap_or(("", tm.api_version.as_str()));
            let plural = match tm.kind.as_str() {
                "ServiceAccount" => "serviceaccounts".to_string(),
                k => format!("{}s", k.to_lowercase()),
            };
            let ar = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, &tm.kind),
                &plural,
            );
            // Namespaced kinds go to their namespace, which a dry run does not create: use default.
            let api: Api<DynamicObject> = match &obj.metadata.namespace {
                Some(_) => Api::namespaced_with(client.clone(), "default", &ar),
                None => Api::all_with(client.clone(), &ar),
            };
            let mut obj = obj;
            obj.metadata.namespace = obj
                .metadata
                .namespace
                .as_ref()
                .map(|_| "default".to_string());
            let pp = PostParams {
                dry_run: true,
                ..Default::default()
            };
            match api.create(&pp, &obj).await {
                Ok(_) => {}
                // Exists already (e.g. a previous real apply): still valid.
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => panic!(
                    "{} {} in {}: {e}",
                    tm.kind,
                    obj.metadata.name.unwrap_or_default(),
                    f.display()
                ),
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 5,
        "namespace, service account, role, binding, deployment: checked {checked}"
    );
}

use serde::Deserialize;
