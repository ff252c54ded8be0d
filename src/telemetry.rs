//! Logging set-up: `tracing` to stderr, text or JSON, filtered by `RUST_LOG` (default: the
//! command's, [`default_level`]).

use crate::config::LogFormat;
use std::io::IsTerminal;
use tracing_subscriber::{EnvFilter, fmt, prelude::*};

/// `warn` for the commands whose output is a report (`scan`, `teardown`, `check`, `gc`): their
/// stdout is what the user reads, and a line per AWS session or cleaner on stderr would bury it;
/// `info` for the service and the rest. `RUST_LOG` overrides either.
pub fn default_level(report: bool) -> &'static str {
    if report { "warn" } else { "info" }
}

pub fn init(format: LogFormat, default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let registry = tracing_subscriber::registry().with(filter);
    // try_init: a second call (tests) is harmless rather than a panic.
    let _ = match format {
        // Colours only on a terminal: `kubectl logs`, a log shipper or a file read escape codes
        // as text, and a search for " ERROR " would miss every line.
        LogFormat::Text => registry
            .with(
                fmt::layer()
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
}
