//! Test and benchmark support, compiled only with the `testing` feature (the crate's own tests and
//! examples turn it on through a dev-dependency on itself): the call recorder with fault and
//! latency injection, the CAPA-like baseline the benchmark compares against, and the LocalStack
//! connection and resource builders every LocalStack test and example shares. The production library contains none of it.

mod account_throttle;
mod baseline;
pub mod build;
pub mod iam;
#[cfg(test)]
mod iam_scope;
pub mod leaks;
pub mod localstack;
pub mod probe;
mod recorder;
mod refusing;

pub use account_throttle::{AccountThrottle, Sent};
pub use baseline::baseline_phase2;
pub use recorder::{Recorder, with_latency};
pub use refusing::{AwsCallCount, refusing_config};
