//! `sweeper scan` from the command line: its flags and the report on stdout.

use crate::config::flags::{OutputFormat, SwitchNamespace};
use crate::exit::{CommandError, Printed};
use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct ScanArgs {
    /// `table` or `json`.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Also scan this region with sweeper's own identity (its default region always is);
    /// comma-separated or repeated.
    #[arg(long = "region", value_delimiter = ',')]
    pub regions: Vec<String>,
    /// A cluster name that is not this management cluster's (another one owns it): reported
    /// apart, never a candidate; comma-separated or repeated. Adds to the names on sweeper's
    /// namespace's annotation sweeper.dev/scan-not-ours.
    #[arg(long = "not-ours", value_delimiter = ',')]
    pub not_ours: Vec<String>,
    /// CAPA's namespace, where static identities' Secrets live.
    #[arg(long, default_value = "capa-system", env = "SWEEPER_CAPA_NAMESPACE")]
    pub capa_namespace: String,
    #[command(flatten)]
    pub namespace: SwitchNamespace,
}

/// `sweeper scan`: the report on stdout (see external::commands::scan).
pub async fn scan(args: ScanArgs) -> Result<Printed, CommandError> {
    use crate::external::commands::scan;
    let client = crate::exit::client().await?;
    let sessions = sweeper_aws::session::SessionCache::new(sweeper_aws::load_config().await, None);
    let targets = scan::ScanTargets {
        regions: args.regions.clone(),
        capa_namespace: args.capa_namespace.clone(),
        not_ours: args.not_ours.iter().cloned().collect(),
    };
    let report = scan::scan_with_annotation(&client, &sessions, &args.namespace.namespace, targets)
        .await
        .map_err(CommandError::of)?;
    Ok(Printed::ok(match args.output {
        OutputFormat::Table => scan::render::table(&report).trim_end().to_string(),
        OutputFormat::Json => serde_json::to_string_pretty(&report)
            .map_err(|e| CommandError::Failed(format!("cannot render the report: {e}")))?,
    }))
}
