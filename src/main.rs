//! Parses the command line and dispatches: each command's handler lives with its command
//! (crate::commands, external::commands), and every one exits through `exit::exit`.

use clap::Parser;
use std::process::ExitCode;
use sweeper::cli::{Cli, Command};
use sweeper::commands::{archive, check, graph, pause, status, uninstall};
use sweeper::exit::{CommandError, Printed};
use sweeper::external::commands::{gc, scan, teardown};

#[tokio::main]
async fn main() -> ExitCode {
    sweeper::install_crypto_provider();
    let cli = Cli::parse();
    // The one-shot commands print a report: their logs stay at warn unless RUST_LOG says more.
    let reports = matches!(
        cli.command,
        Command::Scan(_) | Command::Teardown(_) | Command::Check(_) | Command::Gc(_)
    );
    sweeper::telemetry::init(cli.log_format, sweeper::telemetry::default_level(reports));
    let result = match cli.command {
        Command::Run(args) => {
            return match sweeper::run::run(args).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "sweeper failed");
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Version => Ok(Printed::ok(format!(
            "sweeper {}",
            env!("CARGO_PKG_VERSION")
        ))),
        Command::Crds => sweeper::api::crds_yaml()
            .map(Printed::ok)
            .map_err(|e| CommandError::Failed(format!("cannot render CRDs: {e}"))),
        Command::Graph(args) => graph::graph(args).await,
        Command::Status(args) => status::status(args).await,
        Command::Gc(cmd) => gc::gc(cmd).await,
        Command::Restore(args) => archive::restore(args).await,
        Command::Archive(cmd) => archive::archive(cmd).await,
        Command::Uninstall(args) => uninstall::uninstall(args).await,
        Command::Pause(args) => pause::pause(args, true).await,
        Command::Resume(args) => pause::pause(args, false).await,
        Command::Check(args) => check::check(*args).await,
        Command::Scan(args) => scan::command::scan(args).await,
        Command::Teardown(args) => teardown::command::teardown(*args).await,
    };
    sweeper::exit::exit(result)
}
