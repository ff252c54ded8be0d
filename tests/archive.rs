//! The archive and `sweeper restore` against the real kube-apiserver: what the cascade collector
//! deletes is recorded first, can be listed and rolled forward, and is readable only by who may
//! read the original kind.

mod support;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::PropagationPolicy::{Background, Foreground};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use std::collections::BTreeMap;
use std::time::Duration;
use support::TestScope;
use support::objects::*;
use support::sweeper::{Sweeper, cli, eventually};
use sweeper::archive::restore;

const T: Duration = Duration::from_secs(30);
const SETTLE: Duration = Duration::from_secs(4);

/// A ConfigMap with `data` and owners.
async fn cm_data(
    c: &Client,
    ns: &str,
    name: &str,
    owners: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.labels = Some(BTreeMap::from([("app".into(), name.into())]));
    cm.metadata.owner_references = (!owners.is_empty()).then_some(owners);
    cm.data = Some(BTreeMap::from([(
        "payload".into(),
        format!("data of {name}"),
    )]));
    Api::<ConfigMap>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"))
}

async fn secret(
    c: &Client,
    ns: &str,
    name: &str,
    owners: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.into());
    s.metadata.owner_references = Some(owners);
    s.string_data = Some(BTreeMap::from([("password".into(), "hunter2".into())]));
    Api::<Secret>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &s)
        .await
        .unwrap_or_else(|e| panic!("create secret {name}: {e}"))
}

/// The names of the objects archived in `ns`, oldest first.
async fn archived_names(c: &Client, ns: &str) -> Vec<String> {
    restore::load(c, Some(ns), "sweeper-system")
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.name)
        .collect()
}

async fn secret_gone(secrets: &Api<Secret>, name: &str) -> bool {
    eventually(T, || async {
        secrets.get_opt(name).await.unwrap().is_none()
    })
    .await
}

