//! Where a cluster lives and as whom its teardown acts, read from its object as CAPA reads it
//! (pkg/cloud/scope/session.go): `spec.region`, and `spec.identityRef` followed through CAPA's
//! identity objects to a principal chain that `sweeper_aws::session` turns into
//! credentials.
//!
//! Each identity in the chain must allow the cluster's namespace (`allowedNamespaces`, checked
//! link by link as CAPA does). Anything that stops the chain — a namespace not allowed, a missing
//! identity or Secret, a malformed Secret, a cycle, an unknown kind — is an [`IdentityError`]:
//! the caller then makes no AWS call at all, with no other principal, and deletes nothing.

use crate::api::capa::{
    AWSClusterControllerIdentity, AWSClusterRoleIdentity, AWSClusterStaticIdentity,
    AllowedNamespaces, IdentityRef,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::core::{Selector, SelectorExt};
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use sweeper_aws::session::{
    Principal, RoleSpec, Session, SessionCache, SessionError, SessionSpec, StaticKeys,
};

pub const CONTROLLER_KIND: &str = "AWSClusterControllerIdentity";
pub const ROLE_KIND: &str = "AWSClusterRoleIdentity";
pub const STATIC_KIND: &str = "AWSClusterStaticIdentity";
/// CAPA's controller identity is a singleton of this name.
pub const CONTROLLER_NAME: &str = "default";
/// Chains longer than this are refused (CAPA has no limit; a real chain is two or three links).
const MAX_CHAIN: usize = 8;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum IdentityError {
    #[error("identityRef {0:?} names no kind or no name")]
    Incomplete(IdentityRef),
    #[error(
        "identityRef kind {kind:?} is not one of {CONTROLLER_KIND}, {ROLE_KIND}, {STATIC_KIND}"
    )]
    UnknownKind { kind: String },
    #[error(
        "{CONTROLLER_KIND} {name:?}: CAPA's controller identity is the singleton {CONTROLLER_NAME:?}"
    )]
    ControllerName { name: String },
    #[error("{identity} does not exist")]
    NotFound { identity: String },
    #[error("{identity} cannot be read: {reason}")]
    Unreadable { identity: String, reason: String },
    #[error("{identity} does not allow namespace {namespace:?} (allowedNamespaces: {rule})")]
    NotAllowed {
        identity: String,
        namespace: String,
        rule: String,
    },
    #[error("{identity}: its Secret {namespace}/{secret} does not exist")]
    SecretNotFound {
        identity: String,
        namespace: String,
        secret: String,
    },
    #[error("{identity}: its Secret {namespace}/{secret} {problem}")]
    SecretMalformed {
        identity: String,
        namespace: String,
        secret: String,
        problem: String,
    },
    #[error("{identity}: {problem}")]
    Malformed { identity: String, problem: String },
    #[error("identity chain has a cycle: {chain}")]
    Cycle { chain: String },
    #[error("identity chain longer than {MAX_CHAIN} links: {chain}")]
    TooLong { chain: String },
    #[error("spec.region {0:?} is not an AWS region name (like eu-west-1)")]
    BadRegion(String),
}

impl IdentityError {
    /// The condition reason: a Kubernetes-side problem the user fixes on the identity objects.
    pub fn reason(&self) -> &'static str {
        match self {
            IdentityError::NotAllowed { .. } => "IdentityNotAllowed",
            IdentityError::NotFound { .. } | IdentityError::SecretNotFound { .. } => {
                "IdentityNotFound"
            }
            IdentityError::Unreadable { .. } => "IdentityUnreadable",
            IdentityError::BadRegion(_) => "InvalidRegion",
            _ => "IdentityInvalid",
        }
    }
}

/// What a cluster object says about where it lives.
pub struct Placement<'a> {
    pub namespace: &'a str,
    pub region: Option<&'a str>,
    pub identity_ref: Option<&'a IdentityRef>,
}

