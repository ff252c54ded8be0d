//! The HTTP port's security, against the real API server: HTTPS, /metrics, /status and /graph
//! only for a bearer token the API server authenticates (TokenReview) and allows `get` on the
//! path (SubjectAccessReview), as controller-runtime serves metrics; /healthz and /readyz open.
//!
//! The callers are service accounts of the test's namespace with tokens from the TokenRequest
//! API, one bound to the shipped sweeper-metrics-reader ClusterRole
//! (deploy/manifests/base/metrics-reader.yaml) and one bound to nothing. The sweepers run as the
//! shipped service accounts, so tests/rbac.rs sees their TokenReview and SubjectAccessReview
//! calls and checks the shipped roles grant them.

mod support;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use std::time::Duration;
use support::TestScope;
use support::sweeper::{Sweeper, eventually};

const READER_ROLE: &str = "sweeper-metrics-reader";

/// A service account `name` in `ns` and a token for it (10 minutes, the API server's audience).
async fn token_for(c: &kube::Client, ns: &str, name: &str) -> String {
    let sas: Api<ServiceAccount> = Api::namespaced(c.clone(), ns);
    let sa = ServiceAccount {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let req = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(600),
            ..Default::default()
        },
        ..Default::default()
    };
    sas.create_token_request(name, &PostParams::default(), &req)
        .await
        .unwrap()
        .status
        .expect("a token")
        .token
}

/// The shipped reader ClusterRole, applied as it is in deploy/manifests/base.
async fn apply_reader_role(c: &kube::Client) -> ClusterRole {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/manifests/base/metrics-reader.yaml"
    );
    let role: ClusterRole = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(role.metadata.name.as_deref(), Some(READER_ROLE));
    Api::<ClusterRole>::all(c.clone())
        .patch(
            READER_ROLE,
            &PatchParams::apply("sweeper-tests").force(),
            &Patch::Apply(&role),
        )
        .await
        .unwrap()
}

/// Whether the API server already allows `user` to get `path` (RBAC's informers take a moment
/// to see a new binding; sweeper caches a refusal for 10 s, so the test waits for it first).
async fn allowed(c: &kube::Client, user: &str, path: &str) -> bool {
    let sar = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.into()),
                verb: Some("get".into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<SubjectAccessReview>::all(c.clone())
        .create(&PostParams::default(), &sar)
        .await
        .is_ok_and(|r| r.status.is_some_and(|s| s.allowed))
}

/// A binding of the reader role to `reader` in `ns`, deleted when dropped.
struct ReaderBinding {
    name: String,
}

impl ReaderBinding {
    async fn new(c: &kube::Client, scope: &str, ns: &str, reader: &str) -> ReaderBinding {
        let name = format!("{scope}-metrics-reader");
        let binding = ClusterRoleBinding {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: READER_ROLE.into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: reader.into(),
                namespace: Some(ns.into()),
                ..Default::default()
            }]),
        };
        Api::<ClusterRoleBinding>::all(c.clone())
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
        let user = format!("system:serviceaccount:{ns}:{reader}");
        for path in ["/metrics", "/status"] {
            assert!(
                eventually(Duration::from_secs(20), || allowed(c, &user, path)).await,
                "the API server allows {user} {path} once bound"
            );
        }
        ReaderBinding { name }
    }
}

impl Drop for ReaderBinding {
    fn drop(&mut self) {
        let name = self.name.clone();
        // A client of its own: the test's client belongs to the test's runtime, which this drop
        // blocks (reusing it here deadlocks).
        support::cleanup_from_drop(async move {
            let client = support::kube_client().await;
            let _ = Api::<ClusterRoleBinding>::all(client)
                .delete(&name, &DeleteParams::default())
                .await;
        });
    }
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn metrics_and_status_answer_only_a_token_allowed_to_get_them() {
    let mut scope = TestScope::new("http-auth").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    let role = apply_reader_role(&c).await;
    let urls: Vec<String> = role
        .rules
        .unwrap_or_default()
        .iter()
        .flat_map(|r| r.non_resource_urls.clone().unwrap_or_default())
        .collect();
    assert_eq!(urls, ["/metrics", "/status", "/graph", "/graph/*"]);
    let reader = token_for(&c, &ns, "reader").await;
    let nobody = token_for(&c, &ns, "nobody").await;
    let _binding = ReaderBinding::new(&c, &scope.name, &ns, "reader").await;
    // Every collector off but the tenant one, scoped: the port is what is tested.
    let gc = Sweeper::start_scoped(
        &scope,
        &[
            "--http-insecure=false",
            "--feature-gates",
            "CascadeGC=false,TenantGC=true",
        ],
    )
    .await;
    assert!(gc.base.starts_with("https://"), "{}", gc.base);

    for probe in ["/healthz", "/readyz"] {
        assert_eq!(
            gc.get_as(probe, None).await.0,
            200,
            "{probe} needs no token"
        );
    }
    for path in ["/metrics", "/status", "/graph?format=json"] {
        let (code, body) = gc.get_as(path, None).await;
        assert_eq!(code, 401, "{path} without a token: {body}");
        let (code, _) = gc.get_as(path, Some("not-a-token")).await;
        assert_eq!(
            code, 401,
            "{path} with a token the API server does not know"
        );
        let (code, body) = gc.get_as(path, Some(&nobody)).await;
        assert_eq!(
            code, 403,
            "{path} for a service account without the role: {body}"
        );
        assert!(
            body.contains(&format!("system:serviceaccount:{ns}:nobody")),
            "{body}"
        );
    }
    let (code, metrics) = gc.get_as("/metrics", Some(&reader)).await;
    assert_eq!(code, 200, "{metrics}");
    assert!(metrics.contains("sweeper_leader_is_leader"), "{metrics}");
    let (code, status) = gc.get_as("/status", Some(&reader)).await;
    assert_eq!(code, 200, "{status}");
    serde_json::from_str::<sweeper::status::StatusReport>(&status).expect("/status is the report");
    // Plain HTTP on the HTTPS port gets no answer at all.
    let plain = format!("http://127.0.0.1:{}/metrics", gc.port);
    assert!(!matches!(
        sweeper::http_get::get(&plain).await,
        Ok((200, _))
    ));

    // `sweeper status` sends the token; without one it says what the service refused.
    let status_cli = |token: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sweeper"));
        cmd.args(["status", "--server", &gc.base, "--insecure-skip-tls-verify"]);
        if let Some(t) = token {
            cmd.env("SWEEPER_TOKEN", t);
        }
        cmd.output().unwrap()
    };
    let out = status_cli(Some(&reader));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("ready: true"),
        "{text}"
    );
    let out = status_cli(None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("HTTP 401"), "{err}");
}

/// The external-only install's identity reviews tokens too (its role grants the two reviews),
/// and a standby-free external collector answers a granted scrape.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn the_external_only_install_reviews_tokens_with_its_own_role() {
    let mut scope = TestScope::new("http-auth-ext").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    apply_reader_role(&c).await;
    let reader = token_for(&c, &ns, "reader").await;
    let nobody = token_for(&c, &ns, "nobody").await;
    let _binding = ReaderBinding::new(&c, &scope.name, &ns, "reader").await;
    let gc = Sweeper::start_external_only_scoped(&scope, &["--http-insecure=false"]).await;
    assert_eq!(gc.get_as("/metrics", None).await.0, 401);
    assert_eq!(gc.get_as("/metrics", Some(&nobody)).await.0, 403);
    let (code, body) = gc.get_as("/metrics", Some(&reader)).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(gc.get_as("/readyz", None).await.0, 200);
}
