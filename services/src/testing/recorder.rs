//! An SDK interceptor plus HTTP client wrapper for tests and benchmarks: records every AWS call in
//! order, optionally answers the first K calls of an operation with a throttling error (without
//! sending them, so a throttled delete really did not happen), and optionally adds a fixed latency
//! per call to simulate a real region.
//!
//! Two pieces because the SDK's interceptor hooks are synchronous: sleeping there would block a
//! runtime worker, so the latency (and the fake response) live in an async `HttpConnector`, and
//! the interceptor only names the operation and marks the request with a header.

use crate::model::AwsClients;
use aws_config::SdkConfig;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextMut;
use aws_smithy_runtime_api::client::interceptors::{Intercept, SharedInterceptor};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse, Metadata};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Header the interceptor sets on a request the connector must answer with a throttling error.
const INJECT_HEADER: &str = "x-sweeper-inject-throttle";
/// Header naming the operation, for the connector's timings (it has no other way to know).
const OPERATION_HEADER: &str = "x-sweeper-operation";

/// Shared state: the call log and the injection plan. Cheap to clone; all clones share state.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    /// Every attempt, in order, as `Service.Operation` (e.g. `ElasticLoadBalancingv2.DeleteLoadBalancer`).
    pub calls: Arc<Mutex<Vec<String>>>,
    /// Operation name -> how many more attempts to answer with a throttling error.
    throttle: Arc<Mutex<HashMap<String, usize>>>,
    latency: Duration,
    /// Per attempt: the operation and how long the server took (the added latency excluded).
    timings: Arc<Mutex<Vec<(String, Duration)>>>,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `latency` to every call (before it is sent).
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Answers the next `k` attempts of `operation` (`Service.Operation`) with a throttling error.
    pub fn throttle_first(&self, operation: &str, k: usize) {
        self.throttle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(operation.to_string(), k);
    }

    /// A copy of the call log.
    pub fn calls(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Per operation: attempts and the server's total time on them (the added latency
    /// excluded), most time first. Where a pass's time goes when calls cost only the server.
    pub fn time_by_operation(&self) -> Vec<(String, usize, Duration)> {
        let mut by: HashMap<String, (usize, Duration)> = HashMap::new();
        for (op, d) in self
            .timings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let e = by.entry(op.clone()).or_default();
            e.0 += 1;
            e.1 += *d;
        }
        let mut out: Vec<_> = by.into_iter().map(|(op, (n, d))| (op, n, d)).collect();
        out.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// Empties the call log.
    pub fn clear(&self) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Builds clients that go through this recorder. SDK-level retries are disabled so each
    /// recorded attempt is one HTTP request and injected throttling reaches sweeper's own retry.
    pub fn clients(&self, sdk: &SdkConfig) -> AwsClients {
        let http = WrappedClient {
            inner: sdk.http_client().unwrap_or_else(default_http_client),
            latency: self.latency,
            timings: Some(self.timings.clone()),
        };
        AwsClients::assemble(
            sdk,
            &[SharedInterceptor::new(self.clone())],
            Some(SharedHttpClient::new(http)),
        )
    }
}

/// `sdk` with `latency` added to every call (as [`Recorder::with_latency`], without recording):
/// for a session's configuration, through the session cache's hook.
pub fn with_latency(sdk: SdkConfig, latency: Duration) -> SdkConfig {
    let inner = sdk.http_client().unwrap_or_else(default_http_client);
    sdk.into_builder()
        .http_client(WrappedClient {
            inner,
            latency,
            timings: None,
        })
        .build()
}

/// The SDK's own default client, for when the loaded config carries none (the SDK would
/// otherwise pick it lazily, but the wrapper needs something to wrap).
pub(crate) fn default_http_client() -> SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
            aws_smithy_http_client::tls::rustls_provider::CryptoMode::AwsLc,
        ))
        .build_https()
}

