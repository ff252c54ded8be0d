//! What the graph keeps per object: about 90 bytes plus the name, instead of the full metadata.

use super::kinds::KindId;
use super::uid::Uid;
use std::sync::Arc;

pub type NodeIdx = u32;
pub type NsId = u32;
/// `NsId` of cluster-scoped objects.
pub const CLUSTER: NsId = 0;

pub mod flag {
    /// Seen through a watch. Without it the node is virtual: only referenced as an owner.
    pub const OBSERVED: u8 = 1;
    /// `metadata.deletionTimestamp` is set.
    pub const DELETING: u8 = 2;
    /// Has the `foregroundDeletion` finalizer.
    pub const FOREGROUND: u8 = 4;
    /// Has the `orphan` finalizer.
    pub const ORPHAN: u8 = 8;
    /// Has sweeper's `sweeper.dev/cascade-complete` finalizer.
    pub const CASCADE_COMPLETE: u8 = 16;
    /// A virtual node known gone: the stand-in of a deleted object, or an owner a live lookup
    /// found absent. Kept in the node, not only in the bounded absent-owner cache, so a
    /// dependent linked under it later is classified without a lookup however long it lagged.
    /// Cleared when the uid is observed again.
    pub const ABSENT: u8 = 32;
}

pub mod link_flag {
    pub const CONTROLLER: u8 = 1;
    pub const BLOCK_OWNER_DELETION: u8 = 2;
}

/// One `metadata.ownerReferences` entry, kept whole so owner references can be rewritten
/// (orphaning, removing dangling owners) without reading the object again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerLink {
    pub uid: Uid,
    pub name: Arc<str>,
    pub kind: KindId,
    pub flags: u8,
}

impl OwnerLink {
    pub fn blocks(&self) -> bool {
        self.flags & link_flag::BLOCK_OWNER_DELETION != 0
    }
    pub fn controller(&self) -> bool {
        self.flags & link_flag::CONTROLLER != 0
    }
}

#[derive(Clone, Debug)]
pub struct Node {
    pub uid: Uid,
    pub name: Arc<str>,
    pub namespace: NsId,
    pub kind: KindId,
    pub flags: u8,
    /// etcd resource versions are integers; 0 when unknown (then no resourceVersion precondition).
    pub resource_version: u64,
    pub owners: Box<[OwnerLink]>,
    pub dependents: Vec<NodeIdx>,
}

impl Node {
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
    pub fn observed(&self) -> bool {
        self.has(flag::OBSERVED)
    }
    /// A virtual node known gone (see [`flag::ABSENT`]).
    pub fn known_absent(&self) -> bool {
        !self.observed() && self.has(flag::ABSENT)
    }
    /// Foreground deletion in progress: deleting and still holding `foregroundDeletion`.
    pub fn deleting_dependents(&self) -> bool {
        self.has(flag::DELETING) && self.has(flag::FOREGROUND)
    }
    /// Orphan deletion in progress.
    pub fn orphaning(&self) -> bool {
        self.has(flag::DELETING) && self.has(flag::ORPHAN)
    }
    /// Background deletion held open by our `cascade-complete` finalizer: for its dependents the
    /// owner counts as gone (otherwise the finalizer and the dependents would wait on each other).
    pub fn completing_cascade(&self) -> bool {
        self.has(flag::DELETING)
            && self.has(flag::CASCADE_COMPLETE)
            && !self.has(flag::FOREGROUND)
            && !self.has(flag::ORPHAN)
    }
}

/// Metadata as the watchers hand it to the graph writer: only what the collectors use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaLite {
    pub uid: Uid,
    /// The uid text when it is not a canonical UUID (kept for preconditions).
    pub odd_uid: Option<String>,
    pub name: String,
    pub namespace: Option<String>,
    pub resource_version: u64,
    pub flags: u8,
    pub owners: Vec<OwnerRefLite>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerRefLite {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: Uid,
    pub controller: bool,
    pub block_owner_deletion: bool,
}
