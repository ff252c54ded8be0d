//! The contract case by case: each marker, on the object or on the linked AWSManagedCluster, with
//! and without our finalizer, live and deleting, against each state of the owning Cluster.

use super::*;

fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const OBJ: &str = "AWSCluster ns/c1";
const LINKED: &str = "AWSManagedCluster ns/c1";

fn subject<'a>(
    own: &'a BTreeMap<String, String>,
    linked: Option<&'a BTreeMap<String, String>>,
    holds_finalizer: bool,
    deleting: bool,
) -> Subject<'a> {
    let mut objects = vec![Marked {
        label: OBJ,
        annotations: own,
    }];
    if let Some(l) = linked {
        objects.push(Marked {
            label: LINKED,
            annotations: l,
        });
    }
    Subject {
        objects,
        holds_finalizer,
        deleting,
    }
}

fn running() -> ClusterState {
    ClusterState::Running {
        name: "ns/c1".into(),
    }
}

fn paused() -> ClusterState {
    ClusterState::Paused {
        name: "ns/c1".into(),
    }
}

#[test]
fn an_unmarked_object_of_a_running_cluster_is_acted_on() {
    let none = ann(&[]);
    for (holds, deleting) in [(false, false), (true, true), (false, true)] {
        assert_eq!(
            decide(&subject(&none, None, holds, deleting), Some(&running())),
            Decision::Act
        );
    }
}

#[test]
fn a_paused_cluster_holds_a_deletion_and_the_finalizer_add() {
    let none = ann(&[]);
    let want = Decision::Wait(Hold::Paused(PausedBy::Cluster("ns/c1".into())));
    // Deleting with our finalizer: the teardown waits, the finalizer stays.
    assert_eq!(
        decide(&subject(&none, None, true, true), Some(&paused())),
        want
    );
    // Live without it (clusterctl move stripped it): it is not put back.
    assert_eq!(
        decide(&subject(&none, None, false, false), Some(&paused())),
        want
    );
}

#[test]
fn the_paused_annotation_holds_whatever_its_value_and_the_cluster() {
    for value in ["", "true", "false"] {
        let own = ann(&[(PAUSED, value)]);
        assert_eq!(
            decide(&subject(&own, None, true, true), Some(&running())),
            Decision::Wait(Hold::Paused(PausedBy::Annotation(OBJ.into()))),
            "{PAUSED}={value:?}"
        );
    }
}

#[test]
fn a_pause_on_the_linked_managed_cluster_holds_the_control_plane() {
    let own = ann(&[]);
    let linked = ann(&[(PAUSED, "")]);
    assert_eq!(
        decide(&subject(&own, Some(&linked), true, true), Some(&running())),
        Decision::Wait(Hold::Paused(PausedBy::Annotation(LINKED.into())))
    );
}

#[test]
fn marked_for_move_releases_our_finalizer_and_never_takes_it() {
    let own = ann(&[(DELETE_FOR_MOVE, "")]);
    let why = Exempt::Moving { object: OBJ.into() };
    // clusterctl pauses the Cluster before it marks: the move still wins over the pause.
    assert_eq!(
        decide(&subject(&own, None, true, true), Some(&paused())),
        Decision::Release(why.clone())
    );
    assert_eq!(
        decide(&subject(&own, None, true, false), None),
        Decision::Release(why.clone())
    );
    assert_eq!(
        decide(&subject(&own, None, false, false), Some(&running())),
        Decision::Ignore(why.clone())
    );
    assert_eq!(
        decide(&subject(&own, None, false, true), Some(&paused())),
        Decision::Ignore(why)
    );
}

#[test]
fn externally_managed_is_never_torn_down_and_a_finalizer_of_ours_goes() {
    let own = ann(&[(MANAGED_BY, "terraform")]);
    let why = Exempt::ExternallyManaged {
        object: OBJ.into(),
        by: "terraform".into(),
    };
    assert_eq!(
        decide(&subject(&own, None, true, true), Some(&running())),
        Decision::Release(why.clone())
    );
    assert_eq!(
        decide(&subject(&own, None, true, false), None),
        Decision::Release(why.clone())
    );
    assert_eq!(
        decide(&subject(&own, None, false, false), Some(&running())),
        Decision::Ignore(why.clone())
    );
    // Even with a pause on top: it was never sweeper's.
    let both = ann(&[(MANAGED_BY, "terraform"), (PAUSED, "")]);
    assert_eq!(
        decide(&subject(&both, None, false, true), Some(&paused())),
        Decision::Ignore(why)
    );
}

#[test]
fn markers_on_the_linked_managed_cluster_count() {
    let own = ann(&[]);
    let moving = ann(&[(DELETE_FOR_MOVE, "")]);
    assert_eq!(
        decide(&subject(&own, Some(&moving), true, true), Some(&running())),
        Decision::Release(Exempt::Moving {
            object: LINKED.into()
        })
    );
    let managed = ann(&[(MANAGED_BY, "crossplane")]);
    assert_eq!(
        decide(
            &subject(&own, Some(&managed), false, false),
            Some(&running())
        ),
        Decision::Ignore(Exempt::ExternallyManaged {
            object: LINKED.into(),
            by: "crossplane".into()
        })
    );
}

#[test]
fn an_unreadable_cluster_fails_closed() {
    let none = ann(&[]);
    let unreadable = ClusterState::Unreadable {
        name: "ns/c1".into(),
        error: "forbidden".into(),
    };
    let want = Decision::Wait(Hold::ClusterUnreadable {
        cluster: "ns/c1".into(),
        error: "forbidden".into(),
    });
    assert_eq!(
        decide(&subject(&none, None, true, true), Some(&unreadable)),
        want,
        "nothing deleted, nothing released"
    );
    assert_eq!(
        decide(&subject(&none, None, false, false), Some(&unreadable)),
        want,
        "no finalizer added either: the Cluster may be paused"
    );
}

#[test]
fn a_gone_or_unnamed_cluster_pauses_nothing() {
    let none = ann(&[]);
    for state in [
        ClusterState::Gone {
            name: "ns/c1".into(),
        },
        ClusterState::NoOwner,
    ] {
        assert_eq!(
            decide(&subject(&none, None, true, true), Some(&state)),
            Decision::Act,
            "{state:?}"
        );
    }
}

#[test]
fn the_cluster_is_read_only_when_something_is_at_stake() {
    let none = ann(&[]);
    assert!(
        !needs_cluster(&subject(&none, None, true, false)),
        "a live object holding the finalizer: nothing is done until it is deleted"
    );
    assert!(
        needs_cluster(&subject(&none, None, false, false)),
        "finalizer add"
    );
    assert!(needs_cluster(&subject(&none, None, true, true)), "teardown");
    let moving = ann(&[(DELETE_FOR_MOVE, "")]);
    assert!(
        !needs_cluster(&subject(&moving, None, true, true)),
        "a marker already decides"
    );
    let paused = ann(&[(PAUSED, "")]);
    assert!(!needs_cluster(&subject(&paused, None, true, true)));
}

#[test]
fn messages_name_the_object_and_the_marker() {
    let m = Exempt::Moving { object: OBJ.into() }.to_string();
    assert!(m.contains(OBJ) && m.contains(DELETE_FOR_MOVE), "{m}");
    let h = Hold::Paused(PausedBy::Cluster("ns/c1".into())).to_string();
    assert!(h.contains("Cluster ns/c1 is paused"), "{h}");
    assert_eq!(
        Hold::Paused(PausedBy::Cluster("x".into())).reason(),
        "Paused"
    );
}
