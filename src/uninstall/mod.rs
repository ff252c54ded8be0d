//! `sweeper uninstall`: make sweeper safe to remove. It pauses every collector (the same switch
//! as `sweeper pause`, so running replicas stop at once and add no finalizer again), then removes
//! every finalizer sweeper owns from live objects of every kind:
//! - `sweeper.dev/*` (the external collector's `sweeper.dev/external-resource-gc`, the cascade
//!   collector's `sweeper.dev/cascade-complete`, and any later one under that prefix);
//! - `kubezoo.io/tenant` on KubeZoo Tenants, which the tenant collector adds, unless
//!   `--keep-tenant-finalizer` (KubeZoo's own controller still runs and owns it).
//!
//! It deletes nothing and keeps the archive (records stay until their expiry, which needs a
//! running sweeper; `sweeper restore` reads them without one). Kubernetes' own `foregroundDeletion`
//! and `orphan` finalizers are left for whichever garbage collector runs next
//! (kube-controller-manager's, or sweeper re-installed). Objects deleted afterwards go at once.
//!
//! Idempotent and crash-safe: every run re-lists the world; a finalizer already gone is skipped,
//! and each removal is a JSON patch that tests the finalizer is still at its index.

pub mod hand_back;
mod resume;

pub use resume::resume_after_uninstall;

use crate::engine::discovery::{DeletableResource, discover_deletable};
use crate::engine::pause::{self, PauseRecord};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

/// The reason the uninstall's pause records. A reinstall finds the switch still set (it lives in
/// sweeper's namespace, which no uninstall deletes): `sweeper resume --after-uninstall` (the
/// chart's post-install hook) clears exactly these, and `sweeper run` warns of them.
pub use crate::engine::pause::UNINSTALL_REASON;

/// The prefix of every finalizer sweeper defines.
pub const OWN_PREFIX: &str = "sweeper.dev/";
/// The tenant collector's finalizer (KubeZoo's name, kept for compatibility).
pub const TENANT_FINALIZER: &str = crate::tenant::reconciler::FINALIZER;

#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    #[error("cannot pause the collectors in namespace {namespace}: {source}")]
    Pause {
        namespace: String,
        #[source]
        source: pause::SwitchError,
    },
    #[error("cannot discover the API's kinds: {0}")]
    Discovery(#[from] crate::engine::discovery::DiscoveryError),
}

pub struct Options {
    /// Sweeper's namespace, where the pause switch lives.
    pub namespace: String,
    /// Leave `kubezoo.io/tenant` on Tenants.
    pub keep_tenant_finalizer: bool,
    /// List what would be released; pause nothing, change nothing.
    pub dry_run: bool,
    /// Release only these collectors' finalizers, reading only the kinds they finalize
    /// ([`crate::catalog::finalized_kinds`]); empty: every collector, every kind. The chart's
    /// pre-delete hook names the collectors it enabled, so it runs with their role and no more.
    pub collectors: Vec<String>,
    /// CAPA's namespace, where its manager's Deployment says whether its own gc is on.
    pub capa_namespace: String,
}

/// What a run did (or, in a dry run, would do).
#[derive(Debug, Default)]
pub struct UninstallSummary {
    /// `Kind ns/name: finalizer, …` per object released.
    pub released: Vec<String>,
    /// Objects or kinds that could not be read or patched; run again.
    pub failed: Vec<String>,
    /// With the external collector's finalizers released: what becomes of deleted clusters' AWS
    /// resources, CAPA's gate read ([`hand_back`]).
    pub capa: Option<String>,
}

/// Whether `finalizer` on an object of `resource` is sweeper's to remove.
pub fn owned(resource: &kube::discovery::ApiResource, finalizer: &str, keep_tenant: bool) -> bool {
    finalizer.starts_with(OWN_PREFIX)
        || (!keep_tenant
            && finalizer == TENANT_FINALIZER
            && resource.group == "tenant.kubezoo.io"
            && resource.kind == "Tenant")
}

