//! Logging set-up: `tracing` to stderr, text or JSON, filtered by `RUST_LOG` (default `info`).

use crate::config::LogFormat;
use tracing_subscriber::{EnvFilter, fmt, prelude::*};

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    // try_init: a second call (tests) is harmless rather than a panic.
    let _ = match format {
        LogFormat::Text => registry
            .with(fmt::layer().with_writer(std::io::stderr))
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
