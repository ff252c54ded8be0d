//! Tenant ids and the name prefix that marks a tenant's objects.
//!
//! KubeZoo's own check compared names against the id WITHOUT the separator, so tenant `abc`
//! would take the objects of tenant `abcd`. Here the prefix always includes the `-` separator,
//! and an id is validated before it is ever used as a prefix.

use std::fmt;

pub const ID_LEN: usize = 6;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TenantId(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TenantIdError {
    #[error("tenant id {id:?} is invalid: it must be exactly {ID_LEN} characters of [a-z0-9]")]
    Invalid { id: String },
    #[error("tenant {name:?} has spec.id {id:?}: the id must equal the object's name")]
    Mismatch { name: String, id: String },
}

impl TenantId {
    /// Validates the tenant's id: its name, and `spec.id` when set must agree.
    pub fn parse(name: &str, spec_id: Option<&str>) -> Result<TenantId, TenantIdError> {
        let valid = name.len() == ID_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !valid {
            return Err(TenantIdError::Invalid {
                id: name.to_string(),
            });
        }
        if let Some(id) = spec_id.filter(|s| !s.is_empty() && *s != name) {
            return Err(TenantIdError::Mismatch {
                name: name.to_string(),
                id: id.to_string(),
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

    #[test]
    fn valid_ids() {
        assert!(TenantId::parse("abc123", None).is_ok());
        assert!(TenantId::parse("abc123", Some("abc123")).is_ok());
        assert!(TenantId::parse("abc123", Some("")).is_ok());
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
            TenantId::parse("abc123", Some("abc124")),
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
