//! `sweeper teardown` from the command line: its flags, then the plan and the passes on stdout.

use crate::config::flags::{SwitchNamespace, parse_duration};
use crate::exit::{CommandError, Printed};
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct TeardownArgs {
    /// The cluster's name as CAPA tagged its own resources (the Cluster API Cluster's name;
    /// `sigs.k8s.io/cluster-api-provider-aws/cluster/<name>`). With `--from-scan`, selects that
    /// scan candidate (repeatable there, comma-separated).
    #[arg(long = "cluster-name", value_delimiter = ',')]
    pub cluster_names: Vec<String>,
    /// The region it lived in. With `--from-scan`, selects the file's candidates of that region.
    #[arg(long)]
    pub region: Option<String>,
    /// An EKS cluster: the EKS name the cloud provider tagged with (`kubernetes.io/cluster/<eks>`).
    /// Its IRSA OIDC provider is kept: the proof needs the issuer CAPA recorded on the object.
    #[arg(long)]
    pub eks_name: Option<String>,
    /// The CAPA identity to act as, `KIND/NAME` (AWSClusterControllerIdentity,
    /// AWSClusterRoleIdentity or AWSClusterStaticIdentity), followed as CAPA does. Without it:
    /// sweeper's own identity (its environment), or with `--from-scan` the identity the scan
    /// reached the candidate's account and region with.
    #[arg(long, value_name = "KIND/NAME")]
    pub identity: Option<String>,
    /// The namespace the cluster lived in: the identity's `allowedNamespaces` must allow it, as
    /// CAPA requires for a cluster there.
    #[arg(long, default_value = "default")]
    pub cluster_namespace: String,
    /// Refuse unless the session acts in this AWS account.
    #[arg(long)]
    pub account: Option<String>,
    /// The cluster's bring-your-own VPC ids (`spec.network.vpc.id` it had): they confirm what the
    /// AWS Load Balancer Controller and the VPC CNI tagged, as the object would have. CAPA's own
    /// VPCs need no flag.
    #[arg(long = "vpc-id", value_delimiter = ',')]
    pub vpc_ids: Vec<String>,
    /// A `sweeper scan -o json` report: tear down its candidates named by `--cluster-name` (or
    /// every candidate with `--all`), each in its account and region, after checking again
    /// that it is still an orphan.
    #[arg(long, value_name = "FILE")]
    pub from_scan: Option<std::path::PathBuf>,
    /// With `--from-scan`: every candidate of the file (narrowed by `--region`).
    #[arg(long, requires = "from_scan")]
    pub all: bool,
    /// Phase-2 tasks to run besides the default set, with the grammar of `sweeper.dev/gc-tasks`
    /// (comma-separated task names; repeatable), e.g. the opt-ins `ebs-volume`, `ebs-snapshot`,
    /// `eks-log-group` that `sweeper scan` prices apart. Without it: the default set.
    #[arg(long = "gc-task", value_name = "TASKS")]
    pub gc_tasks: Vec<String>,
    /// Delete. Without it nothing is deleted: the plan is printed and the command stops.
    #[arg(long)]
    pub yes: bool,
    /// Passes at most (each pass retries what AWS refused for now, e.g. a dependency).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_passes: u32,
    /// A name that is not this management cluster's: refused. Adds to sweeper's namespace's
    /// annotation sweeper.dev/scan-not-ours.
    #[arg(long = "not-ours", value_delimiter = ',')]
    pub not_ours: Vec<String>,
    /// How long the audit record is kept (the service's `--archive-ttl`).
    #[arg(long, default_value = "72h", value_parser = parse_duration)]
    pub audit_ttl: Duration,
    /// CAPA's namespace, where static identities' Secrets live.
    #[arg(long, default_value = "capa-system", env = "SWEEPER_CAPA_NAMESPACE")]
    pub capa_namespace: String,
    /// Sweeper's namespace: its not-ours annotation, and where the audit record is written.
    #[command(flatten)]
    pub namespace: SwitchNamespace,
}

/// `sweeper teardown`: the plan and the passes on stdout (see external::commands::teardown); fails when a
/// target was refused or is not done.
pub async fn teardown(args: TeardownArgs) -> Result<Printed, CommandError> {
    let client = kube::Client::try_default()
        .await
        .map_err(|e| CommandError::Failed(format!("cannot connect: {e}; nothing is deleted")))?;
    let sessions = sweeper_aws::session::SessionCache::new(sweeper_aws::load_config().await, None);
    let out = crate::external::commands::teardown::run(&client, &sessions, &args).await;
    Ok(if out.ok {
        Printed::ok(out.text)
    } else {
        Printed::failed(out.text)
    })
}
