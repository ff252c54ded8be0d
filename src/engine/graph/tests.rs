//! The writer's logic as a pure function of watch events.

use super::node::{MetaLite, OwnerRefLite, flag};
use super::uid::Uid;
use super::{Graph, Work};

fn uid(n: u64) -> Uid {
    Uid([0, n])
}

fn meta(n: u64, name: &str, owners: &[(u64, bool)]) -> MetaLite {
    MetaLite {
        uid: uid(n),
        odd_uid: None,
        name: name.into(),
        namespace: Some("ns".into()),
        resource_version: n,
        flags: 0,
        owners: owners
            .iter()
            .map(|&(o, block)| OwnerRefLite {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: format!("owner-{o}"),
                uid: uid(o),
                controller: false,
                block_owner_deletion: block,
            })
            .collect(),
    }
}

fn graph() -> (Graph, u16) {
    let mut g = Graph::new();
    let k = g.kinds.intern("v1", "ConfigMap");
    (g, k)
}

#[test]
fn unseen_owner_becomes_a_virtual_node_queued_for_verification() {
    let (mut g, k) = graph();
    let work = g.apply(k, &meta(2, "dep", &[(1, false)]));
    assert_eq!(work, vec![Work::AttemptToDelete(uid(1))]);
    let owner = g.get(&uid(1)).unwrap();
    assert!(!owner.observed());
    assert_eq!(g.dependents(owner).count(), 1);
}

#[test]
fn a_dependent_arriving_after_its_owners_deletion_is_queued() {
    let (mut g, k) = graph();
    g.apply(k, &meta(1, "owner-1", &[]));
    g.apply(k, &meta(2, "a", &[(1, false)]));
    g.remove(&uid(1)); // the stand-in stays for "a"
    // "b"'s watch lagged the owner's: it arrives after the deletion was applied.
    let work = g.apply(k, &meta(3, "b", &[(1, false)]));
    assert_eq!(
        work,
        vec![Work::AttemptToDelete(uid(3))],
        "only the newcomer: \"a\" was queued with the deletion"
    );
    assert!(g.get(&uid(1)).unwrap().known_absent());
}

#[test]
fn a_virtual_owner_found_absent_queues_its_dependents_once() {
    let (mut g, k) = graph();
    g.apply(k, &meta(2, "a", &[(1, false)]));
    // Not known gone yet: a newcomer waits for the verification, which queues everyone.
    assert!(g.apply(k, &meta(3, "b", &[(1, false)])).is_empty());
    let work = g.virtual_absent(&uid(1));
    assert_eq!(work.len(), 2, "{work:?}");
    assert!(g.virtual_absent(&uid(1)).is_empty(), "already known gone");
    let work = g.apply(k, &meta(4, "c", &[(1, false)]));
    assert_eq!(work, vec![Work::AttemptToDelete(uid(4))]);
}

#[test]
fn a_uid_observed_again_is_no_longer_absent() {
    let (mut g, k) = graph();
    g.apply(k, &meta(1, "owner-1", &[]));
    g.apply(k, &meta(2, "a", &[(1, false)]));
    g.remove(&uid(1));
    assert!(g.get(&uid(1)).unwrap().known_absent());
    // A force-deleted CRD re-created over custom resources still in etcd: same uid, back.
    let work = g.apply(k, &meta(1, "owner-1", &[]));
    assert!(work.contains(&Work::AttemptToDelete(uid(2))), "{work:?}");
    let owner = g.get(&uid(1)).unwrap();
    assert!(owner.observed() && !owner.known_absent());
}

#[test]
fn observing_a_virtual_owner_makes_it_real_and_rechecks_dependents() {
    let (mut g, k) = graph();
    g.apply(k, &meta(2, "dep", &[(1, false)]));
    let work = g.apply(k, &meta(1, "owner-1", &[]));
    assert!(work.contains(&Work::AttemptToDelete(uid(2))));
    assert!(g.get(&uid(1)).unwrap().observed());
    assert_eq!(g.len(), 2);
}

#[test]
fn deleting_an_owner_queues_its_dependents() {
    let (mut g, k) = graph();
    g.apply(k, &meta(1, "owner-1", &[]));
    g.apply(k, &meta(2, "a", &[(1, false)]));
    g.apply(k, &meta(3, "b", &[(1, false)]));
    let work = g.remove(&uid(1));
    assert!(work.contains(&Work::AttemptToDelete(uid(2))));
    assert!(work.contains(&Work::AttemptToDelete(uid(3))));
    // The stand-in stays while dependents point at it, then goes with the last of them.
    assert!(!g.get(&uid(1)).unwrap().observed());
    g.remove(&uid(2));
    g.remove(&uid(3));
    assert!(g.get(&uid(1)).is_none());
    assert!(g.is_empty());
}

#[test]
fn foreground_deletion_queues_owner_and_dependents() {
    let (mut g, k) = graph();
    g.apply(k, &meta(1, "owner-1", &[]));
    g.apply(k, &meta(2, "a", &[(1, true)]));
    let mut m = meta(1, "owner-1", &[]);
    m.flags = flag::DELETING | flag::FOREGROUND;
    let work = g.apply(k, &m);
    assert!(work.contains(&Work::AttemptToDelete(uid(1))));
    assert!(work.contains(&Work::AttemptToDelete(uid(2))));
}

