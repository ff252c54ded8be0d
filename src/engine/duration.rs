//! Durations as sweeper's flags and failpoints write them: `250ms`, `30s`, `5m`, `1h`, or a bare
//! number of seconds. In the engine, so the engine needs nothing from the CLI above it.

use std::time::Duration;

/// Parses `250ms`, `30s`, `5m`, `1h`, or a bare number of seconds.
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 500ms, 30s, 5m)"))?;
    let secs = |per: u64| {
        n.checked_mul(per)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("{s:?} is too long a duration"))
    };
    match unit {
        "" | "s" => secs(1),
        "ms" => Ok(Duration::from_millis(n)),
        "m" => secs(60),
        "h" => secs(3600),
        _ => Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    }
}
