//! Classification of AWS API errors and the short in-place retry every cleaner call goes through.
//!
//! Cleaners never match on SDK error enums: the error *code* (`ProvideErrorMetadata::code`) is
//! the same across the EC2, ELB and tagging SDKs, so one table decides for all of them.

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

/// A failed AWS call, reduced to what cleaners need. `code` is the AWS error code when the
/// service sent one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_deref().unwrap_or("no error code"))]
pub struct ApiFailure {
    pub class: ErrorClass,
    pub code: Option<String>,
    pub message: String,
    /// AWS asked to slow down (a throttling code or HTTP 429).
    pub throttling: bool,
}

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

/// Classifies an error from its AWS code and HTTP status. Pure, so it is unit-tested without AWS.
pub fn classify(code: Option<&str>, status: Option<u16>) -> ErrorClass {
    if let Some(code) = code {
        // Every "does not exist" code in EC2 and ELB contains NotFound (InvalidGroup.NotFound,
        // LoadBalancerNotFound, TargetGroupNotFound, AccessPointNotFound, ...).
        // IAM says NoSuchEntity instead.
        if code.contains("NotFound") || code == "NoSuchEntity" {
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

/// Reduces an SDK error to an [`ApiFailure`]. Timeouts and connection failures carry no code and
/// are transient: the next attempt may well succeed.
pub fn failure_of<E>(err: &SdkError<E, HttpResponse>) -> ApiFailure
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let message = aws_smithy_types::error::display::DisplayErrorContext(err).to_string();
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => ApiFailure {
            class: ErrorClass::Transient,
            code: None,
            message,
            throttling: false,
        },
        _ => {
            let code = err.code().map(str::to_string);
            let status = err.raw_response().map(|r| r.status().as_u16());
            ApiFailure {
                class: classify(code.as_deref(), status),
                throttling: crate::throttle::is_throttling(code.as_deref(), status),
                code,
                message,
            }
        }
    }
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
            }
            let res = fut.await.map_err(|e| failure_of(&e));
            if let Some(t) = &throttle {
                match &res {
                    Err(e) if e.throttling => t.throttled(service, std::time::Instant::now()),
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
    /// For `map_err` on a discovery call: `.map_err(CleanError::discover(KIND, "DescribeX"))`.
    pub fn discover(kind: &'static str, op: &'static str) -> impl Fn(ApiFailure) -> CleanError {
        move |source| CleanError::Discover { kind, op, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
