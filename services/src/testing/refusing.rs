//! An SDK configuration whose every HTTP request is counted and refused, for unit tests that must
//! prove a decision made no AWS call at all (paused or moved clusters), and that the count would
//! see one if it were made. Credentials and region are set, so a session does get as far as the
//! wire: nothing short of the count stops a call unnoticed.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many AWS requests were attempted.
#[derive(Clone, Debug, Default)]
pub struct AwsCallCount(Arc<AtomicUsize>);

impl AwsCallCount {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Clone, Debug)]
struct Refusing(AwsCallCount);

impl HttpConnector for Refusing {
    fn call(&self, _request: HttpRequest) -> HttpConnectorFuture {
        (self.0).0.fetch_add(1, Ordering::SeqCst);
        HttpConnectorFuture::ready(Err(ConnectorError::io(
            "refused: this unit test allows no AWS call".into(),
        )))
    }
}

impl HttpClient for Refusing {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

/// A base configuration (region `us-east-1`, static test credentials) whose requests are counted
/// and refused.
pub fn refusing_config() -> (SdkConfig, AwsCallCount) {
    let count = AwsCallCount::default();
    let config = SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "AKIDTEST",
            "secret",
            None,
            None,
            "unit-test",
        )))
        .http_client(SharedHttpClient::new(Refusing(count.clone())))
        .build();
    (config, count)
}