fn owner_names(c: &ConfigMap) -> Vec<(String, String)> {
    c.metadata
        .owner_references
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.name, r.uid))
        .collect()
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_foreground_tree_and_a_background_cascade_are_restored_with_their_owner_links() {
    let mut s = TestScope::new("restore").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    let _gc = Sweeper::start(&[]).await;

    // Foreground: root -> mid-a, mid-b -> leaf-a1, leaf-a2, leaf-b1, and a Secret under mid-a.
    let root = cm_data(&c, &ns, "root", vec![]).await;
    let mid_a = cm_data(&c, &ns, "mid-a", vec![owner_ref(&root, Some(true))]).await;
    let mid_b = cm_data(&c, &ns, "mid-b", vec![owner_ref(&root, Some(true))]).await;
    for (leaf, mid) in [
        ("leaf-a1", &mid_a),
        ("leaf-a2", &mid_a),
        ("leaf-b1", &mid_b),
    ] {
        cm_data(&c, &ns, leaf, vec![owner_ref(mid, Some(true))]).await;
    }
    secret(&c, &ns, "creds-a", vec![owner_ref(&mid_a, Some(true))]).await;
    // Background: bg-owner -> bg-0..2.
    let bg_owner = cm_data(&c, &ns, "bg-owner", vec![]).await;
    for i in 0..3 {
        cm_data(
            &c,
            &ns,
            &format!("bg-{i}"),
            vec![owner_ref(&bg_owner, None)],
        )
        .await;
    }

    delete_cm(&c, &ns, "root", Foreground).await;
    delete_cm(&c, &ns, "bg-owner", Background).await;
    for name in [
        "root", "mid-a", "mid-b", "leaf-a1", "leaf-b1", "bg-0", "bg-2",
    ] {
        assert!(cm_gone(&c, &ns, name, T).await, "{name} collected");
    }
    let secrets: Api<Secret> = Api::namespaced(c.clone(), &ns);
    assert!(secret_gone(&secrets, "creds-a").await);

    // Every deleted object is in the archive once, the root too (sweeper released its
    // foreground finalizer); the Secret's record is a Secret.
    let archive = restore::load(&c, Some(&ns), "sweeper-system")
        .await
        .unwrap();
    let names: Vec<&str> = archive.entries.iter().map(|e| e.name.as_str()).collect();
    for n in [
        "root", "mid-a", "mid-b", "leaf-a1", "leaf-a2", "leaf-b1", "creds-a", "bg-0", "bg-1",
        "bg-2",
    ] {
        assert_eq!(
            names.iter().filter(|x| **x == n).count(),
            1,
            "{n} archived once: {names:?}"
        );
    }
    let secret_records = secrets
        .list(&ListParams::default().labels("sweeper.dev/archive=true"))
        .await
        .unwrap();
    assert_eq!(secret_records.items.len(), 1, "one Secret record");
    assert_eq!(
        secret_records.items[0].type_.as_deref(),
        Some("sweeper.dev/archive")
    );
    let records: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let settled = eventually(T, || async {
        records
            .list(&ListParams::default().labels("sweeper.dev/archive-state=pending"))
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    assert!(
        settled,
        "every record is settled once its deletes are answered"
    );

    // `archive list` shows them with why.
    let (ok, out, err) = cli(&["archive", "list", "-n", &ns]);
    assert!(ok, "{err}");
    assert!(
        out.contains("owner ConfigMap bg-owner") && out.contains("mid-a"),
        "{out}"
    );

    // The foreground tree comes back, owners first, links re-pointed to the new uids.
    let (ok, out, err) = cli(&["restore", "--cascade-of", &root.uid().unwrap()]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("7 restored"), "{out}");
    let new_root = cm(&c, &ns, "root").await.expect("root restored");
    assert_ne!(new_root.uid(), root.uid(), "created anew");
    assert_eq!(new_root.data, root.data);
    assert!(
        new_root.metadata.finalizers.is_none(),
        "no foregroundDeletion"
    );
    for (child, parent) in [
        ("mid-a", "root"),
        ("mid-b", "root"),
        ("leaf-a1", "mid-a"),
        ("leaf-a2", "mid-a"),
        ("leaf-b1", "mid-b"),
    ] {
        let obj = cm(&c, &ns, child).await.expect("restored");
        let p = cm(&c, &ns, parent).await.unwrap();
        assert_eq!(obj.data.unwrap()["payload"], format!("data of {child}"));
        assert_eq!(
            owner_names(&cm(&c, &ns, child).await.unwrap()),
            vec![(parent.to_string(), p.uid().unwrap())],
            "{child} points at the restored {parent}"
        );
    }
    let creds = secrets.get("creds-a").await.expect("secret restored");
    assert_eq!(
        creds.data.unwrap()["password"].0,
        b"hunter2".to_vec(),
        "secret data equal"
    );

    // The background owner was deleted by its user and is not archived: recreate it, and the
    // restored dependents point at it.
    let new_bg_owner = cm_data(&c, &ns, "bg-owner", vec![]).await;
    let (ok, out, err) = cli(&["restore", "--cascade-of", &bg_owner.uid().unwrap()]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("re-pointed to the existing one"), "{out}");
    for i in 0..3 {
        let d = cm(&c, &ns, &format!("bg-{i}")).await.expect("restored");
        assert_eq!(
            owner_names(&d),
            vec![("bg-owner".to_string(), new_bg_owner.uid().unwrap())]
        );
    }

    // Restoring again skips what exists; nothing restored is collected again.
    let (ok, out, _) = cli(&["restore", "--cascade-of", &root.uid().unwrap()]);
    assert!(ok && out.contains("0 restored, 7 skipped"), "{out}");
    tokio::time::sleep(SETTLE).await;
    for n in ["root", "mid-a", "leaf-b1", "bg-0", "bg-owner"] {
        assert!(cm(&c, &ns, n).await.is_some(), "{n} is not collected again");
    }
    assert!(secrets.get_opt("creds-a").await.unwrap().is_some());
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_secret_record_is_readable_only_by_who_may_read_secrets_there() {
    let mut s = TestScope::new("archrbac").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    // A user who may read ConfigMaps in the namespace, not Secrets.
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "cm-reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
    }))
    .unwrap();
    Api::<Role>::namespaced(c.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "cm-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "archive-reader"}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(c.clone(), &ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let _gc = Sweeper::start(&[]).await;
    let owner = cm_data(&c, &ns, "owner", vec![]).await;
    cm_data(&c, &ns, "plain", vec![owner_ref(&owner, None)]).await;
    secret(&c, &ns, "token", vec![owner_ref(&owner, None)]).await;
    delete_cm(&c, &ns, "owner", Background).await;
    assert!(cm_gone(&c, &ns, "plain", T).await);
    let secrets: Api<Secret> = Api::namespaced(c.clone(), &ns);
    assert!(secret_gone(&secrets, "token").await);

    // The admin reads both records.
    let all = restore::load(&c, Some(&ns), "sweeper-system")
        .await
        .unwrap();
    let mut kinds: Vec<&str> = all.entries.iter().map(|e| e.kind.as_str()).collect();
    kinds.sort();
    assert_eq!(kinds, vec!["ConfigMap", "Secret"]);

    // The restricted user (impersonated) reads the ConfigMap's record, not the Secret's.
    let mut config = support::kube_config().await;
    config.auth_info.impersonate = Some("archive-reader".into());
    let restricted = Client::try_from(config).unwrap();
    let theirs = restore::load(&restricted, Some(&ns), "sweeper-system")
        .await
        .unwrap();
    let kinds: Vec<&str> = theirs.entries.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, vec!["ConfigMap"], "no Secret record for them");
    assert!(
        theirs
            .notes
            .iter()
            .any(|n| n.contains("may not list Secrets")),
        "{:?}",
        theirs.notes
    );
    let record = secrets
        .list(&ListParams::default().labels("sweeper.dev/archive=true"))
        .await
        .unwrap()
        .items
        .remove(0);
    let denied = Api::<Secret>::namespaced(restricted, &ns)
        .get(&record.name_any())
        .await
        .unwrap_err();
    assert!(
        matches!(&denied, kube::Error::Api(s) if s.code == 403),
        "{denied}"
    );
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn expired_records_are_deleted_and_live_ones_kept() {
    let mut s = TestScope::new("archttl").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    // Records as sweeper writes them (with their expiry bucket: one deletecollection per
    // namespace and ended bucket) and as older versions did (without: one DELETE each).
    let record = |name: &str, collector: &str, expires: &str| -> ConfigMap {
        let at: k8s_openapi::jiff::Timestamp = expires.parse().unwrap();
        let bucket = sweeper::archive::expiry_bucket(at, Duration::from_secs(72 * 3600));
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name,
                "labels": {"sweeper.dev/archive": "true", "sweeper.dev/archive-state": "complete",
                           "sweeper.dev/archive-collector": collector,
                           "sweeper.dev/archive-expiry-bucket": bucket},
                "annotations": {"sweeper.dev/archive-expires": expires},
            },
            "data": {},
        }))
        .unwrap()
    };
    let legacy = |name: &str, expires: &str| -> ConfigMap {
        let mut cm = record(name, "cascade", expires);
        if let Some(l) = cm.metadata.labels.as_mut() {
            l.remove("sweeper.dev/archive-expiry-bucket");
        }
        cm
    };
    for (name, expires) in [
        ("sweeper-archive-old", "2020-01-01T00:00:00Z"),
        ("sweeper-archive-old2", "2020-01-01T00:10:00Z"),
        ("sweeper-archive-new", "2099-01-01T00:00:00Z"),
    ] {
        api.create(&PostParams::default(), &record(name, "cascade", expires))
            .await
            .unwrap();
    }
    api.create(
        &PostParams::default(),
        &legacy("sweeper-archive-legacy", "2020-01-01T00:00:00Z"),
    )
    .await
    .unwrap();
    let gc = Sweeper::start(&[]).await;
    for old in [
        "sweeper-archive-old",
        "sweeper-archive-old2",
        "sweeper-archive-legacy",
    ] {
        assert!(
            cm_gone(&c, &ns, old, T).await,
            "the expired record {old} is deleted"
        );
    }
    assert!(cm(&c, &ns, "sweeper-archive-new").await.is_some());
    assert!(gc.metric("sweeper_archive_records_expired_total").await >= 3.0);
    assert!(
        gc.metric("sweeper_archive_stored_records").await >= 1.0,
        "the live record is counted"
    );
    drop(gc);

    // The external collector's audit records expire even where nothing archives: the external
    // collector alone, with the archive off. They live in sweeper's own namespace (the
    // external-only service account's, sweeper-system), the only place its role reaches: one
    // with a bucket (deletecollection) and one written before buckets (DELETE).
    const SWEEPER_NS: &str = "sweeper-system";
    let own: Api<ConfigMap> = Api::namespaced(c.clone(), SWEEPER_NS);
    let (old_audit, legacy_name) = (format!("{ns}-audit-old"), format!("{ns}-audit-legacy"));
    own.create(
        &PostParams::default(),
        &record(&old_audit, "external", "2020-01-01T00:00:00Z"),
    )
    .await
    .unwrap();
    let mut legacy_audit = legacy(&legacy_name, "2020-01-01T00:00:00Z");
    if let Some(l) = legacy_audit.metadata.labels.as_mut() {
        l.insert("sweeper.dev/archive-collector".into(), "external".into());
    }
    own.create(&PostParams::default(), &legacy_audit)
        .await
        .unwrap();
    // As the external-only install's service account: its role allows the expiry there.
    let _external = Sweeper::start_external_only_scoped(&s, &["--archive", "none"]).await;
    for old in [&old_audit, &legacy_name] {
        assert!(
            cm_gone(&c, SWEEPER_NS, old, T).await,
            "the expired audit record {old} is deleted"
        );
    }
    assert!(cm(&c, &ns, "sweeper-archive-new").await.is_some());
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn an_object_over_the_cap_is_deleted_without_a_record_and_said_so() {
    let mut s = TestScope::new("archcap").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    let _gc = Sweeper::start(&["--archive-max-object-bytes", "2000"]).await;
    let owner = cm_data(&c, &ns, "owner", vec![]).await;
    let mut big = ConfigMap::default();
    big.metadata.name = Some("big".into());
    big.metadata.owner_references = Some(vec![owner_ref(&owner, None)]);
    big.data = Some(BTreeMap::from([("blob".into(), "x".repeat(4000))]));
    Api::<ConfigMap>::namespaced(c.clone(), &ns)
        .create(&PostParams::default(), &big)
        .await
        .unwrap();
    cm_data(&c, &ns, "small", vec![owner_ref(&owner, None)]).await;
    delete_cm(&c, &ns, "owner", Background).await;
    assert!(cm_gone(&c, &ns, "big", T).await, "still deleted");
    assert!(cm_gone(&c, &ns, "small", T).await);
    let names = archived_names(&c, &ns).await;
    assert_eq!(names, vec!["small"]);
    let said = eventually(T, || async {
        any_event(&c, &ns, |e| {
            e.reason.as_deref() == Some("NotArchived")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("big")
        })
        .await
    })
    .await;
    assert!(said, "a NotArchived Event names the object");
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn archive_none_and_selector_choose_what_is_recorded() {
    let mut s = TestScope::new("archsel").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    let gc = Sweeper::start(&["--archive", "selector=app=keep-me"]).await;
    let owner = cm_data(&c, &ns, "owner", vec![]).await;
    cm_data(&c, &ns, "keep-me", vec![owner_ref(&owner, None)]).await;
    cm_data(&c, &ns, "not-me", vec![owner_ref(&owner, None)]).await;
    delete_cm(&c, &ns, "owner", Background).await;
    assert!(cm_gone(&c, &ns, "keep-me", T).await);
    assert!(cm_gone(&c, &ns, "not-me", T).await);
    let names = archived_names(&c, &ns).await;
    assert_eq!(names, vec!["keep-me"]);
    drop(gc);

    let _gc = Sweeper::start(&["--archive", "none"]).await;
    let owner = cm_data(&c, &ns, "owner2", vec![]).await;
    cm_data(&c, &ns, "dep2", vec![owner_ref(&owner, None)]).await;
    delete_cm(&c, &ns, "owner2", Background).await;
    assert!(cm_gone(&c, &ns, "dep2", T).await);
    let archive = restore::load(&c, Some(&ns), "sweeper-system")
        .await
        .unwrap();
    assert!(
        archive.entries.iter().all(|e| e.name != "dep2"),
        "--archive=none records nothing"
    );
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_tenant_teardown_is_restored_with_its_cluster_roles_crds_and_custom_resources() {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::DynamicObject;
    use support::tenant::*;
    use sweeper::api::tenant::Tenant;
    let scope = TestScope::new("archtenant").await;
    let c = scope.client.clone();
    install_sweeper_crds(&c).await;
    let (a, b) = ids();
    cluster_role(&c, &format!("{a}-reader"), Some(&a)).await;
    cluster_role(&c, &format!("{b}-reader"), Some(&b)).await;
    let mut ns = Namespace::default();
    ns.metadata.name = Some(format!("{a}-ns1"));
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let ar = schemaless_crd(&c, &format!("{a}-shop.example.com"), "Gadget", "Cluster", T).await;
    let gadgets: Api<DynamicObject> = Api::all_with(c.clone(), &ar);
    let mut g1 = DynamicObject::new("g1", &ar);
    g1.data = serde_json::json!({"spec": {"size": 3}});
    assert!(
        eventually(T, || async {
            gadgets.create(&PostParams::default(), &g1).await.is_ok()
        })
        .await
    );

    let _gc = Sweeper::start_scoped(
        &scope,
        &["--feature-gates", "CascadeGC=false,TenantGC=true"],
    )
    .await;
    tenant(&scope, &a).await;
    assert!(eventually(T, || has_finalizer(&c, &a)).await);
    delete_tenant(&c, &a).await;
    let released = eventually(Duration::from_secs(60), || async {
        !exists(&Api::<Tenant>::all(c.clone()), &a).await
    })
    .await;
    assert!(released, "tenant torn down");
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let roles: Api<ClusterRole> = Api::all(c.clone());
    let crd_name = format!("gadgets.{a}-shop.example.com");
    assert!(!exists(&crds, &crd_name).await);
    assert!(!exists(&roles, &format!("{a}-reader")).await);

    let (ok, out, err) = cli(&["restore", "--tenant", &a, "--dry-run"]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("would create CustomResourceDefinition"),
        "{out}"
    );
    assert!(!exists(&crds, &crd_name).await, "a dry run creates nothing");

    let (ok, out, err) = cli(&["restore", "--tenant", &a]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("4 restored"), "{out}");
    assert!(exists(&crds, &crd_name).await, "CRD back");
    let role = roles
        .get(&format!("{a}-reader"))
        .await
        .expect("ClusterRole back");
    assert_eq!(
        role.metadata.labels.unwrap().get("kubezoo.io/tenant"),
        Some(&a),
        "with its labels"
    );
    assert!(exists(&Api::<Namespace>::all(c.clone()), &format!("{a}-ns1")).await);
    let restored = gadgets.get("g1").await.expect("custom resource back");
    assert_eq!(restored.data["spec"]["size"], 3, "with its spec");
    // The other tenant's objects were never in it.
    assert!(!out.contains(&format!("{b}-reader")), "{out}");

    // Clean up what was restored (no tenant owns it any more).
    let _ = crds.delete(&crd_name, &Default::default()).await;
    let _ = roles
        .delete(&format!("{a}-reader"), &Default::default())
        .await;
    let _ = roles
        .delete(&format!("{b}-reader"), &Default::default())
        .await;
    let _ = Api::<Namespace>::all(c.clone())
        .delete(&format!("{a}-ns1"), &Default::default())
        .await;
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_forged_record_cannot_name_a_cluster_scoped_object() {
    let mut s = TestScope::new("archforge").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    // Someone who may create ConfigMaps here writes a "record" of a ClusterRoleBinding.
    let entry = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "name": "i-am-admin", "uid": "11111111-2222-4333-8444-555555555555",
        "resourceVersion": "1", "deletedBy": "sweeper-cascade", "reason": {},
        "archivedAt": "2026-01-01T00:00:00Z",
        "object": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "i-am-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "User", "name": "mallory", "apiGroup": "rbac.authorization.k8s.io"}]},
    });
    let forged: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sweeper-archive-forged", "labels": {"sweeper.dev/archive": "true"}},
        "data": {"11111111-2222-4333-8444-555555555555.json": entry.to_string(), "junk.json": "[1]"},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(c.clone(), &ns)
        .create(&PostParams::default(), &forged)
        .await
        .unwrap();
    let archive = restore::load(&c, Some(&ns), "sweeper-system")
        .await
        .unwrap();
    assert!(archive.entries.is_empty(), "{:?}", archive.entries);
    assert!(
        archive
            .notes
            .iter()
            .any(|n| n.contains("1 entries ignored")),
        "{:?}",
        archive.notes
    );
    let (ok, _, err) = cli(&[
        "restore",
        "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
        "i-am-admin",
    ]);
    assert!(!ok, "nothing to restore");
    assert!(err.contains("nothing in the archive matches"), "{err}");

    // The same forgery claiming to be namespaced: trusted by location, refused by scope.
    let mut entry = entry;
    entry["name"] = serde_json::json!("i-am-admin-too");
    entry["namespace"] = serde_json::json!(ns);
    entry["object"]["metadata"] = serde_json::json!({"name": "i-am-admin-too", "namespace": ns});
    let forged: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sweeper-archive-forged-2", "labels": {"sweeper.dev/archive": "true"}},
        "data": {"11111111-2222-4333-8444-555555555555.json": entry.to_string()},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(c.clone(), &ns)
        .create(&PostParams::default(), &forged)
        .await
        .unwrap();
    let (ok, out, err) = cli(&[
        "restore",
        "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
        &ns,
        "i-am-admin-too",
    ]);
    assert!(!ok, "refused: {out}{err}");
    assert!(out.contains("is cluster-scoped"), "{out}\n{err}");
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(c.clone());
    assert!(
        bindings.get_opt("i-am-admin-too").await.unwrap().is_none(),
        "no ClusterRoleBinding was created"
    );
}

/// A namespace that refuses the record (here: over its ConfigMap quota) does not block the
/// delete: the record goes to sweeper's namespace, and restore finds it there.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_record_refused_by_its_namespace_is_kept_in_sweepers_and_restorable() {
    use k8s_openapi::api::core::v1::ResourceQuota;
    let mut s = TestScope::new("archquota").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    let owner = cm_data(&c, &ns, "owner", vec![]).await;
    for d in ["dep-1", "dep-2"] {
        cm_data(&c, &ns, d, vec![owner_ref(&owner, None)]).await;
    }
    // Full: no ResourceQuota controller runs here, so the quota's usage is written by hand; the
    // API server's quota admission then refuses any new ConfigMap in the namespace.
    let quotas: Api<ResourceQuota> = Api::namespaced(c.clone(), &ns);
    let quota: ResourceQuota = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "full"},
        "spec": {"hard": {"configmaps": "3"}},
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    let status =
        serde_json::json!({"status": {"hard": {"configmaps": "3"}, "used": {"configmaps": "3"}}});
    quotas
        .patch_status(
            "full",
            &Default::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .unwrap();
    let mut probe = ConfigMap::default();
    probe.metadata.name = Some("probe".into());
    let refused = eventually(T, || async {
        Api::<ConfigMap>::namespaced(c.clone(), &ns)
            .create(&PostParams::default(), &probe)
            .await
            .is_err()
    })
    .await;
    assert!(refused, "the namespace refuses new ConfigMaps");

    let _gc = Sweeper::start(&[]).await;
    delete_cm(&c, &ns, "owner", Background).await;
    for d in ["dep-1", "dep-2"] {
        assert!(cm_gone(&c, &ns, d, T).await, "{d} deleted all the same");
    }
    let here = restore::load(&c, Some(&ns), "sweeper-system")
        .await
        .unwrap();
    assert!(here.entries.is_empty(), "no record in the full namespace");
    let moved = restore::load(&c, Some("sweeper-system"), "sweeper-system")
        .await
        .unwrap();
    let names: Vec<&str> = moved
        .entries
        .iter()
        .filter(|e| e.namespace.as_deref() == Some(ns.as_str()))
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names.len(), 2, "both in sweeper's namespace: {names:?}");

    quotas.delete("full", &Default::default()).await.unwrap();
    let (ok, out, err) = cli(&["restore", "--cascade-of", &owner.uid().unwrap()]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("2 restored"), "{out}");
    for d in ["dep-1", "dep-2"] {
        let back = cm(&c, &ns, d).await.expect("restored");
        assert_eq!(back.data.unwrap()["payload"], format!("data of {d}"));
    }
}

