//! deploy/manifests' overlays (external-only, full), as `kubectl kustomize` renders them, are
//! valid against a real API server (server-side dry-run create).

mod support;

#[tokio::test]
#[ignore = "needs the test environment (make env-up) and kubectl 1.21 or later on PATH"]
async fn shipped_manifests_pass_server_side_dry_run() {
    let client = support::kube_client().await;
    for overlay in support::kustomize::OVERLAYS {
        let mut checked = Vec::new();
        for value in support::kustomize::render(overlay) {
            checked.push(support::objects::dry_run_create(&client, value).await);
        }
        for kind in [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Deployment",
            "Service",
        ] {
            assert!(
                checked.iter().any(|c| c.starts_with(&format!("{kind} "))),
                "{overlay}: no {kind} checked: {checked:?}"
            );
        }
    }
}