pub async fn uninstall(
    client: &Client,
    opts: &Options,
) -> Result<UninstallSummary, UninstallError> {
    if !opts.dry_run {
        let record = PauseRecord {
            since: k8s_openapi::jiff::Timestamp::now().to_string(),
            by: std::env::var("USER").ok().filter(|u| !u.is_empty()),
            reason: Some(UNINSTALL_REASON.into()),
        };
        pause::set(
            client,
            &opts.namespace,
            None,
            Some(record),
            &crate::catalog::names(),
        )
        .await
        .map_err(|e| UninstallError::Pause {
            namespace: opts.namespace.clone(),
            source: e,
        })?;
    }
    let discovery = discover_deletable(client).await?;
    let kinds = (!opts.collectors.is_empty())
        .then(|| crate::catalog::finalized_kinds(opts.collectors.iter().map(String::as_str)))
        .flatten();
    let wanted_group = |group: &str| {
        kinds
            .as_ref()
            .is_none_or(|ks| ks.iter().any(|k| k.group == group))
    };
    let wanted = |r: &DeletableResource| {
        kinds.as_ref().is_none_or(|ks| {
            ks.iter()
                .any(|k| k.group == r.resource.group && k.resource == r.resource.plural)
        })
    };
    let mut summary = UninstallSummary::default();
    for f in discovery.failed.iter().filter(|f| {
        // "group/version", or "version" for the core group.
        let group = f.group_version.rsplit_once('/').map_or("", |(g, _)| g);
        wanted_group(group)
    }) {
        summary.failed.push(format!(
            "API group {} could not be discovered ({}): its objects were not checked",
            f.group_version, f.error
        ));
    }
    for r in discovery.resources.iter().filter(|r| wanted(r)) {
        release_kind(client, r, opts, &mut summary).await;
    }
    if opts.collectors.is_empty() || opts.collectors.iter().any(|c| c == "external") {
        // Empty: not read (sweeper's own role reads no Deployment: the chart's hook reads it
        // only with check.capaDeploymentRead), and the advice says what to check instead.
        let gate = match opts.capa_namespace.as_str() {
            "" => Err(hand_back::GateUnknown::NoNamespace),
            ns => hand_back::capa_gate(client, ns).await,
        };
        summary.capa = Some(hand_back::advice(&opts.capa_namespace, &gate));
    }
    Ok(summary)
}

/// Every object of one kind, a page at a time (metadata only).
async fn release_kind(
    client: &Client,
    r: &DeletableResource,
    opts: &Options,
    summary: &mut UninstallSummary,
) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &r.resource);
    let mut lp = ListParams::default().limit(500);
    loop {
        let page = match api.list_metadata(&lp).await {
            Ok(p) => p,
            Err(e) => {
                summary
                    .failed
                    .push(format!("{}: cannot list: {e}", r.gvk_string()));
                return;
            }
        };
        for o in &page.items {
            let finalizers = o.metadata.finalizers.clone().unwrap_or_default();
            let ours = ours(&r.resource, &finalizers, opts.keep_tenant_finalizer);
            if ours.is_empty() {
                continue;
            }
            let name = o.metadata.name.clone().unwrap_or_default();
            let ns = o.metadata.namespace.clone();
            let label = release_label(&r.resource.kind, ns.as_deref(), &name, &ours);
            if !opts.dry_run
                && let Err(why) = release(client, r, ns.as_deref(), &name, &ours).await
            {
                summary.failed.push(format!("{label}: {why}"));
                continue;
            }
            tracing::info!(object = %label, dry_run = opts.dry_run, "finalizer released");
            summary.released.push(label);
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => lp = lp.continue_token(&next),
            None => return,
        }
    }
}

/// Sweeper's finalizers among an object's, with their index.
fn ours<'a>(
    resource: &kube::discovery::ApiResource,
    finalizers: &'a [String],
    keep_tenant_finalizer: bool,
) -> Vec<(usize, &'a String)> {
    finalizers
        .iter()
        .enumerate()
        .filter(|(_, f)| owned(resource, f, keep_tenant_finalizer))
        .collect()
}

