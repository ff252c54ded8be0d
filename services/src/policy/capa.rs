//! Phases 1 and 3: what CAPA created for the cluster, marked
//! `sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned` (on EKS, the Cluster API name).
//! Phase 1 takes CAPA's own instances, API-server load balancer and security groups wherever
//! they are; phase 3 the network, only inside a CAPA-managed VPC (a bring-your-own VPC's
//! resources are never asked for: `cleaners::vpc_owned` looks only in CAPA's VPCs, with CAPA's
//! tag as the server's filter).

use super::{Candidate, Verdict, tags};

/// CAPA's ownership tag for the cluster, `owned` (never `shared`).
pub fn decide(c: &Candidate<'_>, capa_key: &str) -> Verdict {
    if tags::is_owned(c.tags.iter().copied(), capa_key) {
        Verdict::Delete
    } else {
        Verdict::foreign("not CAPA-owned for the cluster")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    #[test]
    fn only_capas_own_tag_for_this_cluster() {
        let capa = tags::capa_key("c1");
        let d = |t: &[(&str, &str)]| decide(&Candidate::tagged(t), &capa);
        let other = tags::capa_key("c2");
        let extends = tags::capa_key("c1-b");
        table::check(&[
            (d(&[(capa.as_str(), "owned")]), Delete, "CAPA's, for c1"),
            (
                d(&[(other.as_str(), "owned")]),
                Foreign,
                "CAPA's, for another cluster",
            ),
            (
                d(&[(extends.as_str(), "owned")]),
                Foreign,
                "a cluster whose name extends ours",
            ),
            (
                d(&[(capa.as_str(), "shared")]),
                Foreign,
                "a `shared` tag is not ownership",
            ),
            (
                d(&[("kubernetes.io/cluster/c1", "owned")]),
                Foreign,
                "the cloud provider's: phase 2's",
            ),
            (d(&[]), Foreign, "untagged"),
        ]);
    }
}
