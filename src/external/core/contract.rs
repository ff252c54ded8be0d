//! Cluster API's contract for infrastructure providers, as CAPA keeps it, decided in one pure
//! function: whether sweeper may act on a cluster's object at all.
//!
//! - **Paused** (`Cluster.spec.paused`, or the annotation `cluster.x-k8s.io/paused` on the object):
//!   a provider does nothing for the cluster (CAPA: `annotations.IsPaused(cluster, awsCluster)`,
//!   checked before the deletion branch). A deletion waits, holding what it holds; nothing is added.
//! - **Marked for move** (`clusterctl.cluster.x-k8s.io/delete-for-move`): `clusterctl move` pauses
//!   the Cluster, copies the objects, then for each source object adds this annotation, strips its
//!   finalizers and deletes it. The cluster lives on, managed from elsewhere: its infrastructure is
//!   never touched, and our finalizer (should it still be there) goes without a single AWS call.
//! - **Externally managed** (`cluster.x-k8s.io/managed-by`, any value): CAPA filters such objects
//!   out entirely (predicate `ResourceIsNotExternallyManaged`), deletion included. Whoever manages
//!   it owns its infrastructure: no finalizer, no teardown, and one we added earlier goes.
//!
//! The markers count on the object itself and, for an EKS control plane, on the AWSManagedCluster
//! its Cluster names as infrastructure (`clusterctl move` marks every object it moves; a user may
//! pause or hand over either). Decisions here never read anything: the caller reads the Cluster
//! (or says it did not need to) and this module only decides.

use std::collections::BTreeMap;
use std::fmt;

pub const PAUSED: &str = "cluster.x-k8s.io/paused";
pub const DELETE_FOR_MOVE: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";
pub const MANAGED_BY: &str = "cluster.x-k8s.io/managed-by";

/// What sweeper learned of the owning Cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterState {
    /// Read, and not paused.
    Running { name: String },
    /// Read, and `spec.paused: true`.
    Paused { name: String },
    /// The object names a Cluster that does not exist (deleted before its infrastructure, or never
    /// created). Nothing pauses it then; the object's own markers still count.
    Gone { name: String },
    /// The object names no Cluster (neither label nor owner reference). Validation reports that
    /// as bad input; nothing here pauses it.
    NoOwner,
    /// Reading the Cluster failed with anything but not-found: whether it is paused is unknown.
    Unreadable { name: String, error: String },
}

impl ClusterState {
    /// How `gc plan` and the log name it.
    pub fn describe(&self) -> String {
        match self {
            ClusterState::Running { name } => format!("Cluster {name}: not paused"),
            ClusterState::Paused { name } => format!("Cluster {name}: paused (spec.paused)"),
            ClusterState::Gone { name } => format!("Cluster {name}: not found"),
            ClusterState::NoOwner => "no owning Cluster".to_string(),
            ClusterState::Unreadable { name, error } => {
                format!("Cluster {name}: cannot be read ({error})")
            }
        }
    }
}

/// One object whose markers count: its `Kind ns/name` and annotations.
pub struct Marked<'a> {
    pub label: &'a str,
    pub annotations: &'a BTreeMap<String, String>,
}

/// What the objects and the Cluster say about one object of a cluster.
pub struct Subject<'a> {
    /// The object itself first, then the linked AWSManagedCluster where there is one.
    pub objects: Vec<Marked<'a>>,
    /// Sweeper's finalizer is on the object.
    pub holds_finalizer: bool,
    /// The object is being deleted.
    pub deleting: bool,
}

/// Why a cluster is exempt from sweeper for good.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exempt {
    /// `clusterctl move` is taking the cluster away; `object` carries the mark.
    Moving { object: String },
    /// Someone else manages the cluster's infrastructure.
    ExternallyManaged { object: String, by: String },
}

/// Why a cluster's object waits (nothing in AWS is touched and no finalizer changes meanwhile).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Paused by the Cluster's `spec.paused`, or by the annotation on `object`.
    Paused(PausedBy),
    /// The owning Cluster could not be read: it may be paused.
    ClusterUnreadable { cluster: String, error: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PausedBy {
    Cluster(String),
    Annotation(String),
}

/// The decision for one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing in the contract stands in the way: add the finalizer, or tear down, as usual.
    Act,
    /// No AWS call and no finalizer change until the hold lifts.
    Wait(Hold),
    /// Remove our finalizer without any AWS call: the object must never be torn down by sweeper.
    Release(Exempt),
    /// Not sweeper's to touch, and nothing of ours is on it.
    Ignore(Exempt),
}

impl<'a> Subject<'a> {
    /// The object itself (`label`, its annotations) and, where there is one, the linked
    /// AWSManagedCluster (`(label, annotations)`), whose markers count too.
    pub fn new(
        label: &'a str,
        annotations: &'a BTreeMap<String, String>,
        linked: Option<&'a (String, BTreeMap<String, String>)>,
        holds_finalizer: bool,
        deleting: bool,
    ) -> Self {
        let mut objects = vec![Marked { label, annotations }];
        objects.extend(linked.map(|(label, annotations)| Marked { label, annotations }));
        Subject {
            objects,
            holds_finalizer,
            deleting,
        }
    }

