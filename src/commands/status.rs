//! `sweeper status`: what each collector of a running `sweeper run` is doing (its `/status`,
//! crate::status).

use crate::exit::{CommandError, Printed};
use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct StatusArgs {
    /// Base URL of the running service's HTTP port (`http://` for one run with
    /// --http-insecure).
    #[arg(long, default_value = "https://127.0.0.1:8080", env = "SWEEPER_SERVER")]
    pub server: String,
    /// Print the JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub access: crate::http_get::Credentials,
}

pub async fn status(args: StatusArgs) -> Result<Printed, CommandError> {
    let url = format!("{}/status", args.server.trim_end_matches('/'));
    let (code, body) = crate::http_get::get_with(&url, &args.access)
        .await
        .map_err(|e| CommandError::Failed(e.to_string()))?;
    if code != 200 {
        return Err(CommandError::Failed(format!(
            "{url}: HTTP {code}: {}",
            body.trim()
        )));
    }
    if args.json {
        return Ok(Printed::ok(body.trim_end()));
    }
    let report = serde_json::from_str::<crate::status::StatusReport>(&body)
        .map_err(|e| CommandError::Failed(format!("{url}: unexpected answer: {e}")))?;
    Ok(Printed::ok(crate::status::render(&report)))
}