/// Why a placement has no session: its identity chain stops, or AWS refuses the session. Both
/// name the identity.
#[derive(Debug, thiserror::Error)]
pub enum SessionRefused {
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// The session `at` acts in: its identity followed as CAPA does ([`resolve`]), then the cache's
/// session for it.
pub async fn session(
    client: &Client,
    capa_namespace: &str,
    sessions: &SessionCache,
    at: &Placement<'_>,
) -> Result<Arc<Session>, SessionRefused> {
    let spec = resolve(client, capa_namespace, at).await?;
    Ok(sessions.session(&spec).await?)
}

/// Resolves a cluster's session: its region and its identity chain, read fresh.
/// `capa_namespace`: where static identities' Secrets live (CAPA's own namespace).
pub async fn resolve(
    client: &Client,
    capa_namespace: &str,
    at: &Placement<'_>,
) -> Result<SessionSpec, IdentityError> {
    let region = at.region.filter(|r| !r.is_empty()).map(str::to_string);
    // The region becomes part of every endpoint's host name: only a region's shape is taken.
    if let Some(r) = &region
        && !is_region_name(r)
    {
        return Err(IdentityError::BadRegion(r.clone()));
    }
    let Some(first) = at.identity_ref else {
        return Ok(SessionSpec::controller(region));
    };
    let mut reader = Reader {
        client,
        capa_namespace,
        namespace: at.namespace,
        labels: None,
    };
    let mut chain: Vec<String> = Vec::new();
    let principal = reader.principal(first, &mut chain).await?;
    Ok(SessionSpec {
        region,
        principal,
        chain,
    })
}

struct Reader<'a> {
    client: &'a Client,
    capa_namespace: &'a str,
    namespace: &'a str,
    /// The cluster namespace's labels, read once when a selector needs them.
    labels: Option<BTreeMap<String, String>>,
}

fn label(kind: &str, name: &str) -> String {
    format!("{kind} {name}")
}

