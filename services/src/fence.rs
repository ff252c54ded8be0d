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
pub struct Fence(pub FenceFn);

impl fmt::Debug for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Fence")
    }
}

#[derive(Debug, thiserror::Error)]
#[error("AWS call refused: this replica does not hold the leader lease")]
pub struct NotLeader;

impl Intercept for Fence {
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
