//! `sweeper uninstall`: release sweeper's finalizers before removing it (crate::uninstall).

use crate::config::flags::SwitchNamespace;
use crate::exit::{CommandError, Printed};
use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct UninstallArgs {
    #[command(flatten)]
    pub switch: SwitchNamespace,
    /// Leave `kubezoo.io/tenant` on Tenants (KubeZoo's own controller runs and owns it).
    #[arg(long)]
    pub keep_tenant_finalizer: bool,
    /// List the finalizers that would be removed; pause nothing and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Release only these collectors' finalizers, and read only the kinds they finalize
    /// (external: AWSCluster, AWSManagedControlPlane; tenant: Tenant; cascade: every kind), so
    /// the identity needs no more than those collectors' role. Repeat it or separate with commas.
    /// Default: every collector. The Helm chart's pre-delete hook names the collectors it enabled.
    #[arg(long = "collector", value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(crate::catalog::names()))]
    pub collectors: Vec<String>,
    /// CAPA's namespace: its manager's Deployment says whether CAPA's own ExternalResourceGC is
    /// on, which the uninstall reports (with the external collector's finalizers released).
    /// Empty: not read (an identity that may not read Deployments there), the report says what
    /// to check.
    #[arg(long, default_value = "capa-system", env = "SWEEPER_CAPA_NAMESPACE")]
    pub capa_namespace: String,
}

/// `sweeper uninstall`: as the caller's identity (it patches objects of every kind).
pub async fn uninstall(args: UninstallArgs) -> Result<Printed, CommandError> {
    use crate::uninstall::{Options, uninstall};
    let client = crate::exit::client().await?;
    let opts = Options {
        namespace: args.switch.namespace.clone(),
        keep_tenant_finalizer: args.keep_tenant_finalizer,
        dry_run: args.dry_run,
        collectors: args.collectors.clone(),
        capa_namespace: args.capa_namespace.clone(),
    };
    let summary = uninstall(&client, &opts)
        .await
        .map_err(|e| CommandError::Failed(e.to_string()))?;
    let verb = if args.dry_run {
        "would release"
    } else {
        "released"
    };
    let mut out = String::new();
    if !args.dry_run {
        out.push_str(&format!(
            "paused every collector (namespace {}); nothing was deleted, the archive is kept\n",
            args.switch.namespace
        ));
    }
    for r in &summary.released {
        out.push_str(&format!("{verb} {r}\n"));
    }
    out.push_str(&format!("{} object(s) {verb}", summary.released.len()));
    if let Some(capa) = &summary.capa {
        out.push_str(&format!("\n{capa}"));
    }
    if !args.dry_run {
        out.push_str(&format!(
            "\nthe pause switch stays set ({}/sweeper-pause): a reinstall starts paused until `sweeper resume -n {} --after-uninstall` (the Helm chart's post-install hook runs it)",
            args.switch.namespace, args.switch.namespace
        ));
    }
    if !summary.failed.is_empty() {
        return Err(CommandError::Failed(format!(
            "{out}\nnot finished (run again):\n  {}",
            summary.failed.join("\n  ")
        )));
    }
    Ok(Printed::ok(out))
}
