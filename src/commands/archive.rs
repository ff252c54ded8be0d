//! `sweeper restore` and `sweeper archive list`: the archive of deleted objects (archive::restore),
//! read and restored as the caller's identity.

use crate::config::flags::parse_duration;
use crate::exit::{CommandError, Printed};
use clap::{Args, Subcommand};
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct RestoreArgs {
    /// group/version/kind of one object, e.g. apps/v1/Deployment (v1/ConfigMap for the core
    /// group), then [namespace] name.
    #[arg(num_args = 0..=3)]
    pub object: Vec<String>,
    /// Restore this owner (if it was archived) and every dependent collected because of it.
    #[arg(long, conflicts_with_all = ["object", "tenant"])]
    pub cascade_of: Option<String>,
    /// Restore everything the teardown of this tenant deleted.
    #[arg(long, conflicts_with_all = ["object", "cascade_of"])]
    pub tenant: Option<String>,
    /// Print the plan; create nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Read records only in this namespace (default: all the namespaces you may list).
    #[arg(long)]
    pub records_namespace: Option<String>,
    /// Sweeper's namespace: the only place records of cluster-scoped objects and tenant
    /// teardowns are trusted from.
    #[arg(long, default_value = "sweeper-system", env = "SWEEPER_NAMESPACE")]
    pub sweeper_namespace: String,
}

impl RestoreArgs {
    /// The selection the arguments name.
    pub fn selection(&self) -> Result<crate::archive::restore::Selection, NoSelection> {
        use crate::archive::restore::Selection;
        match (&self.cascade_of, &self.tenant, self.object.as_slice()) {
            (Some(uid), None, []) => Ok(Selection::CascadeOf(uid.clone())),
            (None, Some(id), []) => Ok(Selection::Tenant(id.clone())),
            (None, None, [gvk, name]) => Ok(Selection::Object {
                gvk: gvk.clone(),
                namespace: None,
                name: name.clone(),
            }),
            (None, None, [gvk, ns, name]) => Ok(Selection::Object {
                gvk: gvk.clone(),
                namespace: Some(ns.clone()),
                name: name.clone(),
            }),
            _ => Err(NoSelection),
        }
    }
}

/// The arguments name no one thing to restore.
#[derive(Debug, thiserror::Error)]
#[error(
    "say what to restore: <group/version/kind> [namespace] <name>, --cascade-of <owner uid> or --tenant <id>"
)]
pub struct NoSelection;

#[derive(Subcommand, Debug, Clone)]
pub enum ArchiveCommand {
    /// What can be restored: every archived object you may read, oldest first.
    List {
        /// Only records in this namespace.
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// Only objects archived within this long (e.g. 1h, 30m).
        #[arg(long, value_parser = parse_duration)]
        since: Option<Duration>,
        /// Sweeper's namespace (see `restore --sweeper-namespace`).
        #[arg(long, default_value = "sweeper-system", env = "SWEEPER_NAMESPACE")]
        sweeper_namespace: String,
    },
}

/// `sweeper restore`: as the caller's identity.
pub async fn restore(args: RestoreArgs) -> Result<Printed, CommandError> {
    use crate::archive::restore;
    let sel = args.selection().map_err(CommandError::of)?;
    let client = crate::exit::client().await?;
    let archive = restore::load(
        &client,
        args.records_namespace.as_deref(),
        &args.sweeper_namespace,
    )
    .await
    .map_err(CommandError::of)?;
    for n in &archive.notes {
        eprintln!("note: {n}");
    }
    let entries = restore::select(&archive, &sel).map_err(CommandError::of)?;
    let summary = restore::restore(&client, &entries, args.dry_run, &mut |line| {
        println!("{line}")
    })
    .await;
    if summary.failed > 0 {
        return Err(CommandError::Failed(format!(
            "{} objects could not be restored",
            summary.failed
        )));
    }
    Ok(Printed::ok(""))
}

/// `sweeper archive list`.
pub async fn archive(cmd: ArchiveCommand) -> Result<Printed, CommandError> {
    let ArchiveCommand::List {
        namespace,
        since,
        sweeper_namespace,
    } = cmd;
    use crate::archive::restore;
    let client = crate::exit::client().await?;
    let archive = restore::load(&client, namespace.as_deref(), &sweeper_namespace)
        .await
        .map_err(CommandError::of)?;
    // Further back than jiff's timestamps reach is simply "everything".
    let since = since.and_then(|d| {
        let back = k8s_openapi::jiff::SignedDuration::try_from(d).ok()?;
        k8s_openapi::jiff::Timestamp::now().checked_sub(back).ok()
    });
    Ok(Printed::ok(restore::render(&archive, since).trim_end()))
}
