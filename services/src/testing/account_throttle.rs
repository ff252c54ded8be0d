//! Throttling injected per AWS account, for a session's configuration (the session cache's
//! hook): the HTTP client answers the first `n` requests one account signs for one service with
//! that service's throttling error, without sending them, and counts every request per account.
//! Every request is also logged (account, operation, when), for the fleet benchmark's
//! per-account rate and calls per resource. The account is read from the request's signature
//! (`Credential=<key>/<date>/<region>/<service>/aws4_request`): on LocalStack a 12-digit access
//! key id is the account.

use super::recorder::{default_http_client, throttling_response};
use aws_config::SdkConfig;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

#[derive(Debug, Default)]
struct State {
    /// (access key, signing service) -> throttling answers left.
    plan: HashMap<(String, String), usize>,
    sent: HashMap<String, usize>,
    throttled: HashMap<String, usize>,
    log: Vec<Sent>,
}

/// One request as it left for AWS.
#[derive(Clone, Debug)]
pub struct Sent {
    /// The access key it was signed with (on LocalStack, the account).
    pub key: String,
    /// The signing service (`ec2`, `iam`, `route53`), empty when the request is unsigned.
    pub service: String,
    /// The signing region (`us-east-1`; IAM and Route 53 sign for `us-east-1`).
    pub region: String,
    /// The operation: `Action=` of a query-protocol body (EC2, ELB, IAM, STS), else the
    /// `X-Amz-Target` header's operation (the tagging API), else, for a REST-protocol request
    /// (Route 53, S3), its method and path without the query (`GET /2013-04-01/hostedzone`).
    pub operation: String,
    pub at: Instant,
}

/// Cheap to clone; clones share the plan and the counts.
#[derive(Clone, Debug, Default)]
pub struct AccountThrottle {
    state: Arc<Mutex<State>>,
}

impl AccountThrottle {
    pub fn new() -> Self {
        Self::default()
    }

    /// Answers the next `n` requests `key` signs for `service` (the signing name: `ec2`,
    /// `elasticloadbalancing`, `tagging`) with a throttling error.
    pub fn throttle(&self, key: &str, service: &str, n: usize) {
        self.lock().plan.insert((key.into(), service.into()), n);
    }

    /// Requests `key` sent (throttled ones included).
    pub fn sent(&self, key: &str) -> usize {
        self.lock().sent.get(key).copied().unwrap_or(0)
    }

    /// Requests of `key` answered with an injected throttling error.
    pub fn throttled(&self, key: &str) -> usize {
        self.lock().throttled.get(key).copied().unwrap_or(0)
    }

    /// Every request sent so far (throttled ones included), in order.
    pub fn log(&self) -> Vec<Sent> {
        self.lock().log.clone()
    }

    /// Forgets the log and the counts (between a benchmark's modes).
    pub fn reset(&self) {
        let mut st = self.lock();
        st.sent.clear();
        st.throttled.clear();
        st.log.clear();
    }

    /// `sdk` with its HTTP client wrapped.
    pub fn install(&self, sdk: SdkConfig) -> SdkConfig {
        let inner = sdk.http_client().unwrap_or_else(default_http_client);
        sdk.into_builder()
            .http_client(Wrapped {
                inner,
                throttle: self.clone(),
            })
            .build()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts the request; true when it must be answered with throttling.
    fn inject(&self, signed: &Signer, operation: String) -> bool {
        let (key, service) = (signed.key.as_str(), signed.service.as_str());
        let mut st = self.lock();
        *st.sent.entry(key.into()).or_default() += 1;
        st.log.push(Sent {
            key: key.into(),
            service: service.into(),
            region: signed.region.clone(),
            operation,
            at: Instant::now(),
        });
        let throttle = match st.plan.get_mut(&(key.to_string(), service.to_string())) {
            Some(left) if *left > 0 => {
                *left -= 1;
                true
            }
            _ => false,
        };
        if throttle {
            *st.throttled.entry(key.into()).or_default() += 1;
        }
        throttle
    }
}

/// Who signed a request, from its SigV4 `Authorization` header
/// (`Credential=<key>/<date>/<region>/<service>/aws4_request`).
struct Signer {
    key: String,
    region: String,
    service: String,
}

fn signer(request: &HttpRequest) -> Option<Signer> {
    let auth = request.headers().get("authorization")?;
    let cred = auth.split("Credential=").nth(1)?.split(',').next()?;
    let mut parts = cred.split('/');
    let key = parts.next()?.to_string();
    let region = parts.nth(1)?.to_string();
    let service = parts.next()?.to_string();
    Some(Signer {
        key,
        region,
        service,
    })
}

/// The operation a request calls (see [`Sent::operation`]).
fn operation(request: &HttpRequest) -> String {
    let form = request
        .body()
        .bytes()
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|body| body.split('&').find_map(|kv| kv.strip_prefix("Action=")));
    let target = || {
        let t = request.headers().get("x-amz-target")?;
        Some(t.rsplit('.').next().unwrap_or(t))
    };
    match form.or_else(target) {
        Some(op) => op.to_string(),
        // A REST-protocol request names its operation by method and path.
        None => rest_operation(request.method(), request.uri()),
    }
}

/// `GET /2013-04-01/hostedzone` from a method and a URI, the scheme, host and query left out.
fn rest_operation(method: &str, uri: &str) -> String {
    let path = uri
        .split_once("://")
        .map_or(uri, |(_, rest)| rest.find('/').map_or("/", |i| &rest[i..]));
    let path = path.split('?').next().unwrap_or(path);
    format!("{method} {path}")
}

#[derive(Clone, Debug)]
struct Wrapped {
    inner: SharedHttpClient,
    throttle: AccountThrottle,
}

impl HttpClient for Wrapped {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(Connector {
            inner: self.inner.http_connector(settings, components),
            throttle: self.throttle.clone(),
        })
    }
}

#[derive(Debug)]
struct Connector {
    inner: SharedHttpConnector,
    throttle: AccountThrottle,
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let inner = self.inner.clone();
        let op = operation(&request);
        let inject = signer(&request)
            .filter(|s| self.throttle.inject(s, op))
            .map(|s| s.service);
        HttpConnectorFuture::new(async move {
            if let Some(service) = inject {
                // The error in the service's own protocol (see `throttling_response`).
                return throttling_response(match service.as_str() {
                    "ec2" => "EC2",
                    "elasticloadbalancing" => "Elastic Load Balancing",
                    _ => "Resource Groups Tagging API",
                });
            }
            inner.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::rest_operation;

    #[test]
    fn a_rest_request_is_named_by_method_and_path_without_host_or_query() {
        let table = [
            (
                "GET",
                "http://127.0.0.1:4566/2013-04-01/hostedzone?maxitems=100",
                "GET /2013-04-01/hostedzone",
            ),
            (
                "POST",
                "https://route53.amazonaws.com/2013-04-01/hostedzone/Z1/rrset",
                "POST /2013-04-01/hostedzone/Z1/rrset",
            ),
            ("GET", "http://127.0.0.1:4566", "GET /"),
            ("DELETE", "/bucket/key?versionId=1", "DELETE /bucket/key"),
        ];
        for (method, uri, want) in table {
            assert_eq!(rest_operation(method, uri), want, "{uri}");
        }
    }
}
