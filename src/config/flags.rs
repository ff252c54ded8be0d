//! Flags several commands share: sweeper's namespace (`-n`), the report format (`-o`), byte
//! sizes and durations as flags write them.

use clap::Args;

/// How `sweeper check` and `sweeper scan` print their report.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Table,
    Json,
}

/// `-n`: sweeper's namespace, where the pause switch lives (`pause`, `resume`, `uninstall`).
#[derive(Args, Debug, Clone)]
pub struct SwitchNamespace {
    /// Sweeper's namespace, where the pause switch (ConfigMap sweeper-pause) lives.
    #[arg(
        short = 'n',
        long,
        default_value = "sweeper-system",
        env = "SWEEPER_NAMESPACE"
    )]
    pub namespace: String,
}

/// `256Mi`, `1Gi`, `4096`: a byte count.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, ""), |i| s.split_at(i));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or a number with Ki, Mi, Gi)"))?;
    let mult: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        other => return Err(format!("{s:?}: unknown unit {other:?} (use Ki, Mi or Gi)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// Durations as flags take them (the engine's own parser: failpoints read the same syntax).
pub use crate::engine::duration::parse as parse_duration;
