//! `sweeper graph`: queries the dependency graph of a running `sweeper run` (cascade::query).

use crate::exit::{CommandError, Printed};
use clap::{Args, Subcommand};

#[derive(Args, Debug, Clone)]
pub struct GraphArgs {
    /// Base URL of the running service's HTTP port (`http://` for one run with
    /// --http-insecure).
    #[arg(
        long,
        default_value = "https://127.0.0.1:8080",
        env = "SWEEPER_SERVER",
        global = true
    )]
    pub server: String,
    #[command(flatten)]
    pub access: crate::http_get::Credentials,
    #[command(subcommand)]
    pub query: GraphQuery,
}

#[derive(Subcommand, Debug, Clone)]
pub enum GraphQuery {
    /// Objects that name the given object as an owner.
    Dependents(ObjectArgs),
    /// The owners of the given object.
    Dependencies(ObjectArgs),
    /// The whole graph.
    Dump {
        /// json or dot (Graphviz).
        #[arg(long, default_value = "json")]
        format: String,
    },
}

#[derive(Args, Debug, Clone)]
pub struct ObjectArgs {
    /// group/version/kind, e.g. apps/v1/Deployment (v1/ConfigMap for the core group).
    pub gvk: String,
    /// [namespace] name: give the namespace for namespaced objects.
    #[arg(num_args = 1..=2, required = true)]
    pub namespace_and_name: Vec<String>,
    /// Follow edges all the way (all descendants or all ancestors).
    #[arg(long)]
    pub transitive: bool,
}

impl ObjectArgs {
    pub fn namespace(&self) -> Option<&str> {
        (self.namespace_and_name.len() == 2).then(|| self.namespace_and_name[0].as_str())
    }
    pub fn name(&self) -> &str {
        self.namespace_and_name
            .last()
            .map(String::as_str)
            .unwrap_or("")
    }
}

pub async fn graph(args: GraphArgs) -> Result<Printed, CommandError> {
    use crate::http_get::{encode, get_with};
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
    let (status, body) = get_with(&url, &args.access)
        .await
        .map_err(|e| CommandError::Failed(e.to_string()))?;
    if status != 200 {
        return Err(CommandError::Failed(format!(
            "{url}: HTTP {status}: {}",
            body.trim()
        )));
    }
    Ok(Printed::ok(body.trim_end()))
}
