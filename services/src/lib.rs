//! sweeper's AWS side: configuration, ARN parsing, locating through the Resource Groups Tagging
//! API, and the three-phase teardown of a CAPA cluster's AWS resources. All AWS SDK dependencies
//! compile in this crate only, so the rest of the workspace rebuilds fast. The directory keeps
//! DESIGN.md's name (services/); the crate is named for what it holds (sweeper-aws).

// Layers, each using only those above it in this list: arn, budget (an account's request
// budget), errors, fence, scope (where a session acts), throttle (its back-off, carrying the
// budget) and listings (IAM listings an account shares) are plain helpers;
// model is the shared vocabulary; policy decides, for one resource at a time, whether it is
// deleted (pure, no AWS call); locating finds what a cluster owns; cleaners delete one kind
// each; phases runs a teardown pass, phase by phase; testing (a feature) drives it all for tests
// and benchmarks.
pub mod arn;
pub mod budget;
pub mod errors;
pub mod fence;
pub mod listings;
pub mod model;
pub mod scope;
pub mod throttle;

pub mod session;

pub mod policy;

pub mod locate;

pub mod cleaners;

pub mod phases;

// The leak scan: reads locating and the policy's keys, deletes nothing.
pub mod scan;

#[cfg(feature = "testing")]
pub mod testing;

// Unit tests' mocked AWS clients (aws-smithy-mocks); see mocked.rs.
#[cfg(test)]
pub(crate) mod mocked;

/// Re-exports so the binary and the tests reach the SDK without depending on it themselves.
pub mod sdk {
    pub use aws_config;
    pub use aws_sdk_cloudwatchlogs as logs;
    pub use aws_sdk_ec2 as ec2;
    pub use aws_sdk_eks as eks;
    pub use aws_sdk_elasticloadbalancing as elb;
    pub use aws_sdk_elasticloadbalancingv2 as elbv2;
    pub use aws_sdk_eventbridge as events;
    pub use aws_sdk_iam as iam;
    pub use aws_sdk_resourcegroupstagging as tagging;
    pub use aws_sdk_route53 as route53;
    pub use aws_sdk_s3 as s3;
    pub use aws_sdk_secretsmanager as secretsmanager;
    pub use aws_sdk_sqs as sqs;
    pub use aws_sdk_ssm as ssm;
}

/// Loads the shared SDK configuration from the standard environment (`AWS_REGION`,
/// `AWS_ENDPOINT_URL`, credentials chain), so LocalStack needs no code change.
pub async fn load_config() -> aws_config::SdkConfig {
    aws_config::load_from_env().await
}