#[test]
fn orphan_finalizer_queues_orphaning_once() {
    let (mut g, k) = graph();
    g.apply(k, &meta(1, "owner-1", &[]));
    let mut m = meta(1, "owner-1", &[]);
    m.flags = flag::DELETING | flag::ORPHAN;
    assert_eq!(g.apply(k, &m), vec![Work::AttemptToOrphan(uid(1))]);
    assert!(
        g.apply(k, &m).is_empty(),
        "no second orphan pass for an unchanged object"
    );
}

#[test]
fn dropping_an_owner_reference_releases_a_waiting_owner() {
    let (mut g, k) = graph();
    g.apply(k, &meta(1, "owner-1", &[]));
    g.apply(k, &meta(2, "a", &[(1, true)]));
    let mut m = meta(1, "owner-1", &[]);
    m.flags = flag::DELETING | flag::FOREGROUND;
    g.apply(k, &m);
    let work = g.apply(k, &meta(2, "a", &[]));
    assert!(work.contains(&Work::AttemptToDelete(uid(1))));
    assert_eq!(g.dependents(g.get(&uid(1)).unwrap()).count(), 0);
}

#[test]
fn clearing_block_owner_deletion_re_examines_the_owner() {
    let (mut g, k) = graph();
    g.apply(k, &meta(1, "owner-1", &[]));
    g.apply(k, &meta(2, "a", &[(1, true)]));
    let mut m = meta(1, "owner-1", &[]);
    m.flags = flag::DELETING | flag::FOREGROUND;
    g.apply(k, &m);
    let work = g.apply(k, &meta(2, "a", &[(1, false)]));
    assert!(work.contains(&Work::AttemptToDelete(uid(1))));
    let owner = g.get(&uid(1)).unwrap();
    assert_eq!(
        g.dependents(owner).count(),
        1,
        "still a dependent, just not blocking"
    );
    assert!(!g.get(&uid(2)).unwrap().owners[0].blocks());
}

#[test]
fn resync_removes_objects_missing_from_the_relist() {
    let (mut g, k) = graph();
    g.apply(k, &meta(1, "owner-1", &[]));
    g.apply(k, &meta(2, "a", &[(1, false)]));
    let seen = [uid(2)].into_iter().collect();
    let (gone, work) = g.resync(k, &seen);
    assert_eq!(gone, vec![uid(1)]);
    assert!(work.contains(&Work::AttemptToDelete(uid(2))));
}

#[test]
fn find_by_coordinates() {
    let (mut g, k) = graph();
    g.apply(k, &meta(1, "owner-1", &[]));
    assert!(g.find("", "ConfigMap", Some("ns"), "owner-1").is_some());
    assert!(g.find("", "ConfigMap", Some("other"), "owner-1").is_none());
    assert!(g.find("apps", "ConfigMap", Some("ns"), "owner-1").is_none());
}

#[test]
fn a_virtual_owner_observed_after_the_sync_requeues_its_dependents() {
    let (mut g, k) = graph();
    g.apply(k, &meta(2, "a", &[(1, false)]));
    g.apply(k, &meta(3, "b", &[(1, false)]));
    // Workers may have classified "a" and "b" while the owner was pending: decide them again.
    let mut work = g.apply(k, &meta(1, "owner-1", &[]));
    work.sort_by_key(|w| format!("{w:?}"));
    assert_eq!(
        work,
        vec![Work::AttemptToDelete(uid(2)), Work::AttemptToDelete(uid(3))]
    );
}

#[test]
fn during_the_initial_sync_an_owner_listed_after_its_dependents_requeues_none() {
    let (mut g, k) = graph();
    g.set_initial_sync(true);
    assert_eq!(
        g.apply(k, &meta(2, "a", &[(1, false)])),
        vec![Work::AttemptToDelete(uid(1))],
        "the virtual owner is still verified"
    );
    g.apply(k, &meta(3, "b", &[(1, false)]));
    // No worker has classified anything yet: nothing to decide again.
    assert!(g.apply(k, &meta(1, "owner-1", &[])).is_empty());
    let owner = g.get(&uid(1)).unwrap();
    assert!(owner.observed());
    assert_eq!(g.dependents(owner).count(), 2);
}

#[test]
fn during_the_initial_sync_a_reference_not_matching_the_listed_owner_is_requeued() {
    let (mut g, k) = graph();
    g.set_initial_sync(true);
    g.apply(k, &meta(2, "right", &[(1, false)]));
    // Names the uid of owner-1 under another name: invalid once the owner is seen.
    let mut wrong = meta(3, "wrong", &[(1, false)]);
    wrong.owners[0].name = "not-the-owner".into();
    g.apply(k, &wrong);
    let mut other_kind = meta(4, "other-kind", &[(1, false)]);
    other_kind.owners[0].kind = "Secret".into();
    g.apply(k, &other_kind);
    let mut work = g.apply(k, &meta(1, "owner-1", &[]));
    work.sort_by_key(|w| format!("{w:?}"));
    assert_eq!(
        work,
        vec![Work::AttemptToDelete(uid(3)), Work::AttemptToDelete(uid(4))]
    );
    // After the sync every dependent of a newly observed owner is decided again.
    g.set_initial_sync(false);
    g.apply(k, &meta(6, "late", &[(5, false)]));
    assert_eq!(
        g.apply(k, &meta(5, "owner-5", &[])),
        vec![Work::AttemptToDelete(uid(6))]
    );
}
