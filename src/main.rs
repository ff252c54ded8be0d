use clap::Parser;
use std::process::ExitCode;
use sweeper::cli::{Cli, Command};

#[tokio::main]
async fn main() -> ExitCode {
    sweeper::install_crypto_provider();
    let cli = Cli::parse();
    sweeper::telemetry::init(cli.log_format);
    match cli.command {
        Command::Version => {
            println!("sweeper {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Crds => match sweeper::api::crds_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: cannot render CRDs: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Graph(args) => match graph(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => match sweeper::run::run(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %e, "sweeper failed");
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

async fn graph(args: sweeper::cli::GraphArgs) -> Result<(), String> {
    use sweeper::cli::GraphQuery;
    use sweeper::http_get::{encode, get};
    let base = args.server.trim_end_matches('/');
    let url = match &args.query {
        GraphQuery::Dependents(o) | GraphQuery::Dependencies(o) => {
            let which = if matches!(args.query, GraphQuery::Dependents(_)) {
                "dependents"
            } else {
                "dependencies"
            };
            let mut url = format!(
                "{base}/graph/{which}?gvk={}&name={}&transitive={}",
                encode(&o.gvk),
                encode(o.name()),
                o.transitive
            );
            if let Some(ns) = o.namespace() {
                url.push_str(&format!("&namespace={}", encode(ns)));
            }
            url
        }
        GraphQuery::Dump { format } => format!("{base}/graph?format={}", encode(format)),
    };
    let (status, body) = get(&url).await.map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("{url}: HTTP {status}: {}", body.trim()));
    }
    println!("{}", body.trim_end());
    Ok(())
}
