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

// Kept below `model` (which holds them in `AwsClients`); re-exported where sessions build them.
pub use crate::listings;
mod principal;
// Below `model` (AwsClients carries both), re-exported here where sessions use them.
pub use crate::scope::Scope;
pub use crate::throttle;

pub use principal::{Principal, RoleSpec, SessionSpec, StaticKeys, partition_of};

use crate::arn::Arn;
use crate::budget::{AccountBudget, Budget};
use crate::errors::{FailureKind, kind_of};
use crate::fence::AwsFence;
use crate::model::{AwsClients, Failure};
use crate::throttle::Throttle;
use aws_config::SdkConfig;
use aws_config::sts::AssumeRoleProvider;
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use aws_types::region::Region;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

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
    /// AWS could not be asked (throttled, unreachable, 5xx, this replica not the leader): no
    /// verdict on the identity, so nothing is reported on the object; tried again later.
    #[error("identity {chain} in region {region} could not be checked now: {reason}")]
    Unavailable {
        chain: String,
        region: String,
        reason: String,
    },
}

impl SessionError {
    /// True when AWS refused the identity (as opposed to not answering).
    pub fn is_refusal(&self) -> bool {
        !matches!(self, SessionError::Unavailable { .. })
    }
}

/// Lets tests and benchmarks wrap a session's configuration (a recorder, injected throttling,
/// added latency) before its clients are built. Production code installs none.
pub type ConfigHook = Arc<dyn Fn(&SessionSpec, SdkConfig) -> SdkConfig + Send + Sync>;

/// At most this many sessions are kept; the least recently used goes first.
const MAX_SESSIONS: usize = 256;

/// The sessions of every cluster, built on demand. Cheap to share (`Arc`).
pub struct SessionCache {
    base: SdkConfig,
    fence: Option<AwsFence>,
    hook: Option<ConfigHook>,
    sessions: Mutex<HashMap<SessionSpec, (Arc<Session>, Instant)>>,
    /// Throttling state per (account, region): sessions of one account and region share it,
    /// and no other account's calls ever wait on it.
    throttles: Mutex<HashMap<(String, String), Arc<Throttle>>>,
    /// IAM's listings per account, shared by its sessions (see `listings`).
    listings: Mutex<HashMap<String, Arc<listings::Listings>>>,
    /// Every account's request budget (see `budget`): what each is given, and each account's
    /// bucket, shared by its sessions in all regions.
    budget: AccountBudget,
    budgets: Mutex<HashMap<String, Option<Arc<Budget>>>>,
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
    /// own credentials), every client fenced by `fence` when given.
    pub fn new(base: SdkConfig, fence: Option<AwsFence>) -> Self {
        SessionCache {
            base,
            fence,
            hook: None,
            sessions: Mutex::new(HashMap::new()),
            throttles: Mutex::new(HashMap::new()),
            listings: Mutex::new(HashMap::new()),
            budget: AccountBudget::UNLIMITED,
            budgets: Mutex::new(HashMap::new()),
        }
    }

