//! Classification of AWS API errors and the short in-place retry every cleaner call goes through.
//!
//! Cleaners never match on SDK error enums: the error *code* (`ProvideErrorMetadata::code`) is
//! the same across the EC2, ELB and tagging SDKs, so one table decides for all of them. A failure
//! is classified once, here, from its code and HTTP status (never its text): its [`ErrorClass`]
//! (what the retry and the cleaner do) and its [`FailureKind`] (what a pass's report tells the
//! service, which decides by it: forgetting a session, waiting out a lost lease).

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use backon::{ExponentialBuilder, Retryable};
use std::future::Future;
use std::time::Duration;

/// What a failed call means for the resource it was about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The resource is already gone: the cleaner's job is done.
    NotFound,
    /// Worth retrying: a dependency still exists, or AWS asked us to slow down, or it failed.
    Transient,
    /// Retrying will not help (access denied, validation, ...): report it with the ARN.
    Fatal,
}

/// Why a call failed, as the reports carry it across the crate boundary. Decisions read this,
/// never a message's text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// AWS refused the session's credentials (a revoked key, an expired or refused role): the
    /// session must be proven again.
    Credential,
    /// AWS asked to slow down (a throttling code or HTTP 429).
    Throttled,
    /// The resource does not exist (any more).
    NotFound,
    /// Something else must happen first: another resource still uses it, or a deletion (its own
    /// or one it waits for) is still under way. Clears with time.
    Dependency,
    /// The call was never sent: this replica does not hold the leader lease (the [`AwsFence`]).
    ///
    /// [`AwsFence`]: crate::fence::AwsFence
    LeaderLost,
    /// Anything else (access denied, validation, a server fault, no answer).
    #[default]
    Other,
}

/// A failed AWS call, reduced to what cleaners need. `code` is the AWS error code when the
/// service sent one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_deref().unwrap_or("no error code"))]
pub struct ApiFailure {
    pub class: ErrorClass,
    pub code: Option<String>,
    pub message: String,
    /// What it means for the service (a throttling answer slows the account down, see `call`).
    pub kind: FailureKind,
}

/// The codes meaning the session's credentials themselves are no longer good.
const CREDENTIAL_CODES: &[&str] = &[
    "AuthFailure",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "ExpiredToken",
    "ExpiredTokenException",
    "SignatureDoesNotMatch",
];

/// The codes meaning another resource, or a change under way, must go first.
const DEPENDENCY_CODES: &[&str] = &[
    "DependencyViolation",
    "ResourceInUse",
    "InvalidNetworkInterface.InUse",
    "IncorrectState",
];

/// Codes meaning "another resource still depends on this one" or "slow down": both clear with time.
const TRANSIENT_CODES: &[&str] = &[
    "DependencyViolation",
    "ResourceInUse",
    "InvalidNetworkInterface.InUse",
    "IncorrectState",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequests",
    "TooManyRequestsException",
    "ServiceUnavailable",
    "InternalError",
    "InternalFailure",
];

/// "Does not exist" codes that do not say NotFound.
const NOT_FOUND_CODES: &[&str] = &[
    "NoSuchEntity",
    "QueueDoesNotExist",
    "AWS.SimpleQueueService.NonExistentQueue",
    "NoSuchBucket",
    "NoSuchKey",
];

/// Classifies an error from its AWS code and HTTP status. Pure, so it is unit-tested without AWS.
pub fn classify(code: Option<&str>, status: Option<u16>) -> ErrorClass {
    if let Some(code) = code {
        // Every "does not exist" code in EC2 and ELB contains NotFound (InvalidGroup.NotFound,
        // LoadBalancerNotFound, TargetGroupNotFound, AccessPointNotFound, ...).
        // IAM says NoSuchEntity instead.
        // SQS says QueueDoesNotExist (its query-compatible code: NonExistentQueue), S3 NoSuch*.
        if code.contains("NotFound") || NOT_FOUND_CODES.contains(&code) {
            return ErrorClass::NotFound;
        }
        if TRANSIENT_CODES.contains(&code) {
            return ErrorClass::Transient;
        }
    }
    match status {
        Some(s) if s >= 500 => ErrorClass::Transient,
        Some(429) => ErrorClass::Transient,
        _ => ErrorClass::Fatal,
    }
}