impl Reader<'_> {
    /// The principal `r` names, following role sources (iteratively: `chain` is the path).
    // Long: one match over CAPA's three identity kinds inside the loop that follows a role's
    // source, as CAPA's buildProvidersForRef does.
    async fn principal(
        &mut self,
        first: &IdentityRef,
        chain: &mut Vec<String>,
    ) -> Result<Principal, IdentityError> {
        // Roles from the outermost in; the innermost link is a controller or static principal.
        let mut roles: Vec<RoleSpec> = Vec::new();
        let mut next = first.clone();
        let base = loop {
            let (kind, name) = match (next.kind.as_deref(), next.name.as_deref()) {
                (Some(k), Some(n)) if !k.is_empty() && !n.is_empty() => (k, n),
                _ => return Err(IdentityError::Incomplete(next.clone())),
            };
            let here = label(kind, name);
            if chain.contains(&here) {
                chain.push(here);
                return Err(IdentityError::Cycle {
                    chain: chain.join(" <- "),
                });
            }
            chain.push(here.clone());
            if chain.len() > MAX_CHAIN {
                return Err(IdentityError::TooLong {
                    chain: chain.join(" <- "),
                });
            }
            match kind {
                CONTROLLER_KIND => {
                    if name != CONTROLLER_NAME {
                        return Err(IdentityError::ControllerName { name: name.into() });
                    }
                    let id = self
                        .get::<AWSClusterControllerIdentity>(&here, name)
                        .await?;
                    self.allowed(&here, id.spec.allowed_namespaces.as_ref())
                        .await?;
                    break Principal::Controller;
                }
                STATIC_KIND => {
                    let id = self.get::<AWSClusterStaticIdentity>(&here, name).await?;
                    self.allowed(&here, id.spec.allowed_namespaces.as_ref())
                        .await?;
                    break Principal::Static(self.keys(&here, &id.spec.secret_ref).await?);
                }
                ROLE_KIND => {
                    let id = self.get::<AWSClusterRoleIdentity>(&here, name).await?;
                    let s = id.spec;
                    self.allowed(&here, s.allowed_namespaces.as_ref()).await?;
                    if s.role_arn.parse::<sweeper_aws::arn::Arn>().is_err() {
                        return Err(IdentityError::Malformed {
                            identity: here,
                            problem: format!("roleARN {:?} is not an ARN", s.role_arn),
                        });
                    }
                    let duration = match s.duration_seconds {
                        None => None,
                        Some(d) if (900..=43_200).contains(&d) => {
                            Some(Duration::from_secs(d.unsigned_abs()))
                        }
                        Some(d) => {
                            return Err(IdentityError::Malformed {
                                identity: here,
                                problem: format!(
                                    "durationSeconds {d} is outside AWS's 900..=43200"
                                ),
                            });
                        }
                    };
                    roles.push(RoleSpec {
                        role_arn: s.role_arn,
                        session_name: s.session_name,
                        duration,
                        external_id: s.external_id,
                        inline_policy: s.inline_policy,
                        policy_arns: s.policy_arns.unwrap_or_default(),
                        source: Principal::Controller,
                    });
                    match s.source_identity_ref {
                        Some(src) => next = src,
                        // No source: CAPA assumes the role with the controller's own credentials.
                        None => break Principal::Controller,
                    }
                }
                other => {
                    return Err(IdentityError::UnknownKind { kind: other.into() });
                }
            }
        };
        // Wrap from the innermost role out: each role's source is the link after it.
        Ok(roles.into_iter().rev().fold(base, |source, mut role| {
            role.source = source;
            Principal::Role(Box::new(role))
        }))
    }

    async fn get<K>(&self, identity: &str, name: &str) -> Result<K, IdentityError>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        match Api::<K>::all(self.client.clone()).get_opt(name).await {
            Ok(Some(o)) => Ok(o),
            Ok(None) => Err(IdentityError::NotFound {
                identity: identity.into(),
            }),
            // Kind not served (CAPA's CRDs absent): the identity cannot exist.
            Err(kube::Error::Api(s)) if s.code == 404 => Err(IdentityError::NotFound {
                identity: identity.into(),
            }),
            Err(e) => Err(IdentityError::Unreadable {
                identity: identity.into(),
                reason: e.to_string(),
            }),
        }
    }

    /// Whether the identity allows the cluster's namespace ([`rule_for`]), reading the
    /// namespace's labels only when a selector needs them.
    async fn allowed(
        &mut self,
        identity: &str,
        rule: Option<&AllowedNamespaces>,
    ) -> Result<(), IdentityError> {
        let refuse = |shown: String| IdentityError::NotAllowed {
            identity: identity.into(),
            namespace: self.namespace.into(),
            rule: shown,
        };
        match rule_for(rule, self.namespace) {
            Rule::Allow => Ok(()),
            Rule::Deny(shown) => Err(refuse(shown)),
            Rule::Malformed(problem) => Err(IdentityError::Malformed {
                identity: identity.into(),
                problem,
            }),
            Rule::Select(selector, shown) => {
                let labels = self.namespace_labels(identity).await?;
                if selector.matches(&labels) {
                    Ok(())
                } else {
                    Err(refuse(shown))
                }
            }
        }
    }

    async fn namespace_labels(
        &mut self,
        identity: &str,
    ) -> Result<BTreeMap<String, String>, IdentityError> {
        if let Some(l) = &self.labels {
            return Ok(l.clone());
        }
        let ns = Api::<Namespace>::all(self.client.clone())
            .get_opt(self.namespace)
            .await
            .map_err(|e| IdentityError::Unreadable {
                identity: identity.into(),
                reason: format!("cannot read Namespace {}: {e}", self.namespace),
            })?;
        let labels = ns.and_then(|n| n.metadata.labels).unwrap_or_default();
        self.labels = Some(labels.clone());
        Ok(labels)
    }

    /// A static identity's keys, from its Secret in CAPA's namespace.
    async fn keys(&self, identity: &str, secret: &str) -> Result<StaticKeys, IdentityError> {
        let namespace = self.capa_namespace;
        let malformed = |problem: String| IdentityError::SecretMalformed {
            identity: identity.into(),
            namespace: namespace.into(),
            secret: secret.into(),
            problem,
        };
        if secret.is_empty() {
            return Err(IdentityError::Malformed {
                identity: identity.into(),
                problem: "spec.secretRef is empty".into(),
            });
        }
        let found = Api::<Secret>::namespaced(self.client.clone(), namespace)
            .get_opt(secret)
            .await
            .map_err(|e| IdentityError::Unreadable {
                identity: identity.into(),
                reason: format!("cannot read Secret {namespace}/{secret}: {e}"),
            })?;
        let Some(found) = found else {
            return Err(IdentityError::SecretNotFound {
                identity: identity.into(),
                namespace: namespace.into(),
                secret: secret.into(),
            });
        };
        static_keys(&found).map_err(|e| malformed(e.to_string()))
    }
}

