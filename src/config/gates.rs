//! Feature gates: which collectors run, and the further switches a collector declares.
//!
//! This module knows no gate by name: the caller passes the known gates in (the list of
//! collectors, `crate::catalog::gates`), so configuration sits below the collectors and never
//! walks their list.

use std::fmt;

/// A feature gate: its `--feature-gates` name and whether it is on when not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gate {
    pub name: &'static str,
    pub default: bool,
}

/// Every known gate, given or defaulted. Names are fixed by the design
/// (`--feature-gates=CascadeGC=true,...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    values: Vec<(&'static str, bool)>,
}

/// Why a `--feature-gates` value was refused. The message names the offending part.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FeatureGateError {
    #[error("unknown feature gate {name:?} (known gates: {})", known.join(", "))]
    UnknownGate {
        name: String,
        known: Vec<&'static str>,
    },
    #[error("feature gate {name}: value {value:?} is not a boolean (use true or false)")]
    InvalidValue { name: String, value: String },
    #[error("feature gate entry {entry:?} is not of the form Name=true|false")]
    Malformed { entry: String },
    #[error("feature gate {name} is given twice")]
    Duplicate { name: String },
}

impl FeatureGates {
    /// Every known gate at its default.
    pub fn defaults(known: &[Gate]) -> Self {
        Self {
            values: known.iter().map(|g| (g.name, g.default)).collect(),
        }
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

    /// Parses `Name=bool,Name=bool` over the `known` gates, starting from their defaults. An
    /// empty string means "defaults".
    pub fn parse(s: &str, known: &[Gate]) -> Result<Self, FeatureGateError> {
        let mut gates = FeatureGates::defaults(known);
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
                    known: known.iter().map(|g| g.name).collect(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Gates as the caller passes them (the collectors' own are checked in crate::catalog).
    const KNOWN: [Gate; 3] = [
        Gate {
            name: "CascadeGC",
            default: true,
        },
        Gate {
            name: "TenantGC",
            default: false,
        },
        Gate {
            name: "AlternativeGCStrategy",
            default: false,
        },
    ];

    fn parse(s: &str) -> Result<FeatureGates, FeatureGateError> {
        FeatureGates::parse(s, &KNOWN)
    }

    #[test]
    fn empty_string_gives_defaults() {
        let g = parse("").unwrap();
        assert_eq!(g, FeatureGates::defaults(&KNOWN));
        assert_eq!(
            g.to_string(),
            "CascadeGC=true,TenantGC=false,AlternativeGCStrategy=false"
        );
    }

    #[test]
    fn parses_every_known_gate() {
        let g = parse("CascadeGC=false,TenantGC=TRUE,AlternativeGCStrategy=true").unwrap();
        assert!(
            !g.enabled("CascadeGC") && g.enabled("TenantGC") && g.enabled("AlternativeGCStrategy")
        );
    }

    #[test]
    fn display_round_trips() {
        let g = parse("TenantGC=true").unwrap();
        assert_eq!(parse(&g.to_string()).unwrap(), g);
    }

    #[test]
    fn unknown_gate_is_named_in_the_error_with_the_known_ones() {
        let err = parse("CascadeGc=true").unwrap_err();
        assert_eq!(
            err,
            FeatureGateError::UnknownGate {
                name: "CascadeGc".into(),
                known: KNOWN.iter().map(|g| g.name).collect(),
            }
        );
        assert!(err.to_string().contains("AlternativeGCStrategy"));
    }

    #[test]
    fn non_boolean_value_is_refused() {
        let err = parse("TenantGC=yes").unwrap_err();
        assert!(err.to_string().contains("\"yes\""), "{err}");
    }

    #[test]
    fn entry_without_equals_is_refused() {
        assert!(matches!(
            parse("TenantGC"),
            Err(FeatureGateError::Malformed { .. })
        ));
    }

    #[test]
    fn duplicate_gate_is_refused() {
        assert!(matches!(
            parse("TenantGC=true,TenantGC=false"),
            Err(FeatureGateError::Duplicate { .. })
        ));
    }
}
