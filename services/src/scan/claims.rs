//! Which cluster names one resource's tags claim it for, and by which rule: the scan's half of
//! the ownership rules, read from the same keys the teardown's rules use (`policy::tags`,
//! `policy::ebs`, `policy::instance_profiles`), never re-spelled. Pure.
//!
//! A claim names a cluster; it is not a verdict. Whether a teardown would delete the resource is
//! still the cleaner's rule at teardown time (a controller's tag, for one, counts only inside the
//! cluster's VPCs). `shared` never claims anything.

use crate::policy::ebs::{CSI_CLUSTER_TAG, CSI_VOLUME_TAG, KUBERNETES_CLUSTER_TAG};
use crate::policy::instance_profiles::NODECLASS_TAG;
use crate::policy::tags::{CNI_CLUSTER_TAG, LBC_CLUSTER_TAG, OWNED, capa_key, cloud_key, has_key};
use serde::Serialize;

/// The rule a claim was made by, as the report names it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ClaimRule {
    /// `sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned`: CAPA made it (phases 1, 3).
    Capa,
    /// `kubernetes.io/cluster/<name>=owned`: the cloud provider or a controller (phase 2).
    Cloud,
    /// `kubernetes.io/cluster/<name>=owned` on what Karpenter launched (its `ec2nodeclass` tag).
    Karpenter,
    /// `elbv2.k8s.aws/cluster=<name>`: the AWS Load Balancer Controller's (a teardown confirms it
    /// in the cluster's VPCs).
    LoadBalancerController,
    /// `cluster.k8s.amazonaws.com/name=<name>`: the VPC CNI's (confirmed in the cluster's VPCs).
    VpcCni,
    /// `ebs.csi.aws.com/cluster-name=<name>` or `KubernetesCluster=<name>` with the EBS CSI
    /// driver's `CSIVolumeName`.
    EbsCsi,
}

impl ClaimRule {
    /// How the report reads the rule.
    pub fn label(self) -> &'static str {
        match self {
            ClaimRule::Capa => "CAPA-owned (phases 1 and 3)",
            ClaimRule::Cloud => "cluster tag owned (phase 2)",
            ClaimRule::Karpenter => "Karpenter, cluster tag owned (phase 2)",
            ClaimRule::LoadBalancerController => {
                "AWS Load Balancer Controller (phase 2, in the cluster's VPCs only)"
            }
            ClaimRule::VpcCni => "VPC CNI (phase 2, in the cluster's VPCs only)",
            ClaimRule::EbsCsi => "EBS CSI driver (phase 2, opt-in ebs-volume)",
        }
    }
}

/// One resource claimed for one cluster name: the proof the report shows.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Claim {
    pub cluster: String,
    /// The tag key (and value) that makes the claim, exactly as the resource carries it.
    pub tag: String,
    pub rule: ClaimRule,
}

/// The cluster name a tag key ends with after `prefix`, when it is one: non-empty, no further
/// `/` (so `kubernetes.io/cluster/a/b` names nothing), as cluster::validate in the main crate
/// and CAPA's tag keys allow.
fn name_after<'a>(key: &'a str, prefix: &str) -> Option<&'a str> {
    let name = key.strip_prefix(prefix)?;
    usable(name).then_some(name)
}

/// A name a cluster can have in a tag: what `kubernetes.io/cluster/<name>` can carry.
pub fn usable(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && !name
            .chars()
            .any(|c| c == '/' || c == ',' || c == '=' || c.is_whitespace())
}

