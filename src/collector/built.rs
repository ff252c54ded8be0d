//! What `sweeper run` needs of a built collector, and nothing more: the readiness components it
//! reports, the HTTP routes it serves, and a future that runs it until shutdown. `run` builds a list
//! of these from the feature gates (`Registered::build`, under the `CollectorDescriptor`'s name: a collector has
//! one name) and treats them alike. A collector is built on every replica (a standby serves its
//! routes) but runs only on the leader: that is why building and running are two steps.

use crate::engine::discovery::{DiscoveryReport, RefreshNow};
use crate::engine::health::Health;
use futures::future::BoxFuture;
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What a leading replica hands every collector when it starts it.
#[derive(Clone)]
pub struct RunEnv {
    /// Each discovery refresh (None until the first one).
    pub discovery: watch::Receiver<Option<Arc<DiscoveryReport>>>,
    /// Asks for a discovery before the next interval (see [`RefreshNow`]).
    pub refresh_discovery: RefreshNow,
    /// Readiness: each collector reports its components here.
    pub state: Health,
    /// Cancelled on SIGTERM or when the lease is lost.
    pub shutdown: CancellationToken,
}

pub trait Collector: Send {
    /// Readiness components this collector reports; /readyz waits for all of them once leading.
    fn components(&self) -> Vec<&'static str>;

    /// Query routes served by the HTTP port (mounted before the collector runs, so a standby
    /// answers them too).
    fn routes(&self) -> Option<axum::Router> {
        None
    }

    /// The collector, running until `env.shutdown` is cancelled.
    fn run(self: Box<Self>, env: RunEnv) -> BoxFuture<'static, ()>;
}
