//! What the controller asks a teardown pass for and what it gets back.

use crate::aws::model::{GcTask, PhaseReport};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeardownRequest {
    pub cluster_name: String,
    /// Phase 2 (resources the cloud provider created for the cluster). `false` opts out; phases
    /// 1 and 3 still run.
    pub external_gc: bool,
    /// Phase-2 cleaner selection; `None` means all.
    pub tasks: Option<Vec<GcTask>>,
    /// Discover everything, delete nothing; the report's `planned` lists what would go.
    pub dry_run: bool,
    /// Phase-2 discovery through tag-filtered Describe calls instead of the tagging API.
    pub alternative_discovery: bool,
    /// The cluster's VPCs as its object states them (`spec.network.vpc.id`). With the
    /// CAPA-tagged VPCs, they confirm resources found by the LB controller's and the VPC CNI's
    /// tags, which name a cluster but not an account.
    pub vpc_ids: Vec<String>,
    /// Snapshot each EBS volume before the opt-in `ebs-volume` task deletes it.
    pub ebs_snapshot: bool,
}

impl TeardownRequest {
    /// All phases, all tasks, tagging-API discovery, for real.
    pub fn new(cluster_name: impl Into<String>) -> Self {
        TeardownRequest {
            cluster_name: cluster_name.into(),
            external_gc: true,
            tasks: None,
            dry_run: false,
            alternative_discovery: false,
            vpc_ids: Vec::new(),
            ebs_snapshot: true,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TeardownReport {
    /// All three phases ran, left nothing and reported no error.
    pub done: bool,
    pub phases: Vec<PhaseReport>,
}
