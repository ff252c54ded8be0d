//! `sweeper gc enable|disable|configure|plan`: a cluster's external resource GC settings (the
//! annotations, core::annotations) and its plan (commands::plan).

use crate::exit::{CommandError, Printed};
use clap::{Args, Subcommand};

#[derive(Subcommand, Debug, Clone)]
pub enum GcCommand {
    /// Collect the cluster's external AWS resources on deletion (annotation "true").
    Enable(GcCluster),
    /// Opt the cluster out of external resource GC (annotation "false"); phases 1 and 3 still run.
    Disable(GcCluster),
    /// Print, per phase and cleaner, what a teardown would delete; delete nothing. Runs in the
    /// cluster's own session, as the teardown would: its `spec.region` and the identity chain of
    /// its `spec.identityRef`, on top of the environment's endpoint and credentials (AWS_REGION,
    /// AWS_ENDPOINT_URL, ...).
    Plan {
        #[command(flatten)]
        cluster: GcCluster,
        /// Discover with describe calls instead of the Resource Groups Tagging API.
        #[arg(long)]
        alternative_discovery: bool,
        /// CAPA's namespace, where static identities' Secrets live.
        #[arg(long, default_value = "capa-system", env = "SWEEPER_CAPA_NAMESPACE")]
        capa_namespace: String,
    },
    /// Limit external GC to these tasks (annotation sweeper.dev/gc-tasks, and CAPA's tasks
    /// annotation for CAPA's three); no --gc-task removes both (the default tasks).
    Configure {
        #[command(flatten)]
        cluster: GcCluster,
        /// dns-record (external-dns records: reported, deleted only under the
        /// sweeper.dev/external-dns-owner-id annotation), load-balancer, target-group, instance,
        /// launch-template, instance-profile, oidc-provider, instance-state-queue (CAPA's
        /// EventBridgeInstanceState queue and rule), bootstrap-data (CAPA's machines' bootstrap
        /// secrets and parameters), bootstrap-data-s3 (CAPA's bootstrap bucket and objects:
        /// reported, never deleted), security-group, eks-security-group,
        /// shared-tag (a bring-your-own network's shared tag removed, nothing deleted) or the
        /// opt-ins ebs-volume, ebs-snapshot and eks-log-group; comma-separated or repeated.
        /// All go to sweeper.dev/gc-tasks; CAPA's load-balancer, target-group and security-group
        /// also to aws.cluster.x-k8s.io/external-resource-tasks-gc, which is removed when none is
        /// named (CAPA refuses other names there).
        #[arg(long = "gc-task", value_delimiter = ',')]
        tasks: Vec<sweeper_aws::phases::GcTask>,
        /// The cluster's external-dns owner id (its --txt-owner-id): the dns-record task then
        /// deletes the records external-dns owns under exactly this id that point at a load
        /// balancer the teardown deletes. "" removes it (records only reported). Not given: left
        /// as it is; unlike --gc-task, a delete permission is never changed by omission.
        /// `default` is refused: every external-dns that kept the default shares it.
        #[arg(long, value_name = "ID", value_parser = parse_dns_owner)]
        external_dns_owner_id: Option<String>,
    },
}

/// An owner id `gc configure` may write: one the teardown would accept, or "" to remove it.
fn parse_dns_owner(s: &str) -> Result<String, String> {
    match sweeper_aws::cleaners::dns_records::owner_id_problem(s) {
        Some(why) if !s.is_empty() => Err(why),
        _ => Ok(s.to_string()),
    }
}

#[derive(Args, Debug, Clone)]
pub struct GcCluster {
    /// The CAPI Cluster's name.
    #[arg(long)]
    pub cluster_name: String,
    /// The CAPI Cluster's namespace.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
}

/// `sweeper gc ...`: writes the cluster's annotations as the caller's identity, or prints its plan.
pub async fn gc(cmd: GcCommand) -> Result<Printed, CommandError> {
    use crate::external::core::annotations::GC_ANNOTATION;
    let client = crate::exit::client().await?;
    let (cluster, value, what) = match cmd {
        GcCommand::Plan {
            cluster,
            alternative_discovery,
            capa_namespace,
        } => {
            let sessions =
                sweeper_aws::session::SessionCache::new(sweeper_aws::load_config().await, None);
            let plan = super::plan::plan(
                &client,
                &sessions,
                &capa_namespace,
                &cluster.namespace,
                &cluster.cluster_name,
                alternative_discovery,
            )
            .await
            .map_err(CommandError::of)?;
            return Ok(Printed::ok(plan));
        }
        GcCommand::Configure {
            cluster,
            tasks,
            external_dns_owner_id,
        } => {
            let done = super::configure::configure(
                &client,
                &cluster.namespace,
                &cluster.cluster_name,
                &tasks,
                external_dns_owner_id.as_deref(),
            )
            .await
            .map_err(CommandError::of)?;
            return Ok(Printed::ok(done));
        }
        GcCommand::Enable(c) => (c, "true", "external resource GC enabled"),
        GcCommand::Disable(c) => (c, "false", "external resource GC disabled"),
    };
    let values = vec![(GC_ANNOTATION, Some(value.to_string()))];
    let target = crate::external::core::cluster::annotate(
        &client,
        &cluster.namespace,
        &cluster.cluster_name,
        &values,
    )
    .await
    .map_err(CommandError::of)?;
    Ok(Printed::ok(match target {
        (target, None) => format!("{target}: {what}"),
        (target, Some(note)) => format!("{target}: {what}\n{note}"),
    }))
}
