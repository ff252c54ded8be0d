//! One AWS session per cluster, as CAPA builds one (pkg/cloud/scope/session.go): the cluster's
//! own region and the credentials of the identity chain its object names, never sweeper's
//! default with another cluster's name.
//!
//! - The chain ([`Principal`]) becomes credentials with aws-config's own providers: static keys,
//!   the standard chain for the controller, and `sts::AssumeRoleProvider` for each role, each
//!   role assumed with its source's credentials. The SDK's lazy identity cache holds them and
//!   refreshes assumed-role credentials before they expire.
//! - A session is proven before it is used: one `sts:GetCallerIdentity` with the cluster's own
//!   credentials names the account (so discovered ARNs can be checked against it) and turns a
//!   refused AssumeRole or a bad key into an error before anything is looked up or deleted.
//! - Sessions are cached by their [`SessionSpec`] (region and the whole chain, Secret contents
//!   included), so an identity object or Secret that changes resolves to a new key and new
//!   clients; the cache is bounded and drops the least recently used.

mod principal;
pub mod throttle;

pub use principal::{Principal, RoleSpec, SessionSpec, StaticKeys, partition_of};

use crate::aws::arn::Arn;
use crate::aws::gate::Gate;
use crate::aws::model::AwsClients;
use aws_config::SdkConfig;
use aws_config::sts::AssumeRoleProvider;
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_types::region::Region;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use throttle::Throttle;

/// The account, region and partition a session acts in: anything discovered that names another
/// is not the cluster's, whatever its tags say.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    pub partition: String,
    pub region: String,
    pub account: String,
}

impl Scope {
    /// Why `arn` is outside this scope, or `None` when it is inside.
    pub fn foreign(&self, arn: &Arn) -> Option<String> {
        let mismatch = |what: &str, got: &str, want: &str| {
            Some(format!("{what} {got:?}, not the session's {want:?}"))
        };
        if arn.partition != self.partition {
            return mismatch("partition", &arn.partition, &self.partition);
        }
        if arn.region != self.region {
            return mismatch("region", &arn.region, &self.region);
        }
        if arn.account != self.account {
            return mismatch("account", &arn.account, &self.account);
        }
        None
    }
}

/// A proven session: its clients, where it acts and as whom.
#[derive(Debug)]
pub struct Session {
    pub clients: AwsClients,
    pub scope: Scope,
    /// The ARN `GetCallerIdentity` answered with.
    pub caller: String,
    /// The identity chain it was built from, as users read it.
    pub chain: String,
}

impl Session {
    /// `region R, account A, identity CHAIN`: what conditions, status and audit records show.
    pub fn describe(&self) -> String {
        format!(
            "region {}, account {}, identity {}",
            self.scope.region, self.scope.account, self.chain
        )
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SessionError {
    #[error(
        "no region: the cluster object has no spec.region and sweeper has no default region (AWS_REGION)"
    )]
    NoRegion,
    #[error(
        "sweeper has no credentials of its own (environment, IRSA, instance profile) for {chain}"
    )]
    NoControllerCredentials { chain: String },
    #[error("identity {chain} in region {region} was refused by AWS: {reason}")]
    Refused {
        chain: String,
        region: String,
        reason: String,
    },
}

/// Lets tests and benchmarks wrap a session's configuration (a recorder, injected throttling,
/// added latency) before its clients are built. Production code installs none.
pub type ConfigHook = Arc<dyn Fn(&SessionSpec, SdkConfig) -> SdkConfig + Send + Sync>;

/// At most this many sessions are kept; the least recently used goes first.
const MAX_SESSIONS: usize = 256;

/// The sessions of every cluster, built on demand. Cheap to share (`Arc`).
pub struct SessionCache {
    base: SdkConfig,
    gate: Option<Gate>,
    hook: Option<ConfigHook>,
    sessions: Mutex<HashMap<SessionSpec, (Arc<Session>, Instant)>>,
    /// Throttling state per (account, region): sessions of one account and region share it,
    /// and no other account's calls ever wait on it.
    throttles: Mutex<HashMap<(String, String), Arc<Throttle>>>,
}

impl std::fmt::Debug for SessionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCache")
            .field("region", &self.base.region())
            .finish_non_exhaustive()
    }
}

impl SessionCache {
    /// Sessions on top of `base` (sweeper's own configuration: endpoint, default region, its
    /// own credentials), every client fenced by `gate` when given.
    pub fn new(base: SdkConfig, gate: Option<Gate>) -> Self {
        SessionCache {
            base,
            gate,
            hook: None,
            sessions: Mutex::new(HashMap::new()),
            throttles: Mutex::new(HashMap::new()),
        }
    }

    /// Wraps every session's configuration with `hook` (tests and benchmarks only).
    pub fn with_hook(mut self, hook: ConfigHook) -> Self {
        self.hook = Some(hook);
        self
    }

    /// sweeper's own default region, if it has one.
    pub fn default_region(&self) -> Option<String> {
        self.base.region().map(|r| r.to_string())
    }

    /// The session for `spec`: cached, or built and proven now.
    pub async fn session(&self, spec: &SessionSpec) -> Result<Arc<Session>, SessionError> {
        if let Some(s) = self.cached(spec) {
            return Ok(s);
        }
        let session = Arc::new(self.build(spec).await?);
        let mut map = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(spec.clone(), (session.clone(), Instant::now()));
        Ok(session)
    }

