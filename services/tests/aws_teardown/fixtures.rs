//! LocalStack fixtures: the shared connection, builders and unique names from
//! `sweeper_aws::testing`, plus what only these tests need: recorded clients and passes
//! until done.

use std::time::Duration;
use sweeper_aws::phases::{AwsClients, PassReport, PassRequest, teardown_pass};
use sweeper_aws::testing::{Recorder, localstack};

pub use sweeper_aws::testing::build::*;
pub use sweeper_aws::testing::localstack::{sdk, unique_cluster as cluster};
pub use sweeper_aws::testing::probe::*;

/// Clients that record every call (see `Recorder`), for LocalStack. When the test ends well,
/// every call recorded (and not cleared) must be granted by the shipped IAM policy.
pub async fn env() -> (AwsClients, Recorded) {
    let sdk = sdk().await;
    let rec = Recorder::new();
    (rec.clients(&sdk), Recorded(rec))
}

/// A test's recorder, checked against deploy/iam/sweeper-policy.json when it is dropped.
pub struct Recorded(Recorder);

impl std::ops::Deref for Recorded {
    type Target = Recorder;
    fn deref(&self) -> &Recorder {
        &self.0
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            sweeper_aws::testing::iam::assert_in_policy(&self.0.calls());
        }
    }
}

/// Plain SDK clients with the SDK's standard retries, for creating fixtures concurrently.
pub async fn retrying_clients() -> AwsClients {
    localstack::retrying_clients(&sdk().await)
}

/// Passes until done (at most `max`), returning the reports.
pub async fn until_done(c: &AwsClients, req: &PassRequest, max: usize) -> Vec<PassReport> {
    let mut out = Vec::new();
    for _ in 0..max {
        let r = teardown_pass(c, req).await;
        let done = r.done;
        out.push(r);
        if done {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!(
        "not done after {max} passes; last report: {:#?}",
        out.last()
    );
}

/// Index of the first recorded call equal to `op`, or panics listing the calls.
pub fn first(calls: &[String], op: &str) -> usize {
    calls
        .iter()
        .position(|c| c == op)
        .unwrap_or_else(|| panic!("{op} not called; calls: {calls:?}"))
}
