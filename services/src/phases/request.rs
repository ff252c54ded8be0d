//! What the controller asks a teardown pass for and what it gets back.

use crate::model::{EksFacts, GcTask, PhaseReport};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassRequest {
    /// The name the cloud provider tags the cluster's resources with
    /// (`kubernetes.io/cluster/<name>`): phase 2. On EKS this is `spec.eksClusterName`.
    pub cluster_name: String,
    /// The Cluster API Cluster's name, which CAPA's own tags carry
    /// (`sigs.k8s.io/cluster-api-provider-aws/cluster/<name>`): phases 1 and 3 and the
    /// CAPA-owned exclusion of phase 2. The same as `cluster_name` except on EKS, where CAPA
    /// names its network after the Cluster and the cloud provider tags with the EKS name.
    pub capa_name: String,
    /// Phase 2 (resources the cloud provider created for the cluster). `false` opts out; phases
    /// 1 and 3 still run.
    pub external_gc: bool,
    /// Phase-2 task selection; `None` means the default set (every task but `registry::OPT_IN`).
    pub tasks: Option<Vec<GcTask>>,
    /// Discover everything, delete nothing; the report's `planned` lists what would go.
    pub dry_run: bool,
    /// Phase-2 locating through tag-filtered Describe calls instead of the tagging API.
    pub alternative_discovery: bool,
    /// The cluster's VPCs as its object states them (`spec.network.vpc.id`). With the
    /// CAPA-tagged VPCs, they confirm resources found by the LB controller's and the VPC CNI's
    /// tags, which name a cluster but not an account.
    pub vpc_ids: Vec<String>,
    /// Snapshot each EBS volume before the opt-in `ebs-volume` task deletes it.
    pub ebs_snapshot: bool,
    /// Set for an EKS control plane (AWSManagedControlPlane), `None` for an AWSCluster: only an
    /// EKS cluster has EKS's leftovers (IRSA provider, control-plane logs), and only then is
    /// EKS asked anything.
    pub eks: Option<EksFacts>,
    /// The external-dns owner id the cluster names (annotation
    /// `sweeper.dev/external-dns-owner-id`, validated by the controller). With it, the
    /// `dns-record` task deletes the records external-dns made under exactly this id for the
    /// load balancers this pass deletes, each with its TXT companion; without it (`None`), they
    /// are only reported. An id external-dns could not have written, or `default`, deletes
    /// nothing here either (checked again: see `cleaners::dns_records`).
    pub external_dns_owner: Option<String>,
    /// The bucket CAPA keeps the machines' bootstrap data in, as the AWSCluster names it
    /// (`spec.s3Bucket.name`; an AWSManagedControlPlane has no such field): the only bucket the
    /// `bootstrap-data-s3` task reads, and it only reports. `None`: the object names none.
    pub s3_bucket: Option<String>,
}

impl PassRequest {
    /// All phases, all tasks, tagging-API locating, for real.
    pub fn new(cluster_name: impl Into<String>) -> Self {
        let cluster_name = cluster_name.into();
        PassRequest {
            capa_name: cluster_name.clone(),
            cluster_name,
            external_gc: true,
            tasks: None,
            dry_run: false,
            alternative_discovery: false,
            vpc_ids: Vec::new(),
            ebs_snapshot: true,
            eks: None,
            external_dns_owner: None,
            s3_bucket: None,
        }
    }

    /// The same request for an EKS cluster, with what its control plane recorded.
    pub fn with_eks(mut self, facts: EksFacts) -> Self {
        self.eks = Some(facts);
        self
    }

    /// The same request for a cluster whose CAPA-owned resources carry another name (EKS).
    pub fn with_capa_name(mut self, capa_name: impl Into<String>) -> Self {
        self.capa_name = capa_name.into();
        self
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// All three phases ran, left nothing and reported no error.
    pub done: bool,
    pub phases: Vec<PhaseReport>,
}