    /// Forgets `spec`'s session, so the next use builds and proves it again (after AWS refused
    /// its credentials mid-teardown, say).
    pub fn forget(&self, spec: &SessionSpec) {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(spec);
    }

    fn cached(&self, spec: &SessionSpec) -> Option<Arc<Session>> {
        let mut map = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let (s, used) = map.get_mut(spec)?;
        *used = Instant::now();
        Some(s.clone())
    }

    fn throttle(&self, scope: &Scope) -> Arc<Throttle> {
        self.throttles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((scope.account.clone(), scope.region.clone()))
            .or_default()
            .clone()
    }

    async fn build(&self, spec: &SessionSpec) -> Result<Session, SessionError> {
        let region = spec
            .region
            .clone()
            .filter(|r| !r.is_empty())
            .or_else(|| self.default_region())
            .ok_or(SessionError::NoRegion)?;
        let chain = spec.chain_label();
        let region_ = Region::new(region.clone());
        let creds = self.credentials(&spec.principal, &region_, &chain).await?;
        let mut sdk = self
            .base
            .clone()
            .into_builder()
            .region(region_)
            .credentials_provider(creds)
            .build();
        if let Some(hook) = &self.hook {
            sdk = hook(spec, sdk);
        }
        let refused = |reason: String| SessionError::Refused {
            chain: chain.clone(),
            region: region.clone(),
            reason,
        };
        let (account, caller) = self.caller_identity(&sdk).await.map_err(refused)?;
        let scope = Scope {
            partition: partition_of(&region).to_string(),
            region: region.clone(),
            account,
        };
        let clients = AwsClients::for_session(&sdk, self.gate.clone(), self.throttle(&scope));
        tracing::info!(%region, account = %scope.account, %caller, identity = %chain, "AWS session built");
        Ok(Session {
            clients: clients.with_scope(scope.clone()),
            scope,
            caller,
            chain,
        })
    }

    /// The credentials of one link of the chain (boxed: roles recurse into their source).
    fn credentials<'a>(
        &'a self,
        p: &'a Principal,
        region: &'a Region,
        chain: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<SharedCredentialsProvider, SessionError>> {
        Box::pin(async move {
            match p {
                Principal::Controller => self.base.credentials_provider().ok_or_else(|| {
                    SessionError::NoControllerCredentials {
                        chain: chain.to_string(),
                    }
                }),
                Principal::Static(k) => Ok(SharedCredentialsProvider::new(Credentials::new(
                    k.access_key_id.clone(),
                    k.secret_access_key.clone(),
                    k.session_token.clone(),
                    None,
                    "sweeper-static-identity",
                ))),
                Principal::Role(r) => {
                    let source = self.credentials(&r.source, region, chain).await?;
                    // The role is assumed in the cluster's region with its source's
                    // credentials, as CAPA does.
                    let conf = self
                        .base
                        .clone()
                        .into_builder()
                        .region(region.clone())
                        .credentials_provider(source)
                        .build();
                    let mut b = AssumeRoleProvider::builder(r.role_arn.clone())
                        .configure(&conf)
                        .region(region.clone())
                        .session_name(
                            r.session_name
                                .clone()
                                .filter(|n| !n.is_empty())
                                .unwrap_or_else(|| "sweeper".to_string()),
                        );
                    if let Some(id) = r.external_id.clone().filter(|s| !s.is_empty()) {
                        b = b.external_id(id);
                    }
                    if let Some(p) = r.inline_policy.clone().filter(|s| !s.is_empty()) {
                        b = b.policy(p);
                    }
                    if !r.policy_arns.is_empty() {
                        b = b.policy_arns(r.policy_arns.clone());
                    }
                    if let Some(d) = r.duration {
                        b = b.session_length(d);
                    }
                    Ok(SharedCredentialsProvider::new(b.build().await))
                }
            }
        })
    }

    /// `sts:GetCallerIdentity` with the session's own credentials: (account, caller ARN).
    async fn caller_identity(&self, sdk: &SdkConfig) -> Result<(String, String), String> {
        let mut conf = aws_sdk_sts::config::Builder::from(sdk)
            .retry_config(aws_config::retry::RetryConfig::disabled());
        if let Some(g) = &self.gate {
            conf = conf.interceptor(g.clone());
        }
        let sts = aws_sdk_sts::Client::from_conf(conf.build());
        let out = sts
            .get_caller_identity()
            .send()
            .await
            .map_err(|e| DisplayErrorContext(e).to_string())?;
        let account = out
            .account()
            .filter(|a| !a.is_empty())
            .ok_or("GetCallerIdentity named no account")?;
        Ok((
            account.to_string(),
            out.arn().unwrap_or_default().to_string(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sessions_own_partition_region_and_account_are_in_scope() {
        let scope = Scope {
            partition: "aws".into(),
            region: "eu-west-1".into(),
            account: "111111111111".into(),
        };
        let arn = |s: &str| s.parse::<Arn>().unwrap();
        assert_eq!(
            scope.foreign(&arn(
                "arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/net/a/1"
            )),
            None
        );
        for other in [
            "arn:aws:elasticloadbalancing:eu-west-1:222222222222:loadbalancer/net/a/1",
            "arn:aws:elasticloadbalancing:us-east-1:111111111111:loadbalancer/net/a/1",
            "arn:aws-cn:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/net/a/1",
            "arn:aws:ec2::111111111111:security-group/sg-1",
        ] {
            assert!(scope.foreign(&arn(other)).is_some(), "{other}");
        }
    }
}