    /// Gives every account's sessions `budget` (requests per second, burst) to share. Without
    /// it, no account has one (tests; `sweeper run` always sets it: `--aws-account-qps`).
    pub fn with_account_budget(mut self, budget: AccountBudget) -> Self {
        self.budget = budget;
        self
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

    fn listings(&self, scope: &Scope) -> Arc<listings::Listings> {
        self.listings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(scope.account.clone())
            .or_default()
            .clone()
    }

    fn throttle(&self, scope: &Scope) -> Arc<Throttle> {
        let budget = self
            .budgets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(scope.account.clone())
            .or_insert_with(|| Budget::new(&scope.account, self.budget).map(Arc::new))
            .clone();
        self.throttles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((scope.account.clone(), scope.region.clone()))
            .or_insert_with(|| Arc::new(Throttle::with_budget(budget)))
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
        let (account, caller) = match self.caller_identity(&sdk).await {
            Ok(found) => found,
            Err(Proof::Refused(reason)) => {
                return Err(SessionError::Refused {
                    chain,
                    region,
                    reason,
                });
            }
            Err(Proof::Unavailable(reason)) => {
                return Err(SessionError::Unavailable {
                    chain,
                    region,
                    reason,
                });
            }
        };
        // The caller's ARN names the partition authoritatively; the region's prefix is the
        // fallback for an ARN that does not parse.
        let partition = caller
            .parse::<Arn>()
            .map(|a| a.partition)
            .unwrap_or_else(|_| partition_of(&region).to_string());
        let scope = Scope {
            partition,
            region: region.clone(),
            account,
        };
        let clients = AwsClients::for_session(&sdk, self.fence.clone(), self.throttle(&scope));
        tracing::info!(%region, account = %scope.account, %caller, identity = %chain, "AWS session built");
        Ok(Session {
            clients: clients
                .with_scope(scope.clone())
                .with_listings(self.listings(&scope)),
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
    async fn caller_identity(&self, sdk: &SdkConfig) -> Result<(String, String), Proof> {
        let mut conf = aws_sdk_sts::config::Builder::from(sdk)
            .retry_config(aws_config::retry::RetryConfig::disabled());
        if let Some(g) = &self.fence {
            conf = conf.interceptor(g.clone());
        }
        let sts = aws_sdk_sts::Client::from_conf(conf.build());
        let out = sts
            .get_caller_identity()
            .send()
            .await
            .map_err(|e| proof_failure(&e))?;
        let account = out
            .account()
            .filter(|a| !a.is_empty())
            .ok_or_else(|| Proof::Refused("GetCallerIdentity named no account".into()))?;
        Ok((
            account.to_string(),
            out.arn().unwrap_or_default().to_string(),
        ))
    }

    /// Drops the session of `spec` when `failures` (a pass's) show its credentials are no longer
    /// good ([`FailureKind::Credential`]: a revoked key, an expired or refused assumed role), so
    /// the next pass proves it again and reports a refusal on the object. Throttling, a
    /// dependency or any other failure keeps it.
    pub fn forget_if_credentials_failed<'a>(
        &self,
        spec: &SessionSpec,
        failures: impl IntoIterator<Item = &'a Failure>,
    ) -> bool {
        let failed = failures
            .into_iter()
            .any(|f| f.kind == FailureKind::Credential);
        if failed {
            tracing::warn!(identity = %spec.chain_label(), "AWS refused the session's credentials mid-teardown: proving it again");
            self.forget(spec);
        }
        failed
    }
}

/// Why a session could not be proven.
enum Proof {
    Refused(String),
    Unavailable(String),
}

/// Sorts a failed `GetCallerIdentity`: AWS refusing the credentials (an error code that is not
/// throttling or a server fault, or the credential provider failing, e.g. AssumeRole denied) is
/// a refusal; no answer at all (timeouts, connection errors, throttling, 5xx, this replica not
/// the leader) is not. The text is made stable (request ids dropped) because it goes into the
/// object's condition, which is rewritten, with an Event, only when it changes.
fn proof_failure<E>(e: &SdkError<E, HttpResponse>) -> Proof
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let text = stable(&DisplayErrorContext(e).to_string());
    // The fence's refusal is found by its type in the error's chain, wherever the SDK put it.
    if crate::fence::refused_by_fence(e) {
        return Proof::Unavailable(text);
    }
    match e {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => Proof::Unavailable(text),
        SdkError::DispatchFailure(d) if d.is_io() || d.is_timeout() => Proof::Unavailable(text),
        SdkError::ServiceError(_) => {
            let code = e.code().unwrap_or_default();
            let status = e.raw_response().map(|r| r.status().as_u16());
            let reason = format!("{code}: {}", e.message().map(stable).unwrap_or_default());
            if kind_of(Some(code), status) == FailureKind::Throttled
                || status.is_some_and(|s| s >= 500)
            {
                Proof::Unavailable(reason)
            } else {
                Proof::Refused(reason)
            }
        }
        _ => Proof::Refused(text),
    }
}

/// `text` without what differs between two tellings of the same failure: request ids and other
/// long hexadecimal tokens become `…`.
fn stable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        let hexish = token.len() >= 16
            && token.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
            && token.chars().filter(|c| c.is_ascii_digit()).count() >= 4;
        out.push_str(if hexish { "…" } else { token });
        token.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            out.push(c);
        }
    }
    flush(&mut token, &mut out);
    out
}

#[cfg(test)]
mod tests;
