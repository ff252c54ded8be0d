//! Unit tests' AWS (`cfg(test)` only): every client of an [`AwsClients`] answers from
//! aws-smithy-mocks rules, so a cleaner's or a locate step's exact calls are asserted without
//! LocalStack (which stays the integration layer: services/tests/aws_teardown).
//!
//! A call no rule answers panics (the mock interceptor insists on a match), which is how a test
//! proves a call is NOT made: it gives that call no rule. With [`RuleMode::Sequential`] the rules
//! must also be met in order, one answer each. Errors carry only an AWS code, as
//! `errors::classify` reads them.
//!
//! Test-only and below nothing: it may use every layer, as `testing/` does.

use crate::model::AwsClients;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_mocks::{MockResponseInterceptor, create_mock_http_client};
pub(crate) use aws_smithy_mocks::{Rule, RuleMode, mock};
use aws_smithy_runtime_api::client::interceptors::SharedInterceptor;
use aws_smithy_types::error::ErrorMetadata;

/// Clients for every service, all answered by `rules` (one interceptor shared by all of them, so
/// [`RuleMode::Sequential`] orders calls across services too). SDK retries are off, as in
/// production (`AwsClients::new`): only `errors::call`'s own retry repeats a call.
pub(crate) fn clients(mode: RuleMode, rules: &[&Rule]) -> AwsClients {
    let mut m = MockResponseInterceptor::new().rule_mode(mode);
    for r in rules {
        m = m.with_rule(r);
    }
    let shared = SharedInterceptor::new(m);
    AwsClients::assemble(&sdk(), &[shared], None)
}

/// The configuration every mocked client is built on: test credentials, one region, and the
/// mocks' HTTP client (nothing leaves the process).
pub(crate) fn sdk() -> SdkConfig {
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "AKIDTEST", "secret", None, None, "mocked",
        )))
        .http_client(create_mock_http_client())
        .build()
}

/// Clients that must see exactly `rules`, in order.
pub(crate) fn in_order(rules: &[&Rule]) -> AwsClients {
    clients(RuleMode::Sequential, rules)
}

/// Clients that allow no call at all.
pub(crate) fn no_calls() -> AwsClients {
    clients(RuleMode::MatchAny, &[])
}

/// The error metadata of an AWS error `code`: `XError::generic(code("..."))`.
pub(crate) fn code(code: &str) -> ErrorMetadata {
    ErrorMetadata::builder()
        .code(code)
        .message("mocked")
        .build()
}

/// True when `filters` hold exactly one filter `name` and its values are exactly `values`.
pub(crate) fn filter_is(
    filters: &[aws_sdk_ec2::types::Filter],
    name: &str,
    values: &[&str],
) -> bool {
    let named: Vec<_> = filters.iter().filter(|f| f.name() == Some(name)).collect();
    named.len() == 1 && named[0].values() == values
}

/// An EC2 tag.
pub(crate) fn tag(key: &str, value: &str) -> aws_sdk_ec2::types::Tag {
    aws_sdk_ec2::types::Tag::builder()
        .key(key)
        .value(value)
        .build()
}

/// The cluster every mocked test cleans: `c1`, CAPA name `c1`.
pub(crate) const CLUSTER: &str = "c1";
/// CAPA's ownership tag key for [`CLUSTER`].
pub(crate) const CAPA_KEY: &str = "sigs.k8s.io/cluster-api-provider-aws/cluster/c1";
/// The cloud provider's ownership tag key for [`CLUSTER`].
pub(crate) const CLOUD_KEY: &str = "kubernetes.io/cluster/c1";

/// Asserts `rule` answered `n` calls.
#[track_caller]
pub(crate) fn assert_calls(rule: &Rule, n: usize, what: &str) {
    assert_eq!(rule.num_calls(), n, "{what}: calls");
}

/// Phase 1's one tagging query (`locate::capa_tagged`) for [`CAPA_KEY`]=owned, of its four types,
/// answering `found`: (ARN, tag key, tag value) each, in one page.
pub(crate) fn capa_tagged_query(found: &[(&str, &str, &str)]) -> Rule {
    use aws_sdk_resourcegroupstagging::operation::get_resources::GetResourcesOutput;
    use aws_sdk_resourcegroupstagging::types::{ResourceTagMapping, Tag};
    let found: Vec<(String, String, String)> = found
        .iter()
        .map(|(a, k, v)| (a.to_string(), k.to_string(), v.to_string()))
        .collect();
    mock!(aws_sdk_resourcegroupstagging::Client::get_resources)
        .match_requests(|r| {
            let f = r.tag_filters();
            f.len() == 1
                && f[0].key() == Some(CAPA_KEY)
                && f[0].values() == ["owned"]
                && r.resource_type_filters() == crate::locate::capa_tagged::TYPES
        })
        .then_output(move || {
            let mut out = GetResourcesOutput::builder();
            for (arn, k, v) in &found {
                out = out.resource_tag_mapping_list(
                    ResourceTagMapping::builder()
                        .resource_arn(arn)
                        .tags(Tag::builder().key(k).value(v).build().unwrap())
                        .build(),
                );
            }
            out.build()
        })
}
