//! The cascade collector against the real kube-apiserver, with kube-controller-manager's garbage
//! collector OFF (the environment runs only its namespace controller): sweeper alone collects.
//! Scenarios ported from the upstream garbage collector integration suite (same intent, our code).

mod support;

use kube::ResourceExt;
use kube::api::PropagationPolicy::{Background, Foreground, Orphan};
use std::time::Duration;
use support::TestScope;
use support::objects::*;
use support::sweeper::{Sweeper, eventually};

const T: Duration = Duration::from_secs(30);
/// Long enough that a collector which was going to delete something would have.
const SETTLE: Duration = Duration::from_secs(3);

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn cascading_deletion_spares_dependents_with_another_valid_owner_and_independents() {
    let mut s = TestScope::new("cascade").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let _gc = Sweeper::start(&[]).await;
    let doomed = configmap(c, &ns, "to-be-deleted", vec![]).await;
    let remaining = configmap(c, &ns, "remaining", vec![]).await;
    configmap(c, &ns, "only-doomed", vec![owner_ref(&doomed, None)]).await;
    configmap(
        c,
        &ns,
        "both",
        vec![owner_ref(&doomed, None), owner_ref(&remaining, None)],
    )
    .await;
    configmap(c, &ns, "independent", vec![]).await;

    delete_cm(c, &ns, "to-be-deleted", Background).await;
    assert!(
        cm_gone(c, &ns, "only-doomed", T).await,
        "dependent of the deleted owner is collected"
    );
    let both_cleaned = eventually(T, || async {
        cm(c, &ns, "both")
            .await
            .is_some_and(|b| owner_uids(&b) == vec![remaining.metadata.uid.clone().unwrap()])
    })
    .await;
    assert!(
        both_cleaned,
        "the dangling reference is removed, the solid one kept"
    );
    tokio::time::sleep(SETTLE).await;
    assert!(
        cm(c, &ns, "both").await.is_some(),
        "a dependent with a solid owner survives"
    );
    assert!(cm(c, &ns, "independent").await.is_some());
    assert!(cm(c, &ns, "remaining").await.is_some());
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn create_with_non_existent_owner_is_collected() {
    let mut s = TestScope::new("noowner").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let _gc = Sweeper::start(&[]).await;
    let ghost = fake_ref(
        "ConfigMap",
        "v1",
        "ghost",
        "11111111-2222-4333-8444-555555555555",
    );
    configmap(c, &ns, "orphan-of-ghost", vec![ghost]).await;
    configmap(c, &ns, "unowned", vec![]).await;
    assert!(cm_gone(c, &ns, "orphan-of-ghost", T).await);
    assert!(cm(c, &ns, "unowned").await.is_some());
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn orphaning_keeps_dependents_and_removes_the_reference() {
    let mut s = TestScope::new("orphan").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let _gc = Sweeper::start(&[]).await;
    let owner = configmap(c, &ns, "owner", vec![]).await;
    let other = configmap(c, &ns, "other-owner", vec![]).await;
    for i in 0..5 {
        configmap(
            c,
            &ns,
            &format!("dep-{i}"),
            vec![owner_ref(&owner, Some(true))],
        )
        .await;
    }
    configmap(
        c,
        &ns,
        "dep-two-owners",
        vec![owner_ref(&owner, None), owner_ref(&other, None)],
    )
    .await;
    delete_cm(c, &ns, "owner", Orphan).await;
    assert!(
        cm_gone(c, &ns, "owner", T).await,
        "the orphan finalizer is released"
    );
    for i in 0..5 {
        let d = cm(c, &ns, &format!("dep-{i}"))
            .await
            .expect("orphaned dependent survives");
        assert!(
            owner_uids(&d).is_empty(),
            "reference to the orphaning owner removed"
        );
    }
    let d = cm(c, &ns, "dep-two-owners").await.unwrap();
    assert_eq!(owner_uids(&d), vec![other.metadata.uid.unwrap()]);
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn solid_owner_does_not_block_waiting_owner() {
    let mut s = TestScope::new("solidwait").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let _gc = Sweeper::start(&[]).await;
    let waiting = configmap(c, &ns, "waiting", vec![]).await;
    let solid = configmap(c, &ns, "solid", vec![]).await;
    configmap(
        c,
        &ns,
        "dep",
        vec![owner_ref(&waiting, Some(true)), owner_ref(&solid, None)],
    )
    .await;
    delete_cm(c, &ns, "waiting", Foreground).await;
    assert!(
        cm_gone(c, &ns, "waiting", T).await,
        "foreground owner finishes: the dependent drops its reference"
    );
    let d = cm(c, &ns, "dep")
        .await
        .expect("dependent with a solid owner survives");
    assert_eq!(owner_uids(&d), vec![solid.metadata.uid.unwrap()]);
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn non_blocking_owner_ref_does_not_block() {
    let mut s = TestScope::new("nonblock").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let _gc = Sweeper::start(&[]).await;
    let owner = configmap(c, &ns, "owner", vec![]).await;
    // Dependents that cannot go away (a foreign finalizer): only non-blocking references to the owner.
    let fin = vec!["example.com/hold".to_string()];
    configmap_with(
        c,
        &ns,
        "dep-false",
        vec![owner_ref(&owner, Some(false))],
        fin.clone(),
    )
    .await;
    configmap_with(c, &ns, "dep-unset", vec![owner_ref(&owner, None)], fin).await;
    delete_cm(c, &ns, "owner", Foreground).await;
    assert!(
        cm_gone(c, &ns, "owner", T).await,
        "non-blocking dependents do not hold the owner"
    );
    for d in ["dep-false", "dep-unset"] {
        let gone_pending = eventually(T, || async {
            cm(c, &ns, d)
                .await
                .is_some_and(|x| x.metadata.deletion_timestamp.is_some())
        })
        .await;
        assert!(
            gone_pending,
            "{d} is deleted too (held only by its own finalizer)"
        );
        clear_finalizers(c, &ns, d).await;
    }
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn blocking_owner_ref_does_block() {
    let mut s = TestScope::new("block").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let _gc = Sweeper::start(&[]).await;
    let owner = configmap(c, &ns, "owner", vec![]).await;
    configmap_with(
        c,
        &ns,
        "dep",
        vec![owner_ref(&owner, Some(true))],
        vec!["example.com/hold".into()],
    )
    .await;
    delete_cm(c, &ns, "owner", Foreground).await;
    let dep_deleting = eventually(T, || async {
        cm(c, &ns, "dep")
            .await
            .is_some_and(|x| x.metadata.deletion_timestamp.is_some())
    })
    .await;
    assert!(dep_deleting, "the blocking dependent is deleted first");
    tokio::time::sleep(SETTLE).await;
    let o = cm(c, &ns, "owner")
        .await
        .expect("owner waits for its blocking dependent");
    assert!(o.finalizers().contains(&"foregroundDeletion".to_string()));
    clear_finalizers(c, &ns, "dep").await;
    assert!(
        cm_gone(c, &ns, "owner", T).await,
        "owner goes once the blocking dependent is gone"
    );
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn double_deletion_with_finalizer() {
    let mut s = TestScope::new("double").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let _gc = Sweeper::start(&[]).await;
    configmap_with(c, &ns, "obj", vec![], vec!["example.com/x".into()]).await;
    delete_cm(c, &ns, "obj", Foreground).await;
    let fg_done = eventually(T, || async {
        cm(c, &ns, "obj")
            .await
            .is_some_and(|o| o.finalizers() == ["example.com/x".to_string()])
    })
    .await;
    assert!(
        fg_done,
        "foregroundDeletion removed (no dependents); the foreign finalizer kept"
    );
    delete_cm(c, &ns, "obj", Background).await;
    tokio::time::sleep(SETTLE).await;
    assert_eq!(
        cm(c, &ns, "obj").await.unwrap().finalizers(),
        ["example.com/x".to_string()]
    );
    clear_finalizers(c, &ns, "obj").await;
    assert!(cm_gone(c, &ns, "obj", T).await);
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn foreground_multi_level_tree_deletes_bottom_up() {
    let mut s = TestScope::new("fgtree").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let _gc = Sweeper::start(&[]).await;
    let root = configmap(c, &ns, "root", vec![]).await;
    for i in 0..3 {
        let mid = configmap(
            c,
            &ns,
            &format!("mid-{i}"),
            vec![owner_ref(&root, Some(true))],
        )
        .await;
        for j in 0..3 {
            configmap(
                c,
                &ns,
                &format!("leaf-{i}-{j}"),
                vec![owner_ref(&mid, Some(true))],
            )
            .await;
        }
    }
    configmap(c, &ns, "bystander", vec![]).await;
    delete_cm(c, &ns, "root", Foreground).await;
    assert!(cm_gone(c, &ns, "root", T).await);
    for i in 0..3 {
        assert!(
            cm(c, &ns, &format!("mid-{i}")).await.is_none(),
            "root went last: mid-{i} is gone"
        );
        for j in 0..3 {
            assert!(cm(c, &ns, &format!("leaf-{i}-{j}")).await.is_none());
        }
    }
    assert!(cm(c, &ns, "bystander").await.is_some());
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn foreground_cycle_does_not_deadlock() {
    let mut s = TestScope::new("cycle").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let _gc = Sweeper::start(&[]).await;
    let a = configmap(c, &ns, "a", vec![]).await;
    let b = configmap(c, &ns, "b", vec![owner_ref(&a, Some(true))]).await;
    // a <- b <- a: close the cycle.
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(c.clone(), &ns);
    let patch = serde_json::json!({"metadata": {"ownerReferences": [owner_ref(&b, Some(true))]}});
    api.patch("a", &Default::default(), &kube::api::Patch::Merge(&patch))
        .await
        .unwrap();
    delete_cm(c, &ns, "a", Foreground).await;
    assert!(cm_gone(c, &ns, "a", T).await, "a is collected");
    assert!(cm_gone(c, &ns, "b", T).await, "b is collected");
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn owner_recreated_with_new_uid_does_not_keep_old_dependents() {
    let mut s = TestScope::new("recreate").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let _gc = Sweeper::start(&[]).await;
    let old = configmap(c, &ns, "owner", vec![]).await;
    configmap(c, &ns, "dep", vec![owner_ref(&old, None)]).await;
    delete_cm(c, &ns, "owner", Orphan).await; // keep the dependent for now...
    assert!(cm_gone(c, &ns, "owner", T).await);
    // ...then put the stale reference back and recreate an owner with the same name.
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(c.clone(), &ns);
    let patch = serde_json::json!({"metadata": {"ownerReferences": [owner_ref(&old, None)]}});
    api.patch("dep", &Default::default(), &kube::api::Patch::Merge(&patch))
        .await
        .unwrap();
    let new = configmap(c, &ns, "owner", vec![]).await;
    assert_ne!(new.metadata.uid, old.metadata.uid);
    assert!(
        cm_gone(c, &ns, "dep", T).await,
        "the same name with a new uid is not the owner"
    );
    assert!(cm(c, &ns, "owner").await.is_some());
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn dry_run_deletes_nothing_and_reports() {
    let mut s = TestScope::new("dryrun").await;
    let ns = s.namespace().await;
    let c = &s.client;
    let gc = Sweeper::start(&["--cascade-dry-run"]).await;
    let owner = configmap(c, &ns, "owner", vec![]).await;
    configmap(c, &ns, "dep", vec![owner_ref(&owner, None)]).await;
    delete_cm(c, &ns, "owner", Background).await;
    let reported = eventually(T, || async {
        gc.metric("sweeper_cascade_would_delete_total{resource=\"/v1/ConfigMap\"}")
            .await
            >= 1.0
    })
    .await;
    assert!(reported, "dry run reports what it would delete");
    tokio::time::sleep(SETTLE).await;
    assert!(cm(c, &ns, "dep").await.is_some(), "dry run deleted nothing");
}
