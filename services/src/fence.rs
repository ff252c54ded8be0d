//! The AWS side of leader election's fence: an SDK interceptor that fails every operation before
//! it is sent while the fence is closed. Installed on every client the service builds, so a
//! replica that lost its lease makes no AWS call, whichever cleaner is running.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use std::fmt;
use std::sync::Arc;

/// `true` while this process may call AWS.
pub type FenceFn = Arc<dyn Fn() -> bool + Send + Sync>;

#[derive(Clone)]
pub struct AwsFence(pub FenceFn);

impl fmt::Debug for AwsFence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AwsFence")
    }
}

#[derive(Debug, thiserror::Error)]
#[error("AWS call refused: this replica does not hold the leader lease")]
pub struct NotLeader;

/// Whether `err` (an SDK error, say) is, or was caused by, the fence's refusal: found by type in
/// its chain of sources, never by its text. The SDK wraps it differently depending on when the
/// fence closed (a construction failure before the call, a dispatch failure before a resend).
pub fn refused_by_fence(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if e.is::<NotLeader>() {
            return true;
        }
        next = e.source();
    }
    false
}

impl Intercept for AwsFence {
    fn name(&self) -> &'static str {
        "sweeper-leader-fence"
    }

    // The first hook of an operation: nothing has been serialized, signed or sent yet.
    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if (self.0)() {
            Ok(())
        } else {
            tracing::warn!("AWS call fenced: not the leader");
            Err(Box::new(NotLeader))
        }
    }

    // Checked again per attempt, just before transmission: an operation that started while
    // leading must not send (or resend) its request after the lease is gone.
    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if (self.0)() {
            Ok(())
        } else {
            Err(Box::new(NotLeader))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::{FailureKind, failure_of};
    use crate::mocked::{RuleMode, mock};
    use aws_sdk_ec2::operation::describe_vpcs::DescribeVpcsError;
    use aws_smithy_mocks::MockResponseInterceptor;
    use aws_smithy_runtime_api::client::interceptors::SharedInterceptor;
    use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
    use aws_smithy_runtime_api::client::result::SdkError;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An EC2 client behind `fence`, whose HTTP client would accept the call. (An HTTP answer,
    /// not a mocked output: the mock sets an output over whatever error the attempt ended in.)
    fn ec2_behind(fence: AwsFence) -> aws_sdk_ec2::Client {
        let ok = mock!(aws_sdk_ec2::Client::describe_vpcs).then_http_response(|| {
            HttpResponse::new(
                aws_smithy_runtime_api::http::StatusCode::try_from(200u16).unwrap(),
                aws_smithy_types::body::SdkBody::from(
                    "<DescribeVpcsResponse></DescribeVpcsResponse>",
                ),
            )
        });
        let m = MockResponseInterceptor::new()
            .rule_mode(RuleMode::MatchAny)
            .with_rule(&ok);
        let mut b = aws_sdk_ec2::config::Builder::from(&crate::mocked::sdk())
            .retry_config(aws_config::retry::RetryConfig::disabled());
        b.push_interceptor(SharedInterceptor::new(fence));
        b.push_interceptor(SharedInterceptor::new(m));
        aws_sdk_ec2::Client::from_conf(b.build())
    }

    #[tokio::test]
    async fn a_fenced_call_is_leader_lost_by_type_whichever_way_the_sdk_wraps_it() {
        // Closed from the start: refused before serialization (a construction failure).
        let closed = ec2_behind(AwsFence(Arc::new(|| false)));
        let err = closed.describe_vpcs().send().await.unwrap_err();
        assert!(matches!(err, SdkError::ConstructionFailure(_)), "{err:?}");
        assert_eq!(failure_of(&err).kind, FailureKind::LeaderLost, "{err:?}");

        // Open when the operation starts, closed before it is sent (a dispatch failure).
        let checks = Arc::new(AtomicUsize::new(0));
        let seen = checks.clone();
        let late = ec2_behind(AwsFence(Arc::new(move || {
            seen.fetch_add(1, Ordering::SeqCst) == 0
        })));
        let err = late.describe_vpcs().send().await.unwrap_err();
        assert!(checks.load(Ordering::SeqCst) >= 2, "both hooks asked");
        assert!(matches!(err, SdkError::DispatchFailure(_)), "{err:?}");
        assert_eq!(failure_of(&err).kind, FailureKind::LeaderLost, "{err:?}");

        // Open: the call goes through.
        let open = ec2_behind(AwsFence(Arc::new(|| true)));
        assert!(open.describe_vpcs().send().await.is_ok());
    }

    #[test]
    fn only_the_fences_own_error_is_a_lost_lease_not_its_words() {
        let fenced: SdkError<DescribeVpcsError, HttpResponse> =
            SdkError::construction_failure(NotLeader);
        assert!(refused_by_fence(&fenced));
        assert_eq!(failure_of(&fenced).kind, FailureKind::LeaderLost);

        // An error that only says the same words is not the fence's.
        let same_words: SdkError<DescribeVpcsError, HttpResponse> =
            SdkError::construction_failure(NotLeader.to_string());
        assert!(!refused_by_fence(&same_words));
        assert_eq!(failure_of(&same_words).kind, FailureKind::Other);
    }
}
