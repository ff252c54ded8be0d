//! The archive is written before the DELETE and settled after it, crash or not: one entry per
//! deleted object, none for an object that was not deleted.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PropagationPolicy::Background;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use std::time::Duration;
use support::TestScope;
use support::objects::*;
use support::sweeper::{Sweeper, eventually};
use sweeper::archive::restore;

const T: Duration = Duration::from_secs(30);

/// Sweeper with a failpoint at "record written, DELETE not sent".
fn spawn_with_failpoint(action: &str) -> Sweeper {
    // SAFETY: set before the child is spawned, read only by the child.
    unsafe { std::env::set_var("SWEEPER_FAILPOINT", action) };
    let s = Sweeper::spawn(&[]);
    unsafe { std::env::remove_var("SWEEPER_FAILPOINT") };
    s
}

async fn records(c: &kube::Client, ns: &str, selector: &str) -> Vec<ConfigMap> {
    Api::<ConfigMap>::namespaced(c.clone(), ns)
        .list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
}

/// Waits until a record matching `selector` exists in `ns`.
async fn any_record(c: &kube::Client, ns: &str, selector: &str) -> bool {
    eventually(T, || async { !records(c, ns, selector).await.is_empty() }).await
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn kill_9_between_archive_and_delete_leaves_exactly_one_record_after_restart() {
    let mut s = TestScope::new("archkill").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    let owner = configmap(&c, &ns, "owner", vec![]).await;
    let dep = configmap(&c, &ns, "dep", vec![owner_ref(&owner, None)]).await;

    let mut gc = spawn_with_failpoint("after-archive-record");
    gc.wait_ready(T).await;
    delete_cm(&c, &ns, "owner", Background).await;
    // The record appears (pending), and the process hangs before the DELETE: kill -9 it there.
    let recorded = any_record(&c, &ns, "sweeper.dev/archive-state=pending").await;
    assert!(recorded, "the record is written before the delete");
    gc.kill();
    assert!(
        cm(&c, &ns, "dep").await.is_some(),
        "killed before the DELETE"
    );

    // A fresh process settles the leftover record (its object still exists: entry removed),
    // archives the object again and deletes it.
    let _gc = Sweeper::start(&[]).await;
    assert!(cm_gone(&c, &ns, "dep", T).await, "the job is finished");
    let settled = eventually(T, || async {
        records(&c, &ns, "sweeper.dev/archive-state=pending")
            .await
            .is_empty()
    })
    .await;
    assert!(settled, "no record stays pending");
    let archive = restore::load(&c, Some(&ns), "sweeper-system")
        .await
        .unwrap();
    let all_entries: usize = records(&c, &ns, "sweeper.dev/archive=true")
        .await
        .iter()
        .map(|r| {
            r.data
                .as_ref()
                .map(|d| {
                    d.keys()
                        .filter(|k| k.starts_with(&dep.uid().unwrap()))
                        .count()
                })
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(
        all_entries, 1,
        "exactly one entry for the object across records"
    );
    assert_eq!(archive.entries.len(), 1);
    assert_eq!(archive.entries[0].uid, dep.uid().unwrap());
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn a_delete_whose_precondition_fails_leaves_no_false_record() {
    let mut s = TestScope::new("archrace").await;
    let ns = s.namespace().await;
    let c = s.client.clone();
    let owner = configmap(&c, &ns, "owner", vec![]).await;
    let dep = configmap(&c, &ns, "dep", vec![owner_ref(&owner, None)]).await;

    // Each DELETE waits 4 s after its record is written: change the object in that window.
    let _gc = spawn_with_failpoint("after-archive-record:sleep=4s");
    _gc.wait_ready(T).await;
    delete_cm(&c, &ns, "owner", Background).await;
    assert!(any_record(&c, &ns, "sweeper.dev/archive=true").await);
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    api.patch(
        "dep",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"data": {"changed": "after the record"}})),
    )
    .await
    .unwrap();

    // The first DELETE fails its resourceVersion precondition; its entry goes. The object is
    // still garbage, so it is archived again as it now is, and deleted.
    assert!(cm_gone(&c, &ns, "dep", Duration::from_secs(60)).await);
    let settled = eventually(T, || async {
        records(&c, &ns, "sweeper.dev/archive-state=pending")
            .await
            .is_empty()
    })
    .await;
    assert!(settled);
    let archive = restore::load(&c, Some(&ns), "sweeper-system")
        .await
        .unwrap();
    assert_eq!(archive.entries.len(), 1, "{:?}", archive.entries);
    let e = &archive.entries[0];
    assert_eq!(e.uid, dep.uid().unwrap());
    assert_eq!(
        e.object["data"]["changed"], "after the record",
        "the record holds the version that was deleted"
    );
}