/// `Kind ns/name: finalizer, finalizer` for the summary.
fn release_label(kind: &str, ns: Option<&str>, name: &str, ours: &[(usize, &String)]) -> String {
    format!(
        "{kind} {}{name}: {}",
        ns.map(|n| format!("{n}/")).unwrap_or_default(),
        ours.iter()
            .map(|(_, f)| f.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The JSON patch that removes `ours` and only them: each removal is preceded by a test that the
/// index still holds that finalizer, highest index first, so the earlier indexes stay valid
/// within the patch and a list changed meanwhile fails the patch instead of losing another's.
fn release_patch(ours: &[(usize, &String)]) -> Result<json_patch::Patch, serde_json::Error> {
    let ops: Vec<serde_json::Value> = ours
        .iter()
        .rev()
        .flat_map(|(i, f)| {
            [
                json!({"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": f}),
                json!({"op": "remove", "path": format!("/metadata/finalizers/{i}")}),
            ]
        })
        .collect();
    serde_json::from_value(json!(ops))
}

/// Why an object's finalizers were not released (the summary line names the object).
#[derive(Debug, thiserror::Error)]
enum ReleaseError {
    #[error("{0}")]
    Patch(#[from] serde_json::Error),
    #[error("{0} (changed meanwhile? run again)")]
    Refused(#[source] kube::Error),
}

/// Removes `ours` from the object.
async fn release(
    client: &Client,
    r: &DeletableResource,
    ns: Option<&str>,
    name: &str,
    ours: &[(usize, &String)],
) -> Result<(), ReleaseError> {
    let target: Api<DynamicObject> = match ns {
        Some(ns) if r.namespaced => Api::namespaced_with(client.clone(), ns, &r.resource),
        _ => Api::all_with(client.clone(), &r.resource),
    };
    let patch = release_patch(ours)?;
    target
        .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .map(|_| ())
        .map_err(ReleaseError::Refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_patch_tests_each_finalizer_and_removes_highest_index_first() {
        let (a, b) = ("sweeper.dev/a".to_string(), "sweeper.dev/b".to_string());
        let cases: [(Vec<(usize, &String)>, serde_json::Value); 2] = [
            (
                vec![(1, &a)],
                json!([
                    {"op": "test", "path": "/metadata/finalizers/1", "value": "sweeper.dev/a"},
                    {"op": "remove", "path": "/metadata/finalizers/1"},
                ]),
            ),
            (
                vec![(0, &a), (2, &b)],
                json!([
                    {"op": "test", "path": "/metadata/finalizers/2", "value": "sweeper.dev/b"},
                    {"op": "remove", "path": "/metadata/finalizers/2"},
                    {"op": "test", "path": "/metadata/finalizers/0", "value": "sweeper.dev/a"},
                    {"op": "remove", "path": "/metadata/finalizers/0"},
                ]),
            ),
        ];
        for (ours, want) in cases {
            let patch = release_patch(&ours).unwrap();
            assert_eq!(serde_json::to_value(patch).unwrap(), want, "{ours:?}");
        }
    }

    fn ar(group: &str, kind: &str) -> kube::discovery::ApiResource {
        kube::discovery::ApiResource {
            group: group.into(),
            version: "v1".into(),
            api_version: format!("{group}/v1"),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
        }
    }

    #[test]
    fn only_sweepers_finalizers_are_released() {
        let cluster = ar("infrastructure.cluster.x-k8s.io", "AWSCluster");
        let tenant = ar("tenant.kubezoo.io", "Tenant");
        assert!(owned(&cluster, "sweeper.dev/external-resource-gc", false));
        assert!(owned(&cluster, "sweeper.dev/cascade-complete", true));
        assert!(!owned(
            &cluster,
            "awscluster.infrastructure.cluster.x-k8s.io",
            false
        ));
        assert!(!owned(&cluster, "foregroundDeletion", false));
        assert!(!owned(&cluster, "orphan", false));
        assert!(owned(&tenant, "kubezoo.io/tenant", false));
        assert!(
            !owned(&tenant, "kubezoo.io/tenant", true),
            "kept when KubeZoo owns it"
        );
        assert!(
            !owned(&cluster, "kubezoo.io/tenant", false),
            "the tenant finalizer only on Tenants"
        );
    }

    mod release_kind {
        //! `release_kind` against a scripted API server: every page is read, only sweeper's
        //! finalizers are removed (by index, each guarded by a `test` op), other objects are not
        //! written, and a dry run writes nothing.
        use super::super::*;
        use crate::testing::MockApi;
        use http::Method;
        use k8s_openapi::api::core::v1::ConfigMap;

        const LIST: &str = "/api/v1/configmaps";

        fn configmaps() -> DeletableResource {
            DeletableResource {
                resource: kube::discovery::ApiResource::erase::<ConfigMap>(&()),
                namespaced: true,
            }
        }

        fn item(name: &str, finalizers: &[&str]) -> serde_json::Value {
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                   "metadata": {"name": name, "namespace": "ns", "finalizers": finalizers}})
        }

        fn page(items: Vec<serde_json::Value>, next: &str) -> serde_json::Value {
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                   "metadata": {"continue": next}, "items": items})
        }

        fn opts(dry_run: bool) -> Options {
            Options {
                namespace: "sweeper-system".into(),
                keep_tenant_finalizer: false,
                dry_run,
                collectors: Vec::new(),
                capa_namespace: String::new(),
            }
        }

        fn script(server: &MockApi) {
            server.expect(Method::GET, LIST).respond(
                200,
                page(
                    vec![
                        item("a", &["example.com/keep", "sweeper.dev/cascade-complete"]),
                        item("theirs", &["example.com/keep"]),
                    ],
                    "page-2",
                ),
            );
            server.expect(Method::GET, LIST).respond(
                200,
                page(vec![item("b", &["sweeper.dev/cascade-complete"])], ""),
            );
        }

        #[tokio::test]
        async fn only_sweepers_finalizer_is_removed_from_each_holder_on_every_page() {
            let (client, server) = MockApi::new();
            script(&server);
            server
                .expect(Method::PATCH, "/api/v1/namespaces/ns/configmaps/a")
                .respond(200, item("a", &["example.com/keep"]));
            server
                .expect(Method::PATCH, "/api/v1/namespaces/ns/configmaps/b")
                .respond(200, item("b", &[]));
            let mut summary = UninstallSummary::default();

            release_kind(&client, &configmaps(), &opts(false), &mut summary).await;

            let calls = server.finish();
            assert_eq!(calls.len(), 4, "{calls:#?}");
            assert_eq!(calls[2].query_param("continue").as_deref(), Some("page-2"));
            assert_eq!(
                calls[1].body,
                json!([
                    {"op": "test", "path": "/metadata/finalizers/1", "value": "sweeper.dev/cascade-complete"},
                    {"op": "remove", "path": "/metadata/finalizers/1"},
                ]),
                "the other controller's finalizer at index 0 stays"
            );
            assert_eq!(summary.released.len(), 2);
            assert!(summary.failed.is_empty(), "{:?}", summary.failed);
        }

        #[tokio::test]
        async fn a_dry_run_lists_what_it_would_release_and_writes_nothing() {
            let (client, server) = MockApi::new();
            script(&server);
            let mut summary = UninstallSummary::default();

            release_kind(&client, &configmaps(), &opts(true), &mut summary).await;

            assert!(server.finish().iter().all(|c| c.method == Method::GET));
            assert_eq!(
                summary.released,
                [
                    "ConfigMap ns/a: sweeper.dev/cascade-complete",
                    "ConfigMap ns/b: sweeper.dev/cascade-complete"
                ]
            );
        }

        #[tokio::test]
        async fn a_refused_patch_is_reported_and_the_rest_still_released() {
            let (client, server) = MockApi::new();
            script(&server);
            server
                .expect(Method::PATCH, "/api/v1/namespaces/ns/configmaps/a")
                .respond_status(422, "Invalid");
            server
                .expect(Method::PATCH, "/api/v1/namespaces/ns/configmaps/b")
                .respond(200, item("b", &[]));
            let mut summary = UninstallSummary::default();

            release_kind(&client, &configmaps(), &opts(false), &mut summary).await;

            server.finish();
            assert_eq!(summary.failed.len(), 1);
            assert!(
                summary.failed[0].starts_with("ConfigMap ns/a"),
                "{:?}",
                summary.failed
            );
            assert_eq!(
                summary.released,
                ["ConfigMap ns/b: sweeper.dev/cascade-complete"]
            );
        }
    }
}
