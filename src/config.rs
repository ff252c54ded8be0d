//! Typed configuration shared by every collector: feature gates and the `run` flags.
//!
//! One struct built by clap (flags + environment variables) and passed down; no global state.

use crate::collectors::Gate;
use std::fmt;
use std::str::FromStr;

/// The feature gates sweeper understands: each collector's own (see crate::collectors), and the
/// further ones a collector declares. Names are fixed by the design
/// (`--feature-gates=CascadeGC=true,...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// Every known gate, given or defaulted.
    values: Vec<(&'static str, bool)>,
}

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            values: Self::known().map(|g| (g.name, g.default)).collect(),
        }
    }
}

/// Why a `--feature-gates` value was refused. The message names the offending part.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FeatureGateError {
    #[error("unknown feature gate {name:?} (known gates: {known})", known = FeatureGates::known().map(|g| g.name).collect::<Vec<_>>().join(", "))]
    UnknownGate { name: String },
    #[error("feature gate {name}: value {value:?} is not a boolean (use true or false)")]
    InvalidValue { name: String, value: String },
    #[error("feature gate entry {entry:?} is not of the form Name=true|false")]
    Malformed { entry: String },
    #[error("feature gate {name} is given twice")]
    Duplicate { name: String },
}

impl FeatureGates {
    /// Every gate, in the order of the collectors' list.
    pub fn known() -> impl Iterator<Item = Gate> {
        crate::collectors::ALL
            .iter()
            .flat_map(|s| std::iter::once(s.gate()).chain(s.further_gates().iter().copied()))
    }

    /// Whether the gate `name` is on. A name no collector declares is off.
    pub fn enabled(&self, name: &str) -> bool {
        self.values.iter().any(|(n, on)| *n == name && *on)
    }

    fn slot(&mut self, name: &str) -> Option<&mut bool> {
        self.values
            .iter_mut()
            .find(|(n, _)| *n == name)
            .map(|(_, on)| on)
    }
}

impl FromStr for FeatureGates {
    type Err = FeatureGateError;

    /// Parses `Name=bool,Name=bool`, starting from the defaults. An empty string means "defaults".
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut gates = FeatureGates::default();
        let mut seen: Vec<&str> = Vec::new();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, value) = entry
                .split_once('=')
                .map(|(n, v)| (n.trim(), v.trim()))
                .ok_or_else(|| FeatureGateError::Malformed {
                    entry: entry.to_string(),
                })?;
            if seen.contains(&name) {
                return Err(FeatureGateError::Duplicate {
                    name: name.to_string(),
                });
            }
            let parsed = match value.to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(FeatureGateError::InvalidValue {
                        name: name.to_string(),
                        value: value.to_string(),
                    });
                }
            };
            let slot = gates
                .slot(name)
                .ok_or_else(|| FeatureGateError::UnknownGate {
                    name: name.to_string(),
                })?;
            *slot = parsed;
            seen.push(name);
        }
        Ok(gates)
    }
}

impl fmt::Display for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .values
            .iter()
            .map(|(n, on)| format!("{n}={on}"))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_string_gives_defaults() {
        let g = "".parse::<FeatureGates>().unwrap();
        assert_eq!(g, FeatureGates::default());
        assert_eq!(
            g.to_string(),
            "CascadeGC=true,TenantGC=false,ExternalResourceGC=false,AlternativeGCStrategy=false"
        );
    }

    #[test]
    fn parses_every_known_gate() {
        let g: FeatureGates =
            "CascadeGC=false,TenantGC=true,ExternalResourceGC=TRUE,AlternativeGCStrategy=true"
                .parse()
                .unwrap();
        assert!(
            !g.enabled("CascadeGC")
                && g.enabled("TenantGC")
                && g.enabled("ExternalResourceGC")
                && g.enabled("AlternativeGCStrategy")
        );
    }

    #[test]
    fn display_round_trips() {
        let g: FeatureGates = "TenantGC=true".parse().unwrap();
        assert_eq!(g.to_string().parse::<FeatureGates>().unwrap(), g);
    }

    #[test]
    fn unknown_gate_is_named_in_the_error() {
        let err = "CascadeGc=true".parse::<FeatureGates>().unwrap_err();
        assert_eq!(
            err,
            FeatureGateError::UnknownGate {
                name: "CascadeGc".into()
            }
        );
        assert!(err.to_string().contains("ExternalResourceGC"));
    }

    #[test]
    fn non_boolean_value_is_refused() {
        let err = "TenantGC=yes".parse::<FeatureGates>().unwrap_err();
        assert!(err.to_string().contains("\"yes\""), "{err}");
    }

    #[test]
    fn entry_without_equals_is_refused() {
        assert!(matches!(
            "TenantGC".parse::<FeatureGates>(),
            Err(FeatureGateError::Malformed { .. })
        ));
    }

    #[test]
    fn duplicate_gate_is_refused() {
        assert!(matches!(
            "TenantGC=true,TenantGC=false".parse::<FeatureGates>(),
            Err(FeatureGateError::Duplicate { .. })
        ));
    }
}
