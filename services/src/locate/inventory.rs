//! Phase 2's single locate result, kind-agnostic: one tagging-API scan (or, with alternative
//! discovery, the cleaners' Describe scans) fills it once per pass, and each phase-2 cleaner reads
//! its own share instead of asking AWS again. What each kind stores is that kind's own type, so a
//! new kind adds no field here and no variant anywhere.

use super::tagging::{TaggedResource, TaggedResources};
use crate::policy::Ownership;
use std::any::{Any, TypeId};
use std::collections::HashMap;

/// Phase 2's resources, each kind's under its own type.
#[derive(Debug, Default)]
pub struct Inventory {
    /// Keyed by the stored type: only the module that defines a type can name it, so one kind
    /// never reads or overwrites another's share by mistake.
    shares: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
    /// Resources reported but never touched (malformed or unrecognised ARNs).
    pub errors: Vec<String>,
    /// The locate step failed as a whole (see [`Inventory::failed`]).
    pub failure: Option<crate::model::Failure>,
    /// Resources outside the session's partition, region or account (see `scope::Scope`):
    /// ignored, never claimed by any kind.
    pub foreign: Vec<String>,
    /// The tags locating read, by ARN and by resource id (cleaners name targets either way),
    /// for the audit trail.
    tags: HashMap<String, std::collections::BTreeMap<String, String>>,
}

impl Inventory {
    /// A locate step that failed as a whole: no kind gets anything, the error keeps the phase open.
    pub fn failed(failure: crate::model::Failure) -> Self {
        Inventory {
            failure: Some(failure),
            ..Default::default()
        }
    }

    /// What a phase reports of it: the failure of the whole locating, then the resources it
    /// could not handle (whose text names no cause: `Other`).
    pub fn failures(&self) -> impl Iterator<Item = crate::model::Failure> + '_ {
        self.failure.iter().cloned().chain(
            self.errors
                .iter()
                .map(|e| crate::model::Failure::from(e.as_str())),
        )
    }

    /// The share stored under `T`, if any kind stored one.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.shares
            .get(&TypeId::of::<T>())
            .and_then(|b| b.downcast_ref::<T>())
    }

    /// The share under `T`, created empty on first use.
    pub fn share_mut<T: Any + Send + Sync + Default>(&mut self) -> &mut T {
        let slot = self
            .shares
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Box::new(T::default()));
        // Keyed by T's own TypeId, so the box always holds a T: this cannot fail.
        slot.downcast_mut::<T>()
            .unwrap_or_else(|| unreachable!("inventory share stored under another type's id"))
    }

    /// Stores `value` as the share under `T`, replacing any.
    pub fn put<T: Any + Send + Sync>(&mut self, value: T) {
        self.shares.insert(TypeId::of::<T>(), Box::new(value));
    }

    /// Remembers `r`'s tags for the audit trail of whatever cleaner deletes it.
    pub fn record_tags(&mut self, r: &crate::locate::tagging::TaggedResource) {
        self.tags.insert(r.arn.to_string(), r.tags.clone());
        self.tags
            .insert(r.arn.resource_id().to_string(), r.tags.clone());
    }

    /// The tags locating read for a target id (an ARN or a resource id).
    pub fn tags_of(&self, id: &str) -> Option<&std::collections::BTreeMap<String, String>> {
        self.tags.get(id)
    }

    /// Nothing found and nothing failed.
    pub fn is_empty(&self) -> bool {
        self.shares.is_empty() && self.errors.is_empty() && self.failure.is_none()
    }
}

/// The tagging-API result sorted for phase 2: what it may clean as found (the cluster tag), the
/// candidates a controller tagged for the cluster (theirs only once their VPC is confirmed,
/// `placement::confirm`), and one error per malformed ARN (reported, never touched). Everything
/// else, CAPA's included, is dropped. Pure, so the filtering is unit-tested.
pub fn owned_tagged(found: TaggedResources, own: &Ownership) -> Tagged3 {
    let errors = found
        .malformed
        .into_iter()
        .map(|bad| format!("{bad}; not touched"))
        .collect();
    // The API filtered on the tag already; checking again costs nothing and guards against a
    // filter that matched more than the exact key and value.
    let mut ours = Vec::new();
    let mut candidates = Vec::new();
    for r in found.resources {
        let pairs = || r.tags.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        if own.ours(pairs()) {
            ours.push(r);
        } else if own.controller_tagged(pairs()) {
            candidates.push(r);
        }
    }
    (ours, candidates, errors)
}

/// (ours, candidates to confirm, errors): see [`owned_tagged`].
pub type Tagged3 = (Vec<TaggedResource>, Vec<TaggedResource>, Vec<String>);

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq)]
    struct A(Vec<u32>);
    #[derive(Debug, Default, PartialEq)]
    struct B(Vec<u32>);

    #[test]
    fn each_kind_reads_only_its_own_share() {
        let mut inv = Inventory::default();
        assert!(inv.is_empty());
        inv.share_mut::<A>().0.push(1);
        inv.share_mut::<A>().0.push(2);
        assert_eq!(inv.get::<A>(), Some(&A(vec![1, 2])));
        assert_eq!(inv.get::<B>(), None);
        assert!(!inv.is_empty());
    }
}
