//! Durations as sweeper's flags and failpoints write them: `250ms`, `30s`, `5m`, `1h`, or a bare
//! number of seconds. In the engine, so the engine needs nothing from the CLI above it.

use std::time::Duration;

/// A duration that does not parse, with the text as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{text:?} is not a duration (e.g. 500ms, 30s, 5m)")]
    NotANumber { text: String },
    #[error("{text:?} is too long a duration")]
    TooLong { text: String },
    #[error("{text:?}: unknown unit {unit:?} (use ms, s, m or h)")]
    UnknownUnit { text: String, unit: String },
}

/// Parses `250ms`, `30s`, `5m`, `1h`, or a bare number of seconds.
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| DurationError::NotANumber { text: s.into() })?;
    let secs = |per: u64| {
        n.checked_mul(per)
            .map(Duration::from_secs)
            .ok_or_else(|| DurationError::TooLong { text: s.into() })
    };
    match unit {
        "" | "s" => secs(1),
        "ms" => Ok(Duration::from_millis(n)),
        "m" => secs(60),
        "h" => secs(3600),
        _ => Err(DurationError::UnknownUnit {
            text: s.into(),
            unit: unit.into(),
        }),
    }
}