/// `"Elastic Load Balancing v2"` -> `"ElasticLoadBalancingv2"`.
fn operation_name(meta: &Metadata) -> String {
    let service: String = meta.service().split_whitespace().collect();
    format!("{service}.{}", meta.name())
}

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "sweeper-recorder"
    }

    // Runs once per attempt, after signing: the marker header is not signed, which is fine
    // because a marked request never leaves the process.
    fn modify_before_transmit(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(meta) = cfg.load::<Metadata>() else {
            return Ok(());
        };
        let op = operation_name(meta);
        let inject = {
            let mut plan = self.throttle.lock().unwrap_or_else(PoisonError::into_inner);
            match plan.get_mut(&op) {
                Some(left) if *left > 0 => {
                    *left -= 1;
                    true
                }
                _ => false,
            }
        };
        if inject {
            context
                .request_mut()
                .headers_mut()
                .insert(INJECT_HEADER, meta.service().to_string());
        }
        context
            .request_mut()
            .headers_mut()
            .insert(OPERATION_HEADER, op.clone());
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(op);
        Ok(())
    }
}

type Timings = Arc<Mutex<Vec<(String, Duration)>>>;

#[derive(Clone, Debug)]
struct WrappedClient {
    inner: SharedHttpClient,
    latency: Duration,
    timings: Option<Timings>,
}

impl HttpClient for WrappedClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(WrappedConnector {
            inner: self.inner.http_connector(settings, components),
            latency: self.latency,
            timings: self.timings.clone(),
        })
    }
}

#[derive(Debug)]
struct WrappedConnector {
    inner: SharedHttpConnector,
    latency: Duration,
    timings: Option<Timings>,
}

impl HttpConnector for WrappedConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let inner = self.inner.clone();
        let latency = self.latency;
        let timings = self.timings.clone();
        HttpConnectorFuture::new(async move {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            if let Some(service) = request.headers().get(INJECT_HEADER) {
                return throttling_response(service);
            }
            let op = request.headers().get(OPERATION_HEADER).map(str::to_string);
            let started = std::time::Instant::now();
            let answer = inner.call(request).await;
            if let (Some(t), Some(op)) = (timings, op) {
                t.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((op, started.elapsed()));
            }
            answer
        })
    }
}

/// A throttling error in each service's wire protocol: EC2 query, AWS query (ELB) or JSON 1.1.
pub(crate) fn throttling_response(service: &str) -> Result<HttpResponse, ConnectorError> {
    let (status, content_type, body) = match service {
        "EC2" => (
            503,
            "text/xml",
            "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded (injected).</Message></Error></Errors><RequestID>injected</RequestID></Response>".to_string(),
        ),
        s if s.starts_with("Elastic Load Balancing") => (
            400,
            "text/xml",
            "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded (injected)</Message></Error><RequestId>injected</RequestId></ErrorResponse>".to_string(),
        ),
        _ => (
            400,
            "application/x-amz-json-1.1",
            r#"{"__type":"ThrottledException","Message":"Rate exceeded (injected)"}"#.to_string(),
        ),
    };
    let status = StatusCode::try_from(status).map_err(|e| ConnectorError::other(e.into(), None))?;
    let mut resp = HttpResponse::new(status, SdkBody::from(body));
    resp.headers_mut().insert("content-type", content_type);
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_names_drop_the_spaces_of_the_service() {
        let m = Metadata::new("DeleteLoadBalancer", "Elastic Load Balancing v2");
        assert_eq!(
            operation_name(&m),
            "ElasticLoadBalancingv2.DeleteLoadBalancer"
        );
    }

    #[test]
    fn injected_throttling_speaks_each_protocol() {
        for (service, code) in [
            ("EC2", "RequestLimitExceeded"),
            ("Elastic Load Balancing", "Throttling"),
            ("Elastic Load Balancing v2", "Throttling"),
            ("Resource Groups Tagging API", "ThrottledException"),
        ] {
            let r = throttling_response(service).unwrap();
            let body = std::str::from_utf8(r.body().bytes().unwrap()).unwrap();
            assert!(body.contains(code), "{service}: {body}");
            assert!(r.status().as_u16() >= 400);
        }
    }

    #[test]
    fn throttle_plan_counts_down_and_the_log_clears() {
        let rec = Recorder::new();
        rec.throttle_first("EC2.DeleteVpc", 2);
        assert_eq!(rec.throttle.lock().unwrap()["EC2.DeleteVpc"], 2);
        rec.calls.lock().unwrap().push("EC2.DeleteVpc".into());
        assert_eq!(rec.calls(), ["EC2.DeleteVpc"]);
        rec.clear();
        assert!(rec.calls().is_empty());
    }
}
