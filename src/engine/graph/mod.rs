//! The dependency graph: one node per object (UID-keyed), owner -> dependents edges, virtual
//! nodes for owners not observed yet. Mutated only by the graph writer; read by workers and the
//! query API under a read lock. Every mutation returns the work it makes necessary, so the
//! writer's logic is a pure function of events and can be unit-tested without a cluster.

pub mod kinds;
pub mod node;
pub mod uid;

use kinds::{KindId, Kinds};
use node::{CLUSTER, MetaLite, Node, NodeIdx, NsId, OwnerLink, flag, link_flag};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use uid::Uid;

/// Work the graph asks the workers to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Work {
    /// Classify this object's owners and delete it, rewrite its owner references, or (for an
    /// owner) finish a foreground / cascade-complete deletion; verify it if virtual.
    AttemptToDelete(Uid),
    /// Remove the owner reference to this object from all its dependents, then its `orphan` finalizer.
    AttemptToOrphan(Uid),
}

#[derive(Default)]
pub struct Graph {
    pub kinds: Kinds,
    nodes: Vec<Option<Node>>,
    free: Vec<NodeIdx>,
    index: HashMap<Uid, NodeIdx>,
    namespaces: Vec<Arc<str>>,
    ns_index: HashMap<Arc<str>, NsId>,
    /// Text of uids that are not canonical UUIDs (rare; test fixtures, odd clients).
    odd_uids: HashMap<Uid, Box<str>>,
    /// Set while the collector takes in its first lists, before any worker runs. Nothing has
    /// been classified yet, so a virtual owner that turns out to exist needs none of its
    /// dependents re-classified (only those whose reference does not match it). Without this, a
    /// start-up whose lists bring dependents before their owners queued every such dependent
    /// once more: ~100,000 re-checks ahead of the first real work in a 100k-object cluster.
    initial_sync: bool,
}