    fn marked(&self, key: &str) -> Option<(&str, &str)> {
        self.objects
            .iter()
            .find_map(|o| o.annotations.get(key).map(|v| (o.label, v.as_str())))
    }
}

/// Whether the owning Cluster must be read before [`decide`] can answer for `subject`: not for a
/// live object that already holds our finalizer (nothing is done for it until it is deleted, so
/// a paused Cluster changes nothing), and not once a marker on the object already decides.
pub fn needs_cluster(subject: &Subject<'_>) -> bool {
    let local = decide(subject, None);
    local == Decision::Act && (subject.deleting || !subject.holds_finalizer)
}

/// The contract's decision. `cluster` is `None` when the caller did not read it because
/// [`needs_cluster`] said it was not needed; then only the objects' markers count.
///
/// Order matters: an exempt object is exempt whatever its pause (clusterctl pauses the Cluster
/// before it marks and deletes the objects it moves, and their finalizers must go); a pause waits
/// whatever else holds; a Cluster that cannot be read fails closed.
pub fn decide(subject: &Subject<'_>, cluster: Option<&ClusterState>) -> Decision {
    let exempt = if let Some((object, by)) = subject.marked(MANAGED_BY) {
        Some(Exempt::ExternallyManaged {
            object: object.to_string(),
            by: by.to_string(),
        })
    } else {
        subject
            .marked(DELETE_FOR_MOVE)
            .map(|(object, _)| Exempt::Moving {
                object: object.to_string(),
            })
    };
    if let Some(why) = exempt {
        return if subject.holds_finalizer {
            Decision::Release(why)
        } else {
            Decision::Ignore(why)
        };
    }
    // CAPA's IsPaused only asks whether the annotation is there, whatever its value.
    if let Some((object, _)) = subject.marked(PAUSED) {
        return Decision::Wait(Hold::Paused(PausedBy::Annotation(object.to_string())));
    }
    match cluster {
        Some(ClusterState::Paused { name }) => {
            Decision::Wait(Hold::Paused(PausedBy::Cluster(name.clone())))
        }
        Some(ClusterState::Unreadable { name, error }) => Decision::Wait(Hold::ClusterUnreadable {
            cluster: name.clone(),
            error: error.clone(),
        }),
        Some(ClusterState::Running { .. } | ClusterState::Gone { .. } | ClusterState::NoOwner)
        | None => Decision::Act,
    }
}

impl fmt::Display for Exempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exempt::Moving { object } => write!(
                f,
                "{object} is marked for clusterctl move ({DELETE_FOR_MOVE}): the cluster lives on, \
                 managed from another management cluster, and its AWS resources are not touched"
            ),
            Exempt::ExternallyManaged { object, by } => write!(
                f,
                "{object} is externally managed ({MANAGED_BY}={by:?}): its AWS resources belong to \
                 whoever manages it, and sweeper never tears them down"
            ),
        }
    }
}

impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hold::Paused(PausedBy::Cluster(name)) => write!(
                f,
                "Cluster {name} is paused (spec.paused): the AWS teardown waits until it is unpaused"
            ),
            Hold::Paused(PausedBy::Annotation(object)) => write!(
                f,
                "{object} is paused ({PAUSED}): the AWS teardown waits until the annotation is removed"
            ),
            Hold::ClusterUnreadable { cluster, error } => write!(
                f,
                "cannot read Cluster {cluster} to learn whether it is paused: {error}; nothing is \
                 deleted or released until it can be read"
            ),
        }
    }
}

impl Exempt {
    /// A short name of the state, for `sweeper status` and `gc plan`.
    pub fn state(&self) -> &'static str {
        match self {
            Exempt::Moving { .. } => "marked for move",
            Exempt::ExternallyManaged { .. } => "externally managed",
        }
    }

    /// The Event reason when sweeper lets go of the object.
    pub fn reason(&self) -> &'static str {
        match self {
            Exempt::Moving { .. } => "ReleasedForMove",
            Exempt::ExternallyManaged { .. } => "ReleasedExternallyManaged",
        }
    }
}

impl Hold {
    /// A short name of the state, for `sweeper status` and `gc plan`.
    pub fn state(&self) -> &'static str {
        match self {
            Hold::Paused(_) => "paused",
            Hold::ClusterUnreadable { .. } => "cluster unreadable",
        }
    }

    /// The condition's reason (CAPI's own controllers use `Paused` for the same state).
    pub fn reason(&self) -> &'static str {
        match self {
            Hold::Paused(_) => "Paused",
            Hold::ClusterUnreadable { .. } => "ClusterUnreadable",
        }
    }
}

#[cfg(test)]
mod tests;