/// Every claim `tags` make, sorted, one per (name, rule). A key that names nothing usable (an
/// empty or slashed suffix) claims nothing: bad input is never a candidate.
pub fn claims<'a>(tags: impl IntoIterator<Item = (&'a str, &'a str)> + Clone) -> Vec<Claim> {
    // The prefixes are the policy's keys with an empty name, so the two never drift apart.
    let capa_prefix = capa_key("");
    let cloud_prefix = cloud_key("");
    let karpenter = has_key(tags.clone(), NODECLASS_TAG);
    let csi_volume = has_key(tags.clone(), CSI_VOLUME_TAG);
    let mut out = Vec::new();
    for (k, v) in tags {
        let claim = |cluster: &str, rule| Claim {
            cluster: cluster.to_string(),
            tag: format!("{k}={v}"),
            rule,
        };
        if v == OWNED {
            if let Some(n) = name_after(k, &capa_prefix) {
                out.push(claim(n, ClaimRule::Capa));
            } else if let Some(n) = name_after(k, &cloud_prefix) {
                let rule = if karpenter {
                    ClaimRule::Karpenter
                } else {
                    ClaimRule::Cloud
                };
                out.push(claim(n, rule));
            }
        }
        if !usable(v) {
            continue;
        }
        if k == LBC_CLUSTER_TAG {
            out.push(claim(v, ClaimRule::LoadBalancerController));
        } else if k == CNI_CLUSTER_TAG {
            out.push(claim(v, ClaimRule::VpcCni));
        } else if csi_volume && (k == CSI_CLUSTER_TAG || k == KUBERNETES_CLUSTER_TAG) {
            out.push(claim(v, ClaimRule::EbsCsi));
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.cluster == b.cluster && a.rule == b.rule);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(tags: &[(&str, &str)]) -> Vec<(String, ClaimRule)> {
        claims(tags.iter().copied())
            .into_iter()
            .map(|c| (c.cluster, c.rule))
            .collect()
    }

    /// (tags, the claims wanted, what the case is)
    type Case = (
        &'static [(&'static str, &'static str)],
        &'static [(&'static str, ClaimRule)],
        &'static str,
    );

    #[test]
    fn each_ownership_tag_claims_its_cluster_by_its_rule() {
        use ClaimRule::*;
        let cases: &[Case] = &[
            (
                &[("sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "owned")],
                &[("c1", Capa)],
                "CAPA's tag",
            ),
            (
                &[("kubernetes.io/cluster/c1", "owned")],
                &[("c1", Cloud)],
                "the cluster tag",
            ),
            (
                &[("kubernetes.io/cluster/c1", "shared")],
                &[],
                "shared is never ownership",
            ),
            (
                &[("sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "shared")],
                &[],
                "CAPA's shared neither",
            ),
            (
                &[("kubernetes.io/cluster/c1", "Owned")],
                &[],
                "the value is exact",
            ),
            (
                &[
                    ("kubernetes.io/cluster/c1", "owned"),
                    ("karpenter.k8s.aws/ec2nodeclass", "default"),
                ],
                &[("c1", Karpenter)],
                "Karpenter's launch",
            ),
            (
                &[("elbv2.k8s.aws/cluster", "c1")],
                &[("c1", LoadBalancerController)],
                "the LB controller's",
            ),
            (
                &[("cluster.k8s.amazonaws.com/name", "c1")],
                &[("c1", VpcCni)],
                "the VPC CNI's",
            ),
            (
                &[("CSIVolumeName", "pvc-1"), ("KubernetesCluster", "c1")],
                &[("c1", EbsCsi)],
                "the EBS CSI driver's",
            ),
            (
                &[
                    ("CSIVolumeName", "pvc-1"),
                    ("ebs.csi.aws.com/cluster-name", "c1"),
                ],
                &[("c1", EbsCsi)],
                "the EBS CSI driver's cluster-name",
            ),
            (
                &[("KubernetesCluster", "c1")],
                &[],
                "KubernetesCluster without the driver's mark",
            ),
            (&[("kubernetes.io/cluster/", "owned")], &[], "no name"),
            (
                &[("kubernetes.io/cluster/a/b", "owned")],
                &[],
                "a slashed name",
            ),
            (&[("elbv2.k8s.aws/cluster", "")], &[], "an empty value"),
            (
                &[("kubernetes.io/cluster/c1x", "owned")],
                &[("c1x", Cloud)],
                "a longer name is its own cluster",
            ),
            (
                &[
                    ("sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "owned"),
                    ("kubernetes.io/cluster/ns_c1", "owned"),
                ],
                &[("c1", Capa), ("ns_c1", Cloud)],
                "EKS: two names on one resource",
            ),
            (&[("Name", "c1")], &[], "a Name tag proves nothing"),
        ];
        for (tags, want, what) in cases {
            let want: Vec<(String, ClaimRule)> =
                want.iter().map(|(n, r)| (n.to_string(), *r)).collect();
            assert_eq!(names(tags), want, "{what}");
        }
    }

    #[test]
    fn the_proof_is_the_tag_as_carried() {
        let c = claims([("kubernetes.io/cluster/c1", "owned")]);
        assert_eq!(c[0].tag, "kubernetes.io/cluster/c1=owned");
    }
}
