//! Phase 2's single discovery result, kind-agnostic: one tagging-API scan (or, with alternative
//! discovery, the cleaners' Describe scans) fills it once per pass, and each phase-2 cleaner reads
//! its own share instead of asking AWS again. What each kind stores is that kind's own type, so a
//! new kind adds no field here and no variant anywhere.

use super::tagging::{TaggedResource, TaggedResources};
use super::tags;
use std::any::{Any, TypeId};
use std::collections::HashMap;

/// Phase 2's resources, each kind's under its own type.
#[derive(Debug, Default)]
pub struct Inventory {
    /// Keyed by the stored type: only the module that defines a type can name it, so one kind
    /// never reads or overwrites another's share by mistake.
    shares: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
    /// Resources reported but never touched (malformed or unrecognised ARNs) and discovery failures.
    pub errors: Vec<String>,
}

impl Inventory {
    /// A discovery that failed as a whole: no kind gets anything, the error keeps the phase open.
    pub fn failed(error: String) -> Self {
        Inventory {
            errors: vec![error],
            ..Default::default()
        }
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

    /// Nothing found and nothing failed.
    pub fn is_empty(&self) -> bool {
        self.shares.is_empty() && self.errors.is_empty()
    }
}

/// The ownership rule phase 2 applies to every resource, whichever kind and whichever discovery:
/// tagged `kubernetes.io/cluster/N=owned` (never `shared`) and not CAPA-owned (phases 1 and 3
/// own those).
#[derive(Clone, Debug)]
pub struct Ownership {
    cloud: String,
    capa: String,
}

impl Ownership {
    pub fn of(cluster: &str) -> Self {
        Ownership {
            cloud: tags::cloud_key(cluster),
            capa: tags::capa_key(cluster),
        }
    }

    /// The tag key the cloud provider marks the cluster's resources with.
    pub fn cloud_key(&self) -> &str {
        &self.cloud
    }

    /// True when CAPA owns it: phases 1 and 3 clean it, phase 2 must not.
    pub fn capa_owned<'a>(&self, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
        tags::is_owned(pairs, &self.capa)
    }

    /// True when phase 2 may clean a resource with these tags.
    pub fn ours<'a>(&self, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
        let pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
        tags::is_owned(pairs.iter().copied(), &self.cloud) && !self.capa_owned(pairs)
    }
}

/// The tagging-API result narrowed to what phase 2 may clean, plus one error per malformed ARN
/// (reported, never touched). Pure, so the filtering is unit-tested.
pub fn owned_tagged(found: TaggedResources, own: &Ownership) -> (Vec<TaggedResource>, Vec<String>) {
    let errors = found
        .malformed
        .into_iter()
        .map(|bad| format!("{bad}; not touched"))
        .collect();
    // The API filtered on the tag already; checking again costs nothing and guards against a
    // filter that matched more than the exact key and value.
    let ours = found
        .resources
        .into_iter()
        .filter(|r| own.ours(r.tags.iter().map(|(k, v)| (k.as_str(), v.as_str()))))
        .collect();
    (ours, errors)
}

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