/// What a failure means for the service, from its AWS code and HTTP status. Pure, so it is
/// unit-tested without AWS. (A lost lease has no code: [`failure_of`] finds the fence's error.)
pub fn kind_of(code: Option<&str>, status: Option<u16>) -> FailureKind {
    if crate::throttle::is_throttling(code, status) {
        return FailureKind::Throttled;
    }
    match code {
        Some(c) if CREDENTIAL_CODES.contains(&c) => FailureKind::Credential,
        Some(c) if DEPENDENCY_CODES.contains(&c) => FailureKind::Dependency,
        Some(_) if classify(code, status) == ErrorClass::NotFound => FailureKind::NotFound,
        _ => FailureKind::Other,
    }
}

/// Reduces an SDK error to an [`ApiFailure`]. Timeouts and connection failures carry no code and
/// are transient: the next attempt may well succeed.
pub fn failure_of<E>(err: &SdkError<E, HttpResponse>) -> ApiFailure
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let message = aws_smithy_types::error::display::DisplayErrorContext(err).to_string();
    // The fence refuses before sending, so the SDK reports it as a construction or a dispatch
    // failure: only its type in the chain tells a lost lease from a bad request or no network.
    let fenced = crate::fence::refused_by_fence(err);
    let (class, code, kind) = match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => {
            (ErrorClass::Transient, None, FailureKind::Other)
        }
        _ => {
            let code = err.code().map(str::to_string);
            let status = err.raw_response().map(|r| r.status().as_u16());
            let kind = kind_of(code.as_deref(), status);
            (classify(code.as_deref(), status), code, kind)
        }
    };
    let kind = if fenced {
        FailureKind::LeaderLost
    } else if credentials_refused(err) {
        FailureKind::Credential
    } else {
        kind
    };
    ApiFailure {
        class,
        code,
        message,
        kind,
    }
}

/// Whether the call failed because its credentials could not be had: the session's role (or
/// IRSA's web identity) could not be assumed, STS saying the source credentials are bad. The SDK
/// reports that as a dispatch failure with STS's own error deep in its chain of sources: found
/// there by type and judged by its code, as [`kind_of`] judges any other.
fn credentials_refused(err: &(dyn std::error::Error + 'static)) -> bool {
    use aws_sdk_sts::operation::assume_role::AssumeRoleError;
    use aws_sdk_sts::operation::assume_role_with_web_identity::AssumeRoleWithWebIdentityError;
    fn judged<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> FailureKind {
        kind_of(e.code(), e.raw_response().map(|r| r.status().as_u16()))
    }
    let mut next = Some(err);
    while let Some(e) = next {
        let kind = if let Some(sts) = e.downcast_ref::<SdkError<AssumeRoleError, HttpResponse>>() {
            Some(judged(sts))
        } else {
            e.downcast_ref::<SdkError<AssumeRoleWithWebIdentityError, HttpResponse>>()
                .map(judged)
        };
        if kind == Some(FailureKind::Credential) {
            return true;
        }
        next = e.source();
    }
    false
}

/// The in-place retry policy: short, because a resource still blocked after ~4s is reported as
/// remaining and retried by the next pass instead of holding this one up.
pub fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_max_times(3)
        .with_jitter()
}

