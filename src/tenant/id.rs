//! Tenant ids and the name prefix that marks a tenant's objects.
//!
//! KubeZoo's own check compared names against the id WITHOUT the separator, so tenant `abc`
//! would take the objects of tenant `abcd`. Here the prefix always includes the `-` separator,
//! and an id is validated before it is ever used as a prefix.

use crate::api::tenant::SpecId;
use std::fmt;

pub const ID_LEN: usize = 6;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TenantId(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TenantIdError {
    #[error("tenant id {id:?} is invalid: it must be exactly {ID_LEN} characters of [a-z0-9]")]
    Invalid { id: String },
    #[error("tenant {name:?} has spec.id {id}: the id must equal the object's name")]
    Mismatch { name: String, id: String },
}

impl TenantId {
    /// Validates the tenant's id. The prefix is always the object's name (KubeZoo's rule);
    /// `spec.id`, when set, must agree with it: an integer (KubeZoo's int32) must equal the
    /// numeric name (`111111`, or `011111` for 11111), a string must equal the name. A
    /// disagreement is an error, so nothing is deleted under a prefix the tenant may not mean.
    pub fn parse(name: &str, spec_id: Option<&SpecId>) -> Result<TenantId, TenantIdError> {
        let valid = name.len() == ID_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !valid {
            return Err(TenantIdError::Invalid {
                id: name.to_string(),
            });
        }
        let agrees = match spec_id {
            None => true,
            Some(SpecId::Str(s)) => s.is_empty() || s == name,
            Some(SpecId::Int(i)) => name.parse::<i64>().is_ok_and(|n| n == *i),
        };
        if !agrees {
            return Err(TenantIdError::Mismatch {
                name: name.to_string(),
                id: spec_id.map(|s| format!("{s:?}")).unwrap_or_default(),
            });
        }
        Ok(TenantId(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `<id>-`: what a tenant object's name (or a tenant CRD's group) starts with.
    pub fn prefix(&self) -> String {
        format!("{}-", self.0)
    }

    /// Whether `name` belongs to this tenant: it starts with `<id>-` and has something after it.
    pub fn owns(&self, name: &str) -> bool {
        name.len() > ID_LEN + 1
            && name.as_bytes()[ID_LEN] == b'-'
            && name.starts_with(self.0.as_str())
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> SpecId {
        SpecId::Str(v.into())
    }

    #[test]
    fn valid_ids() {
        assert!(TenantId::parse("abc123", None).is_ok());
        assert!(TenantId::parse("abc123", Some(&s("abc123"))).is_ok());
        assert!(TenantId::parse("abc123", Some(&s(""))).is_ok());
    }

    #[test]
    fn kubezoo_integer_ids_agree_with_a_numeric_name() {
        assert_eq!(
            TenantId::parse("111111", Some(&SpecId::Int(111111)))
                .unwrap()
                .as_str(),
            "111111"
        );
        assert!(TenantId::parse("011111", Some(&SpecId::Int(11111))).is_ok());
        for (name, id) in [("111111", 111112), ("abc123", 123), ("111111", -111111)] {
            assert!(
                matches!(
                    TenantId::parse(name, Some(&SpecId::Int(id))),
                    Err(TenantIdError::Mismatch { .. })
                ),
                "{name} / {id}"
            );
        }
    }

    #[test]
    fn spec_id_decodes_from_an_integer_or_a_string() {
        let int: SpecId = serde_json::from_value(serde_json::json!(111111)).unwrap();
        assert_eq!(int, SpecId::Int(111111));
        let text: SpecId = serde_json::from_value(serde_json::json!("abc123")).unwrap();
        assert_eq!(text, s("abc123"));
        assert!(serde_json::from_value::<SpecId>(serde_json::json!(true)).is_err());
    }

    #[test]
    fn invalid_ids_are_refused() {
        for bad in [
            "", "abc12", "abc1234", "ABC123", "abc-12", "abc_12", "ab c12", "abç123",
        ] {
            assert!(
                matches!(
                    TenantId::parse(bad, None),
                    Err(TenantIdError::Invalid { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(
            TenantId::parse("abc123", Some(&s("abc124"))),
            Err(TenantIdError::Mismatch { .. })
        ));
    }

    #[test]
    fn prefix_includes_the_separator() {
        let id = TenantId::parse("abc123", None).unwrap();
        assert!(id.owns("abc123-ns"));
        assert!(id.owns("abc123-a.b.c"));
        assert!(
            !id.owns("abc123x-foo"),
            "another tenant's (or nobody's) object sharing a prefix"
        );
        assert!(!id.owns("abc1234-foo"));
        assert!(!id.owns("abc123"), "the bare id is not a tenant object");
        assert!(!id.owns("abc123-"), "nothing after the separator");
        assert!(!id.owns("abc124-foo"));
        assert!(!id.owns("system-abc123-foo"));
    }
}
