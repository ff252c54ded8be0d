//! The heart of attempt-to-delete, as a pure function: given what is known about each owner of an
//! object, decide whether to keep it, rewrite its owner references, or delete it and how.
//! Mirrors the upstream garbage collector's classifyReferences + attemptToDeleteItem switch.

use crate::engine::graph::uid::Uid;

/// What is known about one owner reference of the object being classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerStatus {
    /// Exists with the referenced uid, not waiting for its dependents.
    Solid,
    /// Gone: not found, another uid, or verified absent earlier.
    Dangling,
    /// Exists and is being deleted in the foreground (waits for blocking dependents).
    Waiting,
    /// Referenced but never observed, and not verified yet: its own check will requeue us.
    Pending,
    /// The reference names an owner in another namespace: treated as absent (Warning Event).
    InvalidNamespace,
    /// A cluster-scoped object naming a namespaced owner: invalid, never collected.
    ClusterScopedWithNamespacedOwner,
    /// The owner's kind is not served (no such resource): keep, retry with backoff.
    UnknownKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GcDecision {
    /// Nothing to do: no owners, a solid owner with nothing to tidy, or owners still pending.
    Keep,
    /// A solid owner keeps the object; drop these references (dangling or waiting owners).
    RemoveOwnerRefs(Vec<Uid>),
    /// Delete the object. `unblock_first`: rewrite its blockOwnerDeletion to false before the
    /// delete, breaking a potential foreground cycle.
    Delete {
        policy: Propagation,
        unblock_first: bool,
    },
    /// Can't decide yet (unknown owner kind): retry with backoff, keep the object.
    Retry,
    /// Never collect (invalid reference that retrying cannot fix).
    Never,
}

/// The object's own state that matters to the decision.
#[derive(Clone, Copy, Debug, Default)]
pub struct ObjectState {
    pub has_orphan_finalizer: bool,
    pub has_foreground_finalizer: bool,
    pub has_dependents: bool,
    /// Some dependent of the object is itself deleting its dependents in the foreground.
    pub dependent_deleting_dependents: bool,
}

pub fn decide(subject: ObjectState, owners: &[(Uid, OwnerStatus)]) -> GcDecision {
    use OwnerStatus::*;
    if owners.is_empty() {
        return GcDecision::Keep;
    }
    if owners
        .iter()
        .any(|(_, s)| *s == ClusterScopedWithNamespacedOwner)
    {
        return GcDecision::Never;
    }
    if owners.iter().any(|(_, s)| *s == UnknownKind) {
        return GcDecision::Retry;
    }
    let solid = owners.iter().any(|(_, s)| *s == Solid);
    let waiting = owners.iter().any(|(_, s)| *s == Waiting);
    if solid {
        let drop: Vec<Uid> = owners
            .iter()
            .filter(|(_, s)| matches!(s, Dangling | Waiting | InvalidNamespace))
            .map(|(u, _)| *u)
            .collect();
        return if drop.is_empty() {
            GcDecision::Keep
        } else {
            GcDecision::RemoveOwnerRefs(drop)
        };
    }
    if owners.iter().any(|(_, s)| *s == Pending) {
        return GcDecision::Keep;
    }
    if waiting && subject.has_dependents {
        return GcDecision::Delete {
            policy: Propagation::Foreground,
            unblock_first: subject.dependent_deleting_dependents,
        };
    }
    let policy = if subject.has_orphan_finalizer {
        Propagation::Orphan
    } else if subject.has_foreground_finalizer {
        Propagation::Foreground
    } else {
        Propagation::Background
    };
    GcDecision::Delete {
        policy,
        unblock_first: false,
    }
}

#[cfg(test)]
mod tests {
    use super::OwnerStatus::*;
    use super::*;

    fn u(n: u64) -> Uid {
        Uid([0, n])
    }
    const BG: GcDecision = GcDecision::Delete {
        policy: Propagation::Background,
        unblock_first: false,
    };

    #[test]
    fn object_without_owners_is_never_deleted() {
        assert_eq!(decide(ObjectState::default(), &[]), GcDecision::Keep);
    }

    #[test]
    fn all_owners_gone_means_background_delete() {
        assert_eq!(
            decide(
                ObjectState::default(),
                &[(u(1), Dangling), (u(2), InvalidNamespace)]
            ),
            BG
        );
    }

    #[test]
    fn one_solid_owner_keeps_the_object_and_drops_dangling_refs() {
        assert_eq!(
            decide(
                ObjectState::default(),
                &[(u(1), Solid), (u(2), Dangling), (u(3), Waiting)]
            ),
            GcDecision::RemoveOwnerRefs(vec![u(2), u(3)])
        );
        assert_eq!(
            decide(ObjectState::default(), &[(u(1), Solid)]),
            GcDecision::Keep
        );
    }

    #[test]
    fn pending_owner_defers_the_decision() {
        assert_eq!(
            decide(ObjectState::default(), &[(u(1), Pending), (u(2), Dangling)]),
            GcDecision::Keep
        );
    }

    #[test]
    fn unknown_owner_kind_retries_and_keeps() {
        assert_eq!(
            decide(
                ObjectState::default(),
                &[(u(1), UnknownKind), (u(2), Dangling)]
            ),
            GcDecision::Retry
        );
    }

    #[test]
    fn cluster_scoped_with_namespaced_owner_is_never_collected() {
        assert_eq!(
            decide(
                ObjectState::default(),
                &[(u(1), ClusterScopedWithNamespacedOwner), (u(2), Dangling)]
            ),
            GcDecision::Never
        );
    }

    #[test]
    fn waiting_owner_deletes_a_parent_in_the_foreground() {
        let s = ObjectState {
            has_dependents: true,
            ..Default::default()
        };
        assert_eq!(
            decide(s, &[(u(1), Waiting)]),
            GcDecision::Delete {
                policy: Propagation::Foreground,
                unblock_first: false
            }
        );
        let cyc = ObjectState {
            has_dependents: true,
            dependent_deleting_dependents: true,
            ..Default::default()
        };
        assert_eq!(
            decide(cyc, &[(u(1), Waiting)]),
            GcDecision::Delete {
                policy: Propagation::Foreground,
                unblock_first: true
            }
        );
        // A leaf under a waiting owner goes in the background.
        assert_eq!(decide(ObjectState::default(), &[(u(1), Waiting)]), BG);
    }

    #[test]
    fn own_finalizers_choose_the_policy() {
        let orphan = ObjectState {
            has_orphan_finalizer: true,
            ..Default::default()
        };
        let fg = ObjectState {
            has_foreground_finalizer: true,
            ..Default::default()
        };
        assert!(matches!(
            decide(orphan, &[(u(1), Dangling)]),
            GcDecision::Delete {
                policy: Propagation::Orphan,
                ..
            }
        ));
        assert!(matches!(
            decide(fg, &[(u(1), Dangling)]),
            GcDecision::Delete {
                policy: Propagation::Foreground,
                ..
            }
        ));
    }
}