/// The external collector's audit records carry the archive label but hold AWS resources:
/// `restore` does not list them (nothing to restore, nothing to warn about), while a value of an
/// archive record that is not an entry is said, never silently dropped.
#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn restore_lists_no_audit_record_and_says_what_it_cannot_read() {
    let mut s = TestScope::new("araudit").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let record = |name: &str, collector: &str, value: &str| -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name,
                "labels": {"sweeper.dev/archive": "true", "sweeper.dev/archive-state": "complete",
                           "sweeper.dev/archive-collector": collector},
            },
            "data": {"00000.json": value},
        }))
        .unwrap()
    };
    let aws = r#"{"arn":"arn:aws:ec2:us-east-1:000000000000:security-group/sg-1","service":"ec2","kind":"security-group","phase":2}"#;
    api.create(
        &PostParams::default(),
        &record("sweeper-audit-x", "external", aws),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &record("sweeper-archive-x", "cascade", "not json"),
    )
    .await
    .unwrap();
    let archive = restore::load(&c, Some(&ns), "sweeper-system")
        .await
        .unwrap();
    assert!(archive.entries.is_empty(), "{:?}", archive.records);
    assert!(
        !archive.notes.iter().any(|n| n.contains("sweeper-audit-x")),
        "the audit record is not read: {:?}",
        archive.notes
    );
    assert!(
        archive
            .notes
            .iter()
            .any(|n| n.contains("sweeper-archive-x") && n.contains("00000.json")),
        "the unreadable value is said: {:?}",
        archive.notes
    );
}
