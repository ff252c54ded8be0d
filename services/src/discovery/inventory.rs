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
    /// Resources reported but never touched (malformed or unrecognised ARNs).
    pub errors: Vec<String>,
    /// The discovery failed as a whole (see [`Inventory::failed`]).
    pub failure: Option<crate::model::Failure>,
    /// Resources outside the session's partition, region or account (see `scope::Scope`):
    /// ignored, never claimed by any kind.
    pub foreign: Vec<String>,
    /// The tags discovery read, by ARN and by resource id (cleaners name targets either way),
    /// for the audit trail.
    tags: HashMap<String, std::collections::BTreeMap<String, String>>,
}

impl Inventory {
    /// A discovery that failed as a whole: no kind gets anything, the error keeps the phase open.
    pub fn failed(failure: crate::model::Failure) -> Self {
        Inventory {
            failure: Some(failure),
            ..Default::default()
        }
    }

    /// What a phase reports of it: the failure of the whole discovery, then the resources it
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
    pub fn record_tags(&mut self, r: &crate::discovery::tagging::TaggedResource) {
        self.tags.insert(r.arn.to_string(), r.tags.clone());
        self.tags
            .insert(r.arn.resource_id().to_string(), r.tags.clone());
    }

    /// The tags discovery read for a target id (an ARN or a resource id).
    pub fn tags_of(&self, id: &str) -> Option<&std::collections::BTreeMap<String, String>> {
        self.tags.get(id)
    }

    /// Nothing found and nothing failed.
    pub fn is_empty(&self) -> bool {
        self.shares.is_empty() && self.errors.is_empty() && self.failure.is_none()
    }
}

/// The ownership rule phase 2 applies to every resource, whichever kind and whichever discovery:
/// never CAPA-owned (phases 1 and 3 own those), and either tagged `kubernetes.io/cluster/N=owned`
/// (never `shared`), or tagged for cluster `N` by a controller that does not use that tag (the AWS
/// Load Balancer Controller's `elbv2.k8s.aws/cluster=N`, the VPC CNI's
/// `cluster.k8s.amazonaws.com/name=N`) *and* in one of the cluster's VPCs: those tags name a
/// cluster, not an account, so another cluster of the same name elsewhere is not ours.
#[derive(Clone, Debug)]
pub struct Ownership {
    cloud: String,
    capa: String,
    cluster: String,
    /// The cluster's VPCs (its object's `spec.network.vpc.id`, the CAPA-tagged VPC). Empty:
    /// nothing found by a controller tag is confirmed, so none of it is touched.
    vpcs: Vec<String>,
}

impl Ownership {
    pub fn of(cluster: &str) -> Self {
        Ownership {
            cloud: tags::cloud_key(cluster),
            capa: tags::capa_key(cluster),
            cluster: cluster.to_string(),
            vpcs: Vec::new(),
        }
    }

    /// The same rule for a cluster whose CAPA-owned resources carry another name (EKS: CAPA
    /// tags with the Cluster API name, the cloud provider with the EKS name).
    pub fn with_capa_name(mut self, capa_name: &str) -> Self {
        self.capa = tags::capa_key(capa_name);
        self
    }

    /// The same rule, with the VPCs that confirm a controller-tagged resource.
    pub fn with_vpcs(mut self, vpcs: Vec<String>) -> Self {
        self.vpcs = vpcs;
        self
    }

    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    pub fn vpcs(&self) -> &[String] {
        &self.vpcs
    }

    /// Tagged for this cluster by the LB controller or the VPC CNI (not CAPA-owned).
    pub fn controller_tagged<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> bool {
        let pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
        (tags::has(pairs.iter().copied(), tags::LBC_CLUSTER_TAG, &self.cluster)
            || tags::has(pairs.iter().copied(), tags::CNI_CLUSTER_TAG, &self.cluster))
            && !self.capa_owned(pairs)
    }

    /// True when `vpc` is one of the cluster's.
    pub fn in_vpcs(&self, vpc: Option<&str>) -> bool {
        vpc.is_some_and(|v| self.vpcs.iter().any(|w| w == v))
    }

    /// The whole rule, for a resource whose tags and VPC are known.
    pub fn accepts<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        vpc: Option<&str>,
    ) -> bool {
        let pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
        self.ours(pairs.iter().copied())
            || (self.controller_tagged(pairs.iter().copied()) && self.in_vpcs(vpc))
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
    fn controller_tags_count_only_in_the_clusters_vpcs() {
        let own = Ownership::of("c1").with_vpcs(vec!["vpc-1".into()]);
        let lbc = [("elbv2.k8s.aws/cluster", "c1")];
        let cni = [("cluster.k8s.amazonaws.com/name", "c1")];
        let cloud = [("kubernetes.io/cluster/c1", "owned")];
        assert!(own.accepts(lbc, Some("vpc-1")));
        assert!(own.accepts(cni, Some("vpc-1")));
        assert!(!own.accepts(lbc, Some("vpc-2")), "same name, another VPC");
        assert!(!own.accepts(lbc, None));
        assert!(!own.accepts([("elbv2.k8s.aws/cluster", "c1-b")], Some("vpc-1")));
        assert!(own.accepts(cloud, None), "the cluster tag needs no VPC");
        let capa = [
            ("elbv2.k8s.aws/cluster", "c1"),
            ("sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "owned"),
        ];
        assert!(
            !own.accepts(capa, Some("vpc-1")),
            "CAPA's is never phase 2's"
        );
        assert!(
            !Ownership::of("c1").accepts(lbc, Some("vpc-1")),
            "no known VPC: nothing confirmed"
        );
    }

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
