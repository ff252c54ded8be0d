//! `sweeper check`: the preflight and health check (crate::check) run from the command line.

use crate::config::flags::{OutputFormat, parse_bytes};
use crate::exit::{CommandError, Printed};
use crate::run::RunArgs;
use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// `table` (one line per check) or `json`.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// The archive's budget: records over this size in all fail the check (bytes, or with Ki, Mi,
    /// Gi). etcd's own quota is 2 GiB by default.
    #[arg(long, default_value = "256Mi", env = "SWEEPER_CHECK_ARCHIVE_BUDGET", value_parser = parse_bytes)]
    pub archive_budget: u64,
    /// Where the control plane's own pods and Leases are (kube-controller-manager's).
    #[arg(long, default_value = "kube-system")]
    pub control_plane_namespace: String,
    /// Check only the cluster objects of this namespace for their AWS identity (empty: all).
    #[arg(long, default_value = "")]
    pub cluster_namespace: String,
    /// Do not build AWS sessions (no AWS call at all).
    #[arg(long)]
    pub skip_aws: bool,
    /// Check as this user (impersonation, like kubectl's --as), e.g.
    /// system:serviceaccount:sweeper-system:sweeper: the rbac section then shows what sweeper's
    /// own service account may do.
    #[arg(long = "as")]
    pub as_user: Option<String>,
    #[command(
        flatten,
        next_help_heading = "Service configuration (sweeper run's flags and variables)"
    )]
    pub run: RunArgs,
}

/// `sweeper check`: the report on stdout, exit 1 when a check failed (2 when it could not start).
pub async fn check(args: CheckArgs) -> Result<Printed, CommandError> {
    use crate::check::{self, Line, Report};
    let printed = |report: &Report| {
        let text = match args.output {
            OutputFormat::Table => report.render(),
            OutputFormat::Json => serde_json::to_string_pretty(report)
                .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")),
        };
        if report.success {
            Printed::ok(text)
        } else {
            Printed::failed(text)
        }
    };
    let mut config = match kube::Config::infer().await {
        Ok(c) => c,
        Err(e) => {
            let report = Report::new(vec![Line::fail(
                "kubernetes-api",
                format!("no cluster configuration: {e}"),
                "set KUBECONFIG, or run in a pod with a service account",
            )]);
            return Ok(printed(&report));
        }
    };
    if let Some(user) = &args.as_user {
        config.auth_info.impersonate = Some(user.clone());
    }
    let namespace = args.run.config.sweeper_namespace();
    let client = match kube::Client::try_from(config) {
        Ok(c) => c,
        Err(e) => {
            return Err(CommandError::CannotStart(format!(
                "cannot build a client: {e}"
            )));
        }
    };
    let lease = args.run.config.leader_elect.then(|| {
        let l = args.run.config.leader_config();
        let ns = if l.namespace.is_empty() {
            namespace.clone()
        } else {
            l.namespace
        };
        (ns, l.lease_name, l.lease_duration)
    });
    let cfg = check::Config {
        gates: args.run.feature_gates.clone(),
        namespace,
        capa_namespace: args.run.config.capa_namespace.clone(),
        lease,
        archive: args.run.config.archive.is_on(),
        archive_budget_bytes: args.archive_budget,
        control_plane_namespace: args.control_plane_namespace.clone(),
        cluster_namespace: args.cluster_namespace.clone(),
        external_selector: args.run.config.external_gc_selector.clone(),
        external_dry_run: args.run.config.external_dry_run,
        scan_interval: args.run.config.scan_interval,
    };
    let sessions = if cfg.preflights().contains(&check::Preflight::Aws) && !args.skip_aws {
        Some(sweeper_aws::session::SessionCache::new(
            sweeper_aws::load_config().await,
            None,
        ))
    } else {
        None
    };
    let report = check::run(&client, &cfg, sessions.as_ref()).await;
    Ok(printed(&report))
}