/// Runs one AWS call with [`backoff`] on transient errors. `what` names the operation and the
/// resource (ARN or id) for the logs.
pub async fn call<T, E, F, Fut>(what: &str, f: F) -> Result<T, ApiFailure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let mut f = f;
    // The pass's per-(account, region) throttle, when it runs in a cluster's session.
    let throttle = crate::throttle::current();
    let service = crate::throttle::service_of(what);
    let attempt = || {
        let fut = f();
        let throttle = throttle.clone();
        async move {
            if let Some(t) = &throttle {
                let wait = t.wait_for(service, std::time::Instant::now());
                if !wait.is_zero() {
                    tracing::debug!(call = what, ?wait, "account and region throttled: waiting");
                    tokio::time::sleep(wait).await;
                }
                // Then the account's budget: every attempt, retries included, is one request.
                if let Some(b) = t.budget() {
                    b.acquire(what).await;
                }
            }
            let res = fut.await.map_err(|e| failure_of(&e));
            if let Some(t) = &throttle {
                match &res {
                    Err(e) if e.kind == FailureKind::Throttled => {
                        t.throttled(service, std::time::Instant::now())
                    }
                    Ok(_) => t.succeeded(service),
                    Err(_) => {}
                }
            }
            res
        }
    };
    attempt
        .retry(backoff())
        .when(|e: &ApiFailure| e.class == ErrorClass::Transient)
        .notify(|e: &ApiFailure, after: Duration| {
            tracing::debug!(call = what, error = %e, retry_in = ?after, "transient AWS error; retrying");
        })
        .await
}

/// A cleaner's or a Describe scan's failure, naming the kind and the resource (or the listing).
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    #[error("{kind} {id}: {op} failed: {source}")]
    Api {
        kind: &'static str,
        id: String,
        op: &'static str,
        source: ApiFailure,
    },
    #[error("discovering {kind}s: {op} failed: {source}")]
    Discover {
        kind: &'static str,
        op: &'static str,
        source: ApiFailure,
    },
}

impl CleanError {
    /// The failed call's [`FailureKind`].
    pub fn kind(&self) -> FailureKind {
        match self {
            CleanError::Api { source, .. } | CleanError::Discover { source, .. } => source.kind,
        }
    }

