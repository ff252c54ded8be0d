//! The LocalStack connection shared by the integration tests and the benchmark: one SDK config,
//! plain clients for building fixtures, and cluster names no other run uses.

use crate::model::AwsClients;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `AWS_ENDPOINT_URL`, or LocalStack's default port.
pub fn endpoint() -> String {
    std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| "http://127.0.0.1:4566".into())
}

/// Connects to LocalStack or panics with how to start it: a missing server must fail the test
/// (or the benchmark), not pass it vacuously.
pub async fn sdk() -> SdkConfig {
    let url = endpoint();
    let hostport = url
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/');
    let reachable = hostport
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok())
        .unwrap_or(false);
    assert!(
        reachable,
        "LocalStack is not reachable at {url}: start the test environment with `./scripts/env-up.sh` (or `make env-up`), then `source .state/env` and rerun"
    );
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(url)
        .region(Region::new(
            std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
        ))
        .credentials_provider(aws_sdk_ec2::config::Credentials::new(
            "test", "test", None, None, "tests",
        ))
        .load()
        .await
}

/// `base` acting as LocalStack account `account` (a 12-digit access key id is the account
/// there) in `region`.
pub fn sdk_as(base: &SdkConfig, region: &str, account: &str) -> SdkConfig {
    let creds = aws_sdk_ec2::config::Credentials::new(account, "test", None, None, "tests");
    base.clone()
        .into_builder()
        .region(Region::new(region.to_string()))
        .credentials_provider(aws_credential_types::provider::SharedCredentialsProvider::new(creds))
        .build()
}

/// Plain SDK clients with the SDK's standard retries, for creating fixtures: LocalStack answers
/// concurrent creates with an occasional 500 InternalError ("dictionary changed size during
/// iteration"), which a fixture should ride out rather than fail on.
pub fn retrying_clients(sdk: &SdkConfig) -> AwsClients {
    AwsClients {
        ec2: aws_sdk_ec2::Client::new(sdk),
        elb: aws_sdk_elasticloadbalancing::Client::new(sdk),
        elbv2: aws_sdk_elasticloadbalancingv2::Client::new(sdk),
        tagging: aws_sdk_resourcegroupstagging::Client::new(sdk),
        iam: aws_sdk_iam::Client::new(sdk),
        // LocalStack community serves no EKS: tests that need it put a mocked client here.
        eks: aws_sdk_eks::Client::new(sdk),
        logs: aws_sdk_cloudwatchlogs::Client::new(sdk),
        route53: aws_sdk_route53::Client::new(sdk),
        sqs: aws_sdk_sqs::Client::new(sdk),
        events: aws_sdk_eventbridge::Client::new(sdk),
        secrets: aws_sdk_secretsmanager::Client::new(sdk),
        ssm: aws_sdk_ssm::Client::new(sdk),
        // LocalStack's host has no `<bucket>.` names: the bucket goes in the path.
        s3: aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(sdk)
                .force_path_style(true)
                .build(),
        ),
        scope: None,
        throttle: None,
        listings: None,
    }
}

/// A cluster name no other test (or earlier run) uses: LocalStack keeps what earlier runs left.
///
/// The time part is zero-padded to 8 hex digits: callers name load balancers and target groups
/// after the name's last 6 or 8 characters, and an unpadded time of 6 digits put the `-` among
/// them, which AWS (and LocalStack) refuse as a name's first character (`bench_fleet` failed on
/// `-fd13a34-t1` on 2026-12-03).
pub fn unique_cluster(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    cluster_name(
        prefix,
        nanos % 0xffff_ffff,
        N.fetch_add(1, Ordering::Relaxed),
    )
}

/// `<prefix>-<time, 8 hex digits><counter>`: its last 8 characters never hold the `-`.
fn cluster_name(prefix: &str, time: u128, n: u32) -> String {
    format!("{prefix}-{time:08x}{n}")
}

#[cfg(test)]
mod tests {
    use super::cluster_name;

    #[test]
    fn a_names_last_eight_characters_never_hold_its_dash() {
        // (time, counter): the time of 2026-12-03's failure (6 hex digits), the smallest, the largest.
        for (time, n) in [(0xfd13a3, 4), (0, 0), (0xffff_fffe, 199)] {
            let name = cluster_name("flt", time, n);
            let tail = &name[name.len() - 8..];
            assert!(!tail.contains('-'), "{name}: tail {tail}");
        }
        assert_eq!(cluster_name("flt", 0xfd13a3, 4), "flt-00fd13a34");
    }
}
