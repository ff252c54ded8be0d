//! `sweeper pause` and `sweeper resume`: the pause switch (engine::pause) as the caller's identity.

use crate::config::flags::SwitchNamespace;
use crate::exit::{CommandError, Printed};
use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct PauseArgs {
    /// One collector; none: every collector.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(crate::catalog::names()))]
    pub collector: Option<String>,
    /// Why (recorded with the switch, shown by `sweeper status` and in the Event).
    #[arg(long)]
    pub reason: Option<String>,
    /// `resume` only: resume just the collectors `sweeper uninstall` paused, leaving any other
    /// pause as it is (the Helm chart's post-install hook, so a reinstall does not start paused).
    #[arg(long, conflicts_with_all = ["collector", "reason"])]
    pub after_uninstall: bool,
    #[command(flatten)]
    pub switch: SwitchNamespace,
}

/// `sweeper pause` / `sweeper resume`: writes the switch as the caller's identity.
pub async fn pause(args: PauseArgs, on: bool) -> Result<Printed, CommandError> {
    use crate::engine::pause::{self, PauseRecord};
    let client = crate::exit::client().await?;
    if args.after_uninstall {
        if on {
            return Err(CommandError::Failed(
                "--after-uninstall is for `sweeper resume`".into(),
            ));
        }
        let resumed = crate::uninstall::resume_after_uninstall(&client, &args.switch.namespace)
            .await
            .map_err(|e| CommandError::Failed(e.to_string()))?;
        return Ok(Printed::ok(if resumed.is_empty() {
            "nothing paused by `sweeper uninstall`".to_string()
        } else {
            format!(
                "resumed what `sweeper uninstall` paused: {}",
                resumed.join(", ")
            )
        }));
    }
    let record = on.then(|| PauseRecord {
        since: k8s_openapi::jiff::Timestamp::now().to_string(),
        by: std::env::var("USER").ok().filter(|u| !u.is_empty()),
        reason: args.reason.clone(),
    });
    let now = pause::set(
        &client,
        &args.switch.namespace,
        args.collector.as_deref(),
        record,
        &crate::catalog::names(),
    )
    .await
    .map_err(|e| CommandError::Failed(e.to_string()))?;
    let which = args.collector.as_deref().unwrap_or("every collector");
    let paused: Vec<&str> = now.keys().map(String::as_str).collect();
    Ok(Printed::ok(format!(
        "{} {which}; paused now: {}",
        if on { "paused" } else { "resumed" },
        if paused.is_empty() {
            "none".to_string()
        } else {
            paused.join(", ")
        }
    )))
}
