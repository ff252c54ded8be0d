//! Phase 2's ownership rule, the one every phase-2 kind starts from, whichever locating found
//! the resource (tagging API or Describe calls): never CAPA-owned (phases 1 and 3 own those), and
//! either tagged `kubernetes.io/cluster/N=owned` (never `shared`), or tagged for cluster `N` by a
//! controller that does not use that tag (the AWS Load Balancer Controller's
//! `elbv2.k8s.aws/cluster=N`, the VPC CNI's `cluster.k8s.amazonaws.com/name=N`) *and* in one of
//! the cluster's VPCs: those tags name a cluster, not an account, so another cluster of the same
//! name elsewhere is not ours.

use super::tags;
use super::{Candidate, Verdict};

/// Who the cluster is, as phase 2's rule needs it: its names in tags and its VPCs.
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

    /// The tag key the cloud provider marks the cluster's resources with.
    pub fn cloud_key(&self) -> &str {
        &self.cloud
    }

    /// Phase 2's verdict on one resource (see the module doc).
    pub fn decide(&self, c: &Candidate<'_>) -> Verdict {
        let pairs = || c.tags.iter().copied();
        if self.capa_owned(pairs()) {
            return Verdict::keep("CAPA-owned: phase 1 or 3 deletes it");
        }
        if tags::is_owned(pairs(), &self.cloud) {
            return Verdict::Delete;
        }
        if self.names_cluster(c.tags) {
            return if self.in_vpcs(c.vpc) {
                Verdict::Delete
            } else {
                Verdict::foreign("a controller's tag names the cluster, outside the cluster's VPCs")
            };
        }
        if tags::has(pairs(), &self.cloud, tags::SHARED) {
            return Verdict::foreign("tagged shared with the cluster, not owned");
        }
        Verdict::foreign("not tagged for the cluster")
    }

    /// The whole rule, for a resource whose tags and VPC are known: [`Ownership::decide`] says
    /// Delete.
    pub fn accepts<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        vpc: Option<&str>,
    ) -> bool {
        let tags: Vec<(&str, &str)> = pairs.into_iter().collect();
        self.decide(&Candidate { tags: &tags, vpc }).is_delete()
    }

    /// Phase 2's without a VPC to confirm anything: the cluster tag, never CAPA's.
    pub fn ours<'a>(&self, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
        self.accepts(pairs, None)
    }

    /// Tagged for this cluster by the LB controller or the VPC CNI (not CAPA-owned): a
    /// candidate until its VPC is known (`locate::placement` confirms it).
    pub fn controller_tagged<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> bool {
        let pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
        self.names_cluster(&pairs) && !self.capa_owned(pairs)
    }

    /// True when `vpc` is one of the cluster's.
    pub fn in_vpcs(&self, vpc: Option<&str>) -> bool {
        vpc.is_some_and(|v| self.vpcs.iter().any(|w| w == v))
    }

    /// True when CAPA owns it: phases 1 and 3 clean it, phase 2 must not.
    pub fn capa_owned<'a>(&self, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
        tags::is_owned(pairs, &self.capa)
    }

    /// A controller's tag names the cluster (the LB controller's or the VPC CNI's).
    fn names_cluster(&self, pairs: &[(&str, &str)]) -> bool {
        tags::has(pairs.iter().copied(), tags::LBC_CLUSTER_TAG, &self.cluster)
            || tags::has(pairs.iter().copied(), tags::CNI_CLUSTER_TAG, &self.cluster)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    const LBC: (&str, &str) = ("elbv2.k8s.aws/cluster", "c1");
    const CNI: (&str, &str) = ("cluster.k8s.amazonaws.com/name", "c1");
    const CLOUD: (&str, &str) = ("kubernetes.io/cluster/c1", "owned");
    const CAPA: (&str, &str) = ("sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "owned");

    #[test]
    fn phase_two_takes_the_cluster_tag_and_controller_tags_only_in_the_clusters_vpcs() {
        let own = Ownership::of("c1").with_vpcs(vec!["vpc-1".into()]);
        let d = |tags: &[(&str, &str)], vpc| own.decide(&Candidate { tags, vpc });
        let no_vpcs = Ownership::of("c1");
        let eks = Ownership::of("eks-c1").with_capa_name("c1");
        let eks_cloud = ("kubernetes.io/cluster/eks-c1", "owned");
        table::check(&[
            (
                d(&[LBC], Some("vpc-1")),
                Delete,
                "the LB controller's, in the VPC",
            ),
            (
                d(&[CNI], Some("vpc-1")),
                Delete,
                "the VPC CNI's, in the VPC",
            ),
            (d(&[LBC], Some("vpc-2")), Foreign, "same name, another VPC"),
            (d(&[LBC], None), Foreign, "a controller's tag, VPC unknown"),
            (
                d(&[("elbv2.k8s.aws/cluster", "c1-b")], Some("vpc-1")),
                Foreign,
                "a name extending ours",
            ),
            (d(&[CLOUD], None), Delete, "the cluster tag needs no VPC"),
            (
                d(&[("kubernetes.io/cluster/c1", "shared")], None),
                Foreign,
                "shared is not owned",
            ),
            (
                d(&[("kubernetes.io/cluster/c1-b", "owned")], None),
                Foreign,
                "another cluster's tag",
            ),
            (
                d(&[LBC, CAPA], Some("vpc-1")),
                Keep,
                "CAPA's is never phase 2's",
            ),
            (
                d(&[CLOUD, CAPA], None),
                Keep,
                "CAPA's, whatever else it carries",
            ),
            (d(&[], Some("vpc-1")), Foreign, "untagged, in the VPC"),
            (
                no_vpcs.decide(&Candidate {
                    tags: &[LBC],
                    vpc: Some("vpc-1"),
                }),
                Foreign,
                "no known VPC: nothing confirmed",
            ),
            (
                eks.decide(&Candidate {
                    tags: &[eks_cloud],
                    vpc: None,
                }),
                Delete,
                "EKS: the cloud provider's name",
            ),
            (
                eks.decide(&Candidate {
                    tags: &[eks_cloud, CAPA],
                    vpc: None,
                }),
                Keep,
                "EKS: CAPA's, by the Cluster API name",
            ),
        ]);
    }

    #[test]
    fn the_predicates_discovery_uses_agree_with_the_verdict() {
        let own = Ownership::of("c1").with_vpcs(vec!["vpc-1".into()]);
        assert!(own.ours([CLOUD]));
        assert!(
            !own.ours([LBC]),
            "a controller's tag alone waits for its VPC"
        );
        assert!(own.controller_tagged([LBC]) && own.controller_tagged([CNI]));
        assert!(!own.controller_tagged([LBC, CAPA]));
        assert!(own.accepts([LBC], Some("vpc-1")) && !own.accepts([LBC], Some("vpc-2")));
    }
}