/// `eu-west-1`, `us-gov-east-1`, `cn-north-1`, `us-isob-east-1`: lower-case words joined by
/// `-`, ending in a number.
pub fn is_region_name(r: &str) -> bool {
    let parts: Vec<&str> = r.split('-').collect();
    r.len() <= 32
        && parts.len() >= 3
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase()))
        && parts
            .last()
            .is_some_and(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// What an `allowedNamespaces` says about one namespace.
#[derive(Debug)]
pub enum Rule {
    Allow,
    /// Refused; the rule as written, for the message.
    Deny(String),
    /// Allowed when the namespace's labels match.
    Select(Selector, String),
    Malformed(String),
}

/// CAPA's rule (isClusterPermittedToUsePrincipal): absent or null allows no namespace; an empty
/// object allows every one; else the namespace must be in `list` or be selected by a
/// non-empty `selector` (an empty one, like `matchLabels: {}`, matches nothing). Pure.
pub fn rule_for(rule: Option<&AllowedNamespaces>, namespace: &str) -> Rule {
    let Some(rule) = rule else {
        return Rule::Deny("absent, which allows no namespace".into());
    };
    let selector_unset = rule
        .selector
        .as_ref()
        .is_none_or(|s| s.match_labels.is_none() && s.match_expressions.is_none());
    if rule.list.is_none() && selector_unset {
        return Rule::Allow;
    }
    if rule
        .list
        .as_ref()
        .is_some_and(|l| l.iter().any(|n| n == namespace))
    {
        return Rule::Allow;
    }
    let shown = serde_json::to_string(rule).unwrap_or_default();
    let Some(sel) = rule.selector.clone() else {
        return Rule::Deny(shown);
    };
    match Selector::try_from(sel) {
        Err(e) => Rule::Malformed(format!("allowedNamespaces.selector: {e}")),
        Ok(s) if s.selects_all() => Rule::Deny(shown),
        Ok(s) => Rule::Select(s, shown),
    }
}

/// What is wrong with a static identity's Secret; the text follows "its Secret ns/name".
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum SecretKeyError {
    #[error("has no key {0}")]
    Missing(&'static str),
    #[error("key {0} is not UTF-8 text")]
    NotText(&'static str),
    #[error("key {0} is empty")]
    Empty(&'static str),
}

/// The keys of a static identity's Secret (`AccessKeyID`, `SecretAccessKey`, optional
/// `SessionToken`), as text. Pure, so malformed Secrets are unit-tested.
pub fn static_keys(s: &Secret) -> Result<StaticKeys, SecretKeyError> {
    let mut data: BTreeMap<String, Vec<u8>> = s
        .data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    for (k, v) in s.string_data.clone().unwrap_or_default() {
        data.insert(k, v.into_bytes());
    }
    let text = |key: &'static str, required: bool| -> Result<Option<String>, SecretKeyError> {
        match data.get(key) {
            None if required => Err(SecretKeyError::Missing(key)),
            None => Ok(None),
            Some(v) => {
                let t = String::from_utf8(v.clone()).map_err(|_| SecretKeyError::NotText(key))?;
                let t = t.trim().to_string();
                if t.is_empty() {
                    if required {
                        Err(SecretKeyError::Empty(key))
                    } else {
                        Ok(None)
                    }
                } else {
                    Ok(Some(t))
                }
            }
        }
    };
    Ok(StaticKeys {
        access_key_id: text("AccessKeyID", true)?.unwrap_or_default(),
        secret_access_key: text("SecretAccessKey", true)?.unwrap_or_default(),
        session_token: text("SessionToken", false)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(pairs: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn a_static_secret_needs_both_keys_as_text() {
        let ok = static_keys(&secret(&[
            ("AccessKeyID", b"AKIA1"),
            ("SecretAccessKey", b"s\n"),
        ]))
        .unwrap();
        assert_eq!(ok.access_key_id, "AKIA1");
        assert_eq!(ok.secret_access_key, "s");
        assert_eq!(ok.session_token, None);
        let with_token = static_keys(&secret(&[
            ("AccessKeyID", b"AKIA1"),
            ("SecretAccessKey", b"s"),
            ("SessionToken", b"t"),
        ]))
        .unwrap();
        assert_eq!(with_token.session_token.as_deref(), Some("t"));
        for (bad, why) in [
            (secret(&[("SecretAccessKey", b"s")]), "no key AccessKeyID"),
            (
                secret(&[("AccessKeyID", b"a"), ("SecretAccessKey", b"")]),
                "SecretAccessKey is empty",
            ),
            (
                secret(&[("AccessKeyID", b"\xff"), ("SecretAccessKey", b"s")]),
                "not UTF-8",
            ),
            (Secret::default(), "no key AccessKeyID"),
        ] {
            let e = static_keys(&bad).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
    }

    fn rule(json: serde_json::Value) -> Option<AllowedNamespaces> {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn allowed_namespaces_follow_capas_rule() {
        let allow = |r: &Option<AllowedNamespaces>, ns: &str| match rule_for(r.as_ref(), ns) {
            Rule::Allow => Some(true),
            Rule::Deny(_) => Some(false),
            Rule::Select(..) | Rule::Malformed(_) => None,
        };
        assert_eq!(allow(&None, "a"), Some(false), "absent allows none");
        assert_eq!(
            allow(&rule(serde_json::json!(null)), "a"),
            Some(false),
            "null allows none"
        );
        assert_eq!(
            allow(&rule(serde_json::json!({})), "a"),
            Some(true),
            "{{}} allows all"
        );
        let listed = rule(serde_json::json!({"list": ["a", "b"]}));
        assert_eq!(allow(&listed, "a"), Some(true));
        assert_eq!(allow(&listed, "c"), Some(false));
        assert_eq!(
            allow(&rule(serde_json::json!({"list": []})), "a"),
            Some(false)
        );
        assert_eq!(
            allow(
                &rule(serde_json::json!({"selector": {"matchLabels": {}}})),
                "a"
            ),
            Some(false),
            "an empty selector matches nothing"
        );
        let sel = rule(serde_json::json!({"selector": {"matchLabels": {"team": "x"}}}));
        match rule_for(sel.as_ref(), "a") {
            Rule::Select(s, _) => {
                assert!(s.matches(&[("team".to_string(), "x".to_string())].into()));
                assert!(!s.matches(&Default::default()));
            }
            other => panic!("{other:?}"),
        }
        let bad = rule(serde_json::json!({"selector": {"matchExpressions": [
            {"key": "k", "operator": "Sideways", "values": ["v"]}]}}));
        assert!(matches!(rule_for(bad.as_ref(), "a"), Rule::Malformed(_)));
    }

    #[test]
    fn only_region_shaped_names_are_regions() {
        for ok in [
            "eu-west-1",
            "us-gov-east-1",
            "cn-north-1",
            "us-isob-east-1",
            "ap-southeast-4",
        ] {
            assert!(is_region_name(ok), "{ok}");
        }
        for bad in [
            "",
            "eu",
            "eu-west",
            "EU-WEST-1",
            "evil.example.com/x-1",
            "eu-west-1a",
            "a--1",
        ] {
            assert!(!is_region_name(bad), "{bad}");
        }
    }

    #[test]
    fn reasons_name_what_the_user_fixes() {
        let e = IdentityError::NotAllowed {
            identity: "AWSClusterRoleIdentity r".into(),
            namespace: "ns".into(),
            rule: "absent".into(),
        };
        assert_eq!(e.reason(), "IdentityNotAllowed");
        assert!(e.to_string().contains("AWSClusterRoleIdentity r"));
        assert_eq!(
            IdentityError::Cycle { chain: "a".into() }.reason(),
            "IdentityInvalid"
        );
    }
}

/// Identity resolution against a scripted API server: the exact reads a chain takes, and the
/// reads a refusal must not make (a refused identity's Secret is never read).
#[cfg(test)]
mod calls {
    use super::*;
    use crate::testing::MockApi;
    use http::Method;
    use serde_json::json;

    const IDS: &str = "/apis/infrastructure.cluster.x-k8s.io/v1beta2";
    const NS: &str = "team-a";

    fn identity_ref(kind: &str, name: &str) -> IdentityRef {
        IdentityRef {
            kind: Some(kind.into()),
            name: Some(name.into()),
        }
    }

    fn object(kind: &str, name: &str, spec: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": kind,
               "metadata": {"name": name}, "spec": spec})
    }

    async fn resolve_ref(client: &Client, r: &IdentityRef) -> Result<SessionSpec, IdentityError> {
        let at = Placement {
            namespace: NS,
            region: Some("eu-west-1"),
            identity_ref: Some(r),
        };
        resolve(client, "capa-system", &at).await
    }

    #[tokio::test]
    async fn a_role_assumed_with_a_static_identitys_keys_reads_the_chain_then_the_secret() {
        let (client, server) = MockApi::new();
        server
            .expect(
                Method::GET,
                &format!("{IDS}/awsclusterroleidentities/cross"),
            )
            .respond(
                200,
                object(
                    ROLE_KIND,
                    "cross",
                    json!({"allowedNamespaces": {"list": [NS]},
                           "roleARN": "arn:aws:iam::111122223333:role/gc",
                           "sourceIdentityRef": {"kind": STATIC_KIND, "name": "keys"}}),
                ),
            );
        server
            .expect(
                Method::GET,
                &format!("{IDS}/awsclusterstaticidentities/keys"),
            )
            .respond(
                200,
                object(
                    STATIC_KIND,
                    "keys",
                    json!({"allowedNamespaces": {}, "secretRef": "keys-secret"}),
                ),
            );
        server
            .expect(
                Method::GET,
                "/api/v1/namespaces/capa-system/secrets/keys-secret",
            )
            .respond(
                200,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keys-secret"},
                       "data": {"AccessKeyID": "QUtJQTE=", "SecretAccessKey": "cw=="}}),
            );

        let spec = resolve_ref(&client, &identity_ref(ROLE_KIND, "cross"))
            .await
            .unwrap();

        assert_eq!(spec.region.as_deref(), Some("eu-west-1"));
        assert_eq!(
            spec.chain,
            [
                "AWSClusterRoleIdentity cross",
                "AWSClusterStaticIdentity keys"
            ]
        );
        let Principal::Role(role) = &spec.principal else {
            panic!("a role: {:?}", spec.principal);
        };
        assert_eq!(role.role_arn, "arn:aws:iam::111122223333:role/gc");
        assert!(
            matches!(&role.source, Principal::Static(k) if k.access_key_id == "AKIA1"),
            "assumed with the static identity's keys"
        );
        assert_eq!(server.finish().len(), 3);
    }

    #[tokio::test]
    async fn a_namespace_the_identity_does_not_allow_is_refused_before_its_secret_is_read() {
        let (client, server) = MockApi::new();
        server
            .expect(
                Method::GET,
                &format!("{IDS}/awsclusterstaticidentities/keys"),
            )
            .respond(
                200,
                object(
                    STATIC_KIND,
                    "keys",
                    json!({"allowedNamespaces": {"list": ["team-b"]}, "secretRef": "keys-secret"}),
                ),
            );

        let err = resolve_ref(&client, &identity_ref(STATIC_KIND, "keys"))
            .await
            .unwrap_err();

        assert!(matches!(err, IdentityError::NotAllowed { .. }), "{err}");
        assert_eq!(server.finish().len(), 1, "no Secret read");
    }

    #[tokio::test]
    async fn a_selector_reads_the_namespaces_labels_and_a_cycle_stops_the_chain() {
        let (client, server) = MockApi::new();
        let selecting = json!({"allowedNamespaces": {"selector": {"matchLabels": {"team": "a"}}},
                               "roleARN": "arn:aws:iam::111122223333:role/gc",
                               "sourceIdentityRef": {"kind": ROLE_KIND, "name": "loop"}});
        server
            .expect(Method::GET, &format!("{IDS}/awsclusterroleidentities/loop"))
            .respond(200, object(ROLE_KIND, "loop", selecting));
        server
            .expect(Method::GET, &format!("/api/v1/namespaces/{NS}"))
            .respond(
                200,
                json!({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": NS, "labels": {"team": "a"}}}),
            );

        let err = resolve_ref(&client, &identity_ref(ROLE_KIND, "loop"))
            .await
            .unwrap_err();

        assert!(matches!(err, IdentityError::Cycle { .. }), "{err}");
        assert_eq!(
            server.finish().len(),
            2,
            "the role once, the namespace once; the cycle is seen before a second read"
        );
    }

    #[tokio::test]
    async fn no_identity_ref_is_the_controllers_own_credentials_with_no_call() {
        let (client, server) = MockApi::new();
        let at = Placement {
            namespace: NS,
            region: None,
            identity_ref: None,
        };
        let spec = resolve(&client, "capa-system", &at).await.unwrap();
        assert!(matches!(spec.principal, Principal::Controller));
        assert!(server.finish().is_empty());
    }
}
