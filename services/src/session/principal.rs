//! Who a cluster's teardown acts as, as plain data: the principal chain CAPA's identity objects
//! describe (pkg/cloud/scope/session.go), resolved from Kubernetes by the binary and turned into
//! credentials here. Plain data, so it is the session cache's key: a changed identity object or
//! Secret resolves to another chain, and so to other clients.

use std::fmt;
use std::time::Duration;

/// One link of a principal chain.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    /// sweeper's own credentials: its environment, IRSA, instance profile (the standard chain).
    /// No `identityRef`, or an `AWSClusterControllerIdentity`.
    Controller,
    /// An `AWSClusterStaticIdentity`'s access key, read from its Secret.
    Static(StaticKeys),
    /// An `AWSClusterRoleIdentity`: `role` is assumed with the credentials of `source`.
    Role(Box<RoleSpec>),
}

/// Static credentials. Debug never shows the secret parts.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct StaticKeys {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl fmt::Debug for StaticKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticKeys")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// An AssumeRole step, with the fields of CAPA's `AWSClusterRoleIdentity`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RoleSpec {
    pub role_arn: String,
    pub session_name: Option<String>,
    pub duration: Option<Duration>,
    pub external_id: Option<String>,
    pub inline_policy: Option<String>,
    pub policy_arns: Vec<String>,
    /// Whose credentials assume the role.
    pub source: Principal,
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Principal::Controller => f.write_str("Controller"),
            Principal::Static(k) => k.fmt(f),
            Principal::Role(r) => r.fmt(f),
        }
    }
}

/// Where and as whom one cluster's teardown runs: the session cache's key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionSpec {
    /// `spec.region`; `None` means sweeper's own default region.
    pub region: Option<String>,
    pub principal: Principal,
    /// The identity objects the chain was read from, outermost first (`AWSClusterRoleIdentity
    /// cross`, then its source ...), for messages, status and audit records. Empty without an
    /// `identityRef`.
    pub chain: Vec<String>,
}

impl SessionSpec {
    /// sweeper's own credentials in `region`.
    pub fn controller(region: Option<String>) -> Self {
        SessionSpec {
            region,
            principal: Principal::Controller,
            chain: Vec::new(),
        }
    }

    /// The identity chain as users read it.
    pub fn chain_label(&self) -> String {
        if self.chain.is_empty() {
            "sweeper's own credentials (no identityRef)".to_string()
        } else {
            self.chain.join(" <- ")
        }
    }
}

/// The AWS partition a region belongs to (`aws`, `aws-cn`, `aws-us-gov`, the isolated ones):
/// what an ARN of that region must say.
pub fn partition_of(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else if region.starts_with("us-isob-") {
        "aws-iso-b"
    } else if region.starts_with("us-iso-") {
        "aws-iso"
    } else if region.starts_with("eu-isoe-") {
        "aws-iso-e"
    } else if region.starts_with("us-isof-") {
        "aws-iso-f"
    } else {
        "aws"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_follow_the_region() {
        assert_eq!(partition_of("eu-west-1"), "aws");
        assert_eq!(partition_of("cn-north-1"), "aws-cn");
        assert_eq!(partition_of("cn-northwest-1"), "aws-cn");
        assert_eq!(partition_of("us-gov-west-1"), "aws-us-gov");
        assert_eq!(partition_of("us-iso-east-1"), "aws-iso");
        assert_eq!(partition_of("us-isob-east-1"), "aws-iso-b");
    }

    #[test]
    fn static_keys_never_print_their_secret() {
        let p = Principal::Static(StaticKeys {
            access_key_id: "AKIA1".into(),
            secret_access_key: "s3cr3t".into(),
            session_token: Some("t0k3n".into()),
        });
        let shown = format!("{p:?}");
        assert!(shown.contains("AKIA1"), "{shown}");
        assert!(
            !shown.contains("s3cr3t") && !shown.contains("t0k3n"),
            "{shown}"
        );
    }

    #[test]
    fn a_changed_secret_is_another_session() {
        let spec = |secret: &str| SessionSpec {
            region: Some("eu-west-1".into()),
            principal: Principal::Static(StaticKeys {
                access_key_id: "AKIA1".into(),
                secret_access_key: secret.into(),
                session_token: None,
            }),
            chain: vec!["AWSClusterStaticIdentity s".into()],
        };
        assert_ne!(spec("a"), spec("b"));
        assert_eq!(spec("a"), spec("a"));
    }
}
