//! Typed configuration shared by every collector: feature gates and the `run` flags.
//!
//! One struct built by clap (flags + environment variables) and passed down; no global state.

use std::fmt;
use std::str::FromStr;

/// The feature gates sweeper understands. Names are fixed by the design (`--feature-gates=CascadeGC=true,...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// The ownerReference garbage collector. On by default: it is sweeper's core job.
    pub cascade_gc: bool,
    /// KubeZoo tenant teardown. Off by default: it adds finalizers to `Tenant` objects.
    pub tenant_gc: bool,
    /// CAPA external resource GC. Off by default, as in the CAPA proposal.
    pub external_resource_gc: bool,
    /// Discover AWS resources with describe calls instead of the Resource Groups Tagging API.
    pub alternative_gc_strategy: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            cascade_gc: true,
            tenant_gc: false,
            external_resource_gc: false,
            alternative_gc_strategy: false,
        }
    }
}

/// Why a `--feature-gates` value was refused. The message names the offending part.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FeatureGateError {
    #[error("unknown feature gate {name:?} (known gates: {known})", known = FeatureGates::KNOWN.join(", "))]
    UnknownGate { name: String },
    #[error("feature gate {name}: value {value:?} is not a boolean (use true or false)")]
    InvalidValue { name: String, value: String },
    #[error("feature gate entry {entry:?} is not of the form Name=true|false")]
    Malformed { entry: String },
    #[error("feature gate {name} is given twice")]
    Duplicate { name: String },
}

impl FeatureGates {
    pub const KNOWN: [&'static str; 4] = [
        "CascadeGC",
        "TenantGC",
        "ExternalResourceGC",
        "AlternativeGCStrategy",
    ];

    fn slot(&mut self, name: &str) -> Option<&mut bool> {
        match name {
            "CascadeGC" => Some(&mut self.cascade_gc),
            "TenantGC" => Some(&mut self.tenant_gc),
            "ExternalResourceGC" => Some(&mut self.external_resource_gc),
            "AlternativeGCStrategy" => Some(&mut self.alternative_gc_strategy),
            _ => None,
        }
    }

    fn get(&self, name: &str) -> bool {
        match name {
            "CascadeGC" => self.cascade_gc,
            "TenantGC" => self.tenant_gc,
            "ExternalResourceGC" => self.external_resource_gc,
            _ => self.alternative_gc_strategy,
        }
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
        let parts: Vec<String> = Self::KNOWN
            .iter()
            .map(|n| format!("{n}={}", self.get(n)))
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
        assert_eq!("".parse::<FeatureGates>().unwrap(), FeatureGates::default());
    }

    #[test]
    fn parses_every_known_gate() {
        let g: FeatureGates =
            "CascadeGC=false,TenantGC=true,ExternalResourceGC=TRUE,AlternativeGCStrategy=true"
                .parse()
                .unwrap();
        assert!(
            !g.cascade_gc && g.tenant_gc && g.external_resource_gc && g.alternative_gc_strategy
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