    /// The operation that failed (`DeleteVpc`, `DescribeInstances`, ...).
    pub fn op(&self) -> &'static str {
        match self {
            CleanError::Api { op, .. } | CleanError::Discover { op, .. } => op,
        }
    }

    /// For `map_err` on a locate step call: `.map_err(CleanError::discover(KIND, "DescribeX"))`.
    pub fn discover(kind: &'static str, op: &'static str) -> impl Fn(ApiFailure) -> CleanError {
        move |source| CleanError::Discover { kind, op, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::operation::describe_vpcs as ec2_err;

    #[test]
    fn not_found_codes_mean_done() {
        for code in [
            "InvalidGroup.NotFound",
            "LoadBalancerNotFound",
            "TargetGroupNotFound",
            "AccessPointNotFound",
            "InvalidInstanceID.NotFound",
            "InvalidVpcID.NotFound",
            "NatGatewayNotFound",
            // IAM (instance profiles, OIDC providers), EKS, CloudWatch Logs.
            "NoSuchEntity",
            "ResourceNotFoundException",
        ] {
            assert_eq!(
                classify(Some(code), Some(400)),
                ErrorClass::NotFound,
                "{code}"
            );
        }
    }

    #[test]
    fn dependencies_throttling_and_5xx_are_transient() {
        for code in [
            "DependencyViolation",
            "ResourceInUse",
            "Throttling",
            "RequestLimitExceeded",
            "TooManyRequests",
            "ThrottledException",
        ] {
            assert_eq!(
                classify(Some(code), Some(400)),
                ErrorClass::Transient,
                "{code}"
            );
        }
        assert_eq!(classify(None, Some(503)), ErrorClass::Transient);
        assert_eq!(classify(Some("Whatever"), Some(500)), ErrorClass::Transient);
        assert_eq!(classify(None, Some(429)), ErrorClass::Transient);
    }

    #[test]
    fn everything_else_is_fatal() {
        assert_eq!(
            classify(Some("UnauthorizedOperation"), Some(403)),
            ErrorClass::Fatal
        );
        assert_eq!(
            classify(Some("InvalidParameterValue"), Some(400)),
            ErrorClass::Fatal
        );
        assert_eq!(classify(None, None), ErrorClass::Fatal);
    }

    #[test]
    fn each_kind_comes_from_the_code_and_status_alone() {
        use FailureKind::*;
        for (code, status, kind) in [
            // The session's credentials: proven again.
            (Some("AuthFailure"), Some(401), Credential),
            (Some("InvalidClientTokenId"), Some(403), Credential),
            (Some("UnrecognizedClientException"), Some(400), Credential),
            (Some("ExpiredToken"), Some(400), Credential),
            (Some("ExpiredTokenException"), Some(400), Credential),
            (Some("SignatureDoesNotMatch"), Some(403), Credential),
            // Slow down: by code, or by HTTP 429 whatever the code.
            (Some("Throttling"), Some(400), Throttled),
            (Some("ThrottlingException"), Some(400), Throttled),
            (Some("RequestLimitExceeded"), Some(503), Throttled),
            (Some("TooManyRequestsException"), Some(400), Throttled),
            (None, Some(429), Throttled),
            (Some("Whatever"), Some(429), Throttled),
            (Some("InvalidGroup.NotFound"), Some(400), NotFound),
            (Some("LoadBalancerNotFound"), Some(400), NotFound),
            (Some("NoSuchEntity"), Some(404), NotFound),
            (Some("ResourceNotFoundException"), Some(404), NotFound),
            (Some("DependencyViolation"), Some(400), Dependency),
            (Some("ResourceInUse"), Some(400), Dependency),
            (Some("InvalidNetworkInterface.InUse"), Some(400), Dependency),
            (Some("IncorrectState"), Some(400), Dependency),
            // Denied, invalid, a server fault, no answer: nothing the service decides on.
            (Some("UnauthorizedOperation"), Some(403), Other),
            (Some("AccessDenied"), Some(403), Other),
            (Some("InvalidParameterValue"), Some(400), Other),
            (Some("InternalError"), Some(500), Other),
            (None, Some(503), Other),
            (None, None, Other),
        ] {
            assert_eq!(kind_of(code, status), kind, "{code:?} {status:?}");
        }
    }

    #[test]
    fn a_clean_error_carries_its_calls_kind_and_operation() {
        let e = CleanError::Api {
            kind: "security-group",
            id: "sg-1".into(),
            op: "DeleteSecurityGroup",
            source: ApiFailure {
                class: ErrorClass::Fatal,
                code: Some("AuthFailure".into()),
                message: "mocked".into(),
                kind: kind_of(Some("AuthFailure"), Some(401)),
            },
        };
        assert_eq!(
            (e.kind(), e.op()),
            (FailureKind::Credential, "DeleteSecurityGroup")
        );
    }

    #[test]
    fn a_role_sts_refuses_to_renew_is_a_credential_failure_of_the_call_it_held_up() {
        use aws_credential_types::provider::error::CredentialsError;
        use aws_sdk_sts::operation::assume_role::AssumeRoleError;
        use aws_smithy_runtime_api::client::result::ConnectorError;
        use aws_smithy_types::body::SdkBody;
        use aws_smithy_types::error::ErrorMetadata;
        let refused =
            |code: &str, status: u16| -> SdkError<ec2_err::DescribeVpcsError, HttpResponse> {
                let sts = SdkError::<AssumeRoleError, HttpResponse>::service_error(
                    AssumeRoleError::generic(ErrorMetadata::builder().code(code).build()),
                    HttpResponse::new(status.try_into().unwrap(), SdkBody::empty()),
                );
                SdkError::dispatch_failure(ConnectorError::other(
                    Box::new(CredentialsError::provider_error(sts)),
                    None,
                ))
            };
        assert_eq!(
            failure_of(&refused("InvalidClientTokenId", 403)).kind,
            FailureKind::Credential
        );
        assert_eq!(
            failure_of(&refused("ExpiredToken", 400)).kind,
            FailureKind::Credential
        );
        // STS throttled or down: the credentials may be good, so no verdict on them.
        assert_eq!(
            failure_of(&refused("Throttling", 400)).kind,
            FailureKind::Other
        );
        assert_eq!(
            failure_of(&refused("InternalFailure", 500)).kind,
            FailureKind::Other
        );
    }
}