impl Graph {
    pub fn new() -> Self {
        let mut g = Graph::default();
        g.namespaces.push(Arc::from("")); // NsId 0 = cluster-scoped
        g
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Marks the start (true) or the end (false) of the initial sync: see `initial_sync`. The
    /// end must be marked before the first worker starts.
    pub fn set_initial_sync(&mut self, on: bool) {
        self.initial_sync = on;
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn observed_count(&self) -> usize {
        self.iter().filter(|n| n.observed()).count()
    }

    pub fn get(&self, uid: &Uid) -> Option<&Node> {
        self.index.get(uid).and_then(|&i| self.at(i))
    }

    fn at(&self, i: NodeIdx) -> Option<&Node> {
        self.nodes.get(i as usize).and_then(Option::as_ref)
    }

    fn at_mut(&mut self, i: NodeIdx) -> Option<&mut Node> {
        self.nodes.get_mut(i as usize).and_then(Option::as_mut)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter_map(Option::as_ref)
    }

    pub fn dependents<'a>(&'a self, node: &'a Node) -> impl Iterator<Item = &'a Node> + 'a {
        node.dependents.iter().filter_map(|&i| self.at(i))
    }

    pub fn namespace(&self, id: NsId) -> Option<&str> {
        (id != CLUSTER).then(|| self.namespaces.get(id as usize).map(|s| &**s))?
    }

    /// The uid as the API server spells it.
    pub fn uid_text(&self, uid: &Uid) -> String {
        self.odd_uids
            .get(uid)
            .map(|s| s.to_string())
            .unwrap_or_else(|| uid.to_string())
    }

    pub fn remember_odd_uid(&mut self, uid: Uid, text: Option<&str>) {
        if let Some(t) = text {
            self.odd_uids.insert(uid, t.into());
        }
    }

    fn ns_id(&mut self, ns: Option<&str>) -> NsId {
        let Some(ns) = ns.filter(|s| !s.is_empty()) else {
            return CLUSTER;
        };
        if let Some(&id) = self.ns_index.get(ns) {
            return id;
        }
        let s: Arc<str> = Arc::from(ns);
        let id = self.namespaces.len() as NsId;
        self.namespaces.push(s.clone());
        self.ns_index.insert(s, id);
        id
    }

    fn insert(&mut self, node: Node) -> NodeIdx {
        let uid = node.uid;
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = Some(node);
                i
            }
            None => {
                self.nodes.push(Some(node));
                (self.nodes.len() - 1) as NodeIdx
            }
        };
        self.index.insert(uid, i);
        i
    }

    /// Adds `dep` to the dependents of each of `owners`, creating virtual owners as needed.
    fn link(&mut self, dep: NodeIdx, owners: &[OwnerLink], ns: NsId, work: &mut Vec<Work>) {
        for o in owners {
            let oi = match self.index.get(&o.uid) {
                Some(&i) => {
                    // A virtual owner known gone (a stand-in left by its deletion, its other
                    // dependents still pointing at it): a dependent that shows up under it now,
                    // its watch lagging the owner's, is classified at once, or it would wait for
                    // an event that already happened. Only the dependent: the owner's other
                    // dependents were queued when it went. A virtual owner not known gone is
                    // being verified, and that verification queues every dependent it has.
                    if self.at(i).is_some_and(Node::known_absent) {
                        work.push(Work::AttemptToDelete(self.uid_at(dep)));
                    }
                    i
                }
                None => {
                    // Never seen: a virtual node, verified by a worker with a live lookup.
                    let i = self.insert(Node {
                        uid: o.uid,
                        name: o.name.clone(),
                        namespace: ns,
                        kind: o.kind,
                        flags: 0,
                        resource_version: 0,
                        owners: Box::new([]),
                        dependents: Vec::new(),
                    });
                    work.push(Work::AttemptToDelete(o.uid));
                    i
                }
            };
            let dep_uid = self.uid_at(dep);
            let mismatch = self
                .at(oi)
                .is_some_and(|owner| self.names_other(owner, o, ns));
            if let Some(owner) = self.at_mut(oi) {
                if !owner.dependents.contains(&dep) {
                    owner.dependents.push(dep);
                }
                // A dependent appearing under an owner that is already collecting its dependents
                // must be collected too (or, for foreground, waited for).
                if owner.deleting_dependents() || owner.completing_cascade() {
                    work.push(Work::AttemptToDelete(o.uid));
                }
                // A reference that does not match the observed owner is invalid: the dependent
                // is classified now.
                if mismatch {
                    work.push(Work::AttemptToDelete(dep_uid));
                }
            }
        }
    }

    /// Whether `link`, a reference held by a dependent in `dep_ns`, names something other than
    /// the observed `owner` under the same uid: another kind, name or namespace.
    fn names_other(&self, owner: &Node, link: &OwnerLink, dep_ns: NsId) -> bool {
        owner.observed()
            && (!self.kinds.same_group_kind(owner.kind, link.kind)
                || *owner.name != *link.name
                || (dep_ns != CLUSTER && owner.namespace != CLUSTER && owner.namespace != dep_ns))
    }

    fn unlink(&mut self, dep: NodeIdx, owners: &[OwnerLink], work: &mut Vec<Work>) {
        for o in owners {
            let Some(&oi) = self.index.get(&o.uid) else {
                continue;
            };
            let mut drop_virtual = false;
            if let Some(owner) = self.at_mut(oi) {
                owner.dependents.retain(|&d| d != dep);
                if owner.deleting_dependents() || owner.completing_cascade() {
                    work.push(Work::AttemptToDelete(o.uid));
                }
                drop_virtual = !owner.observed() && owner.dependents.is_empty();
            }
            if drop_virtual {
                // A virtual node exists only for its dependents.
                self.remove_slot(o.uid);
            }
        }
    }

    fn remove_slot(&mut self, uid: Uid) -> Option<Node> {
        let i = self.index.remove(&uid)?;
        self.odd_uids.remove(&uid);
        let node = self.nodes.get_mut(i as usize)?.take();
        self.free.push(i);
        node
    }

    /// The object's owner references as graph links, kinds interned and names shared with the
    /// owner's node when it is already known.
    fn owner_links(&mut self, meta: &MetaLite) -> Box<[OwnerLink]> {
        meta.owners
            .iter()
            .map(|o| OwnerLink {
                uid: o.uid,
                name: self
                    .get(&o.uid)
                    .filter(|n| *n.name == o.name)
                    .map(|n| n.name.clone())
                    .unwrap_or_else(|| Arc::from(o.name.as_str())),
                kind: self.kinds.intern(&o.api_version, &o.kind),
                flags: (if o.controller {
                    link_flag::CONTROLLER
                } else {
                    0
                }) | (if o.block_owner_deletion {
                    link_flag::BLOCK_OWNER_DELETION
                } else {
                    0
                }),
            })
            .collect()
    }

    /// An add or update seen by a watch on `kind`.
    pub fn apply(&mut self, kind: KindId, meta: &MetaLite) -> Vec<Work> {
        let mut work = Vec::new();
        let ns = self.ns_id(meta.namespace.as_deref());
        let owners = self.owner_links(meta);
        self.remember_odd_uid(meta.uid, meta.odd_uid.as_deref());
        let new_flags = meta.flags | flag::OBSERVED;

        let Some(&i) = self.index.get(&meta.uid) else {
            let i = self.insert(Node {
                uid: meta.uid,
                name: Arc::from(meta.name.as_str()),
                namespace: ns,
                kind,
                flags: new_flags,
                resource_version: meta.resource_version,
                owners: owners.clone(),
                dependents: Vec::new(),
            });
            self.link(i, &owners, ns, &mut work);
            transitions(0, new_flags, meta.uid, &mut work);
            return work;
        };

        let (old_flags, old_owners) = self.observe(i, kind, ns, meta, new_flags, owners.clone());
        if old_flags & flag::OBSERVED == 0 {
            self.recheck_dependents_of_found(i, meta.uid, &mut work);
        }
        if *old_owners != *owners {
            self.relink_owners(i, ns, meta.uid, &old_owners, &owners, &mut work);
        }
        transitions(old_flags, new_flags, meta.uid, &mut work);
        if new_flags & flag::DELETING != 0 && old_flags & flag::DELETING == 0 {
            self.enqueue_dependents(i, &mut work);
        }
        work
    }

    /// Writes what a watch saw into the node at `i`; returns its flags and owners before.
    fn observe(
        &mut self,
        i: NodeIdx,
        kind: KindId,
        ns: NsId,
        meta: &MetaLite,
        new_flags: u8,
        owners: Box<[OwnerLink]>,
    ) -> (u8, Box<[OwnerLink]>) {
        let node = self.at_mut(i).expect("indexed node exists");
        let old = (node.flags, std::mem::take(&mut node.owners));
        node.flags = new_flags;
        node.resource_version = meta.resource_version;
        if old.0 & flag::OBSERVED == 0 {
            // A virtual node's identity came from a dependent's reference; the object's own is right.
            node.name = Arc::from(meta.name.as_str());
            node.namespace = ns;
            node.kind = kind;
        }
        node.owners = owners;
        old
    }

    /// An owner that was virtual is observed: a dependent classified while it was pending is
    /// decided again now that it exists; during the initial sync none was, and only a reference
    /// that does not match the object found is.
    fn recheck_dependents_of_found(&self, i: NodeIdx, uid: Uid, work: &mut Vec<Work>) {
        let owner = self.at(i).expect("indexed node exists");
        for &d in &owner.dependents {
            let Some(dep) = self.at(d) else { continue };
            let recheck = !self.initial_sync
                || dep
                    .owners
                    .iter()
                    .filter(|l| l.uid == uid)
                    .any(|l| self.names_other(owner, l, dep.namespace));
            if recheck {
                work.push(Work::AttemptToDelete(dep.uid));
            }
        }
    }

    /// The node at `i` changed owner references from `old_owners` to `owners`: the removed
    /// links go (their owners re-examined), the added ones are linked and the node is examined.
    fn relink_owners(
        &mut self,
        i: NodeIdx,
        ns: NsId,
        uid: Uid,
        old_owners: &[OwnerLink],
        owners: &[OwnerLink],
        work: &mut Vec<Work>,
    ) {
        let removed: Vec<OwnerLink> = old_owners
            .iter()
            .filter(|o| !owners.iter().any(|n| n.uid == o.uid && n.flags == o.flags))
            .cloned()
            .collect();
        let added: Vec<OwnerLink> = owners
            .iter()
            .filter(|n| !old_owners.iter().any(|o| o.uid == n.uid))
            .cloned()
            .collect();
        // `removed` includes links whose flags changed (e.g. blockOwnerDeletion cleared): the
        // owner is re-examined; the link itself is re-added just below when still present.
        self.unlink(i, &removed, work);
        let relink: Vec<OwnerLink> = owners
            .iter()
            .filter(|n| removed.iter().any(|r| r.uid == n.uid) || added.contains(n))
            .cloned()
            .collect();
        self.link(i, &relink, ns, work);
        if !added.is_empty() {
            work.push(Work::AttemptToDelete(uid));
        }
    }

    fn uid_at(&self, i: NodeIdx) -> Uid {
        self.at(i).map(|n| n.uid).unwrap_or_default()
    }

    fn enqueue_dependents(&self, i: NodeIdx, work: &mut Vec<Work>) {
        if let Some(n) = self
            .at(i)
            .filter(|n| n.deleting_dependents() || n.completing_cascade())
        {
            work.extend(
                n.dependents
                    .iter()
                    .map(|&d| Work::AttemptToDelete(self.uid_at(d))),
            );
        }
    }

    /// A delete seen by a watch (or a relist that no longer shows the object).
    /// Returns the work and whether the node existed.
    pub fn remove(&mut self, uid: &Uid) -> Vec<Work> {
        let mut work = Vec::new();
        let Some(&i) = self.index.get(uid) else {
            return work;
        };
        let Some(node) = self.at(i).cloned() else {
            return work;
        };
        for &d in &node.dependents {
            work.push(Work::AttemptToDelete(self.uid_at(d)));
        }
        self.unlink(i, &node.owners, &mut work);
        if node.dependents.is_empty() {
            self.remove_slot(*uid);
        } else if let Some(n) = self.at_mut(i) {
            // Keep a virtual stand-in while dependents still point here, so they stay queryable;
            // its ABSENT flag tells workers it is gone.
            n.flags = flag::ABSENT;
            n.owners = Box::new([]);
        }
        work
    }

    /// A worker verified that a virtual node's object does not exist (404 or another uid).
    /// Its dependents are queued once: a node already known absent returns no work.
    pub fn virtual_absent(&mut self, uid: &Uid) -> Vec<Work> {
        let Some(&i) = self.index.get(uid) else {
            return Vec::new();
        };
        match self.at_mut(i) {
            Some(n) if !n.observed() && !n.has(flag::ABSENT) => {
                n.flags |= flag::ABSENT;
            }
            _ => return Vec::new(),
        }
        let n = self.at(i).expect("indexed node exists");
        n.dependents
            .iter()
            .map(|&d| Work::AttemptToDelete(self.uid_at(d)))
            .collect()
    }

    /// After a relist of `kind` (matched by group and kind): observed nodes not in `seen` were
    /// deleted while the watch was down.
    pub fn resync(&mut self, kind: KindId, seen: &HashSet<Uid>) -> (Vec<Uid>, Vec<Work>) {
        let gone: Vec<Uid> = self
            .iter()
            .filter(|n| {
                n.observed() && self.kinds.same_group_kind(n.kind, kind) && !seen.contains(&n.uid)
            })
            .map(|n| n.uid)
            .collect();
        let mut work = Vec::new();
        for uid in &gone {
            work.extend(self.remove(uid));
        }
        (gone, work)
    }

    /// Objects of `group`/`kind` in `namespace` (None = cluster-scoped) named `name`.
    pub fn find(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<&Node> {
        self.iter().find(|n| {
            let info = self.kinds.info(n.kind);
            n.observed()
                && &*n.name == name
                && info.kind == kind
                && info.group == group
                && self.namespace(n.namespace) == namespace.filter(|s| !s.is_empty())
        })
    }
}

/// Work implied by a node's own flag changes (upstream's processTransitions).
fn transitions(old: u8, new: u8, uid: Uid, work: &mut Vec<Work>) {
    let deleting = new & flag::DELETING != 0;
    let was_orphaning = old & flag::DELETING != 0 && old & flag::ORPHAN != 0;
    if deleting && new & flag::ORPHAN != 0 && !was_orphaning {
        work.push(Work::AttemptToOrphan(uid));
    }
    if deleting && new & (flag::FOREGROUND | flag::CASCADE_COMPLETE) != 0 {
        // Re-examined on every update: cheap (the queue deduplicates) and it is how a finished
        // foreground or cascade-complete deletion gets its finalizer removed.
        work.push(Work::AttemptToDelete(uid));
    }
}

#[cfg(test)]
mod tests;
