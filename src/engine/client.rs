//! The Kubernetes client every collector shares: a token-bucket rate limit (client-go's QPS and
//! burst, so benchmarks compare like with like) and a count of API calls by verb.

use super::leader::{Fence, Refusal};
use http::Request;
use kube::client::ClientBuilder;
use kube::{Client, Config};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tower::{Layer, Service};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    pub verb: String,
}

/// `sweeper_kube_api_calls_total{verb}`: every request sweeper sends to the API server.
pub type ApiCallCounter = Family<VerbLabels, Counter>;

/// client-go style token bucket: `burst` tokens, refilled at `qps` per second. `qps <= 0`
/// disables limiting.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            tokens: burst,
            last: Instant::now(),
        }
    }

    /// Takes a token, or says how long until one is available.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        if self.qps <= 0.0 {
            return Ok(());
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

/// The verb of a request, as the API server's metrics name it (list and get are both GETs here;
/// the difference needs the path, which the counters don't).
pub fn verb_of<B>(req: &Request<B>) -> &'static str {
    let watch = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    match *req.method() {
        http::Method::GET if watch => "watch",
        http::Method::GET => "get",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

#[derive(Clone)]
pub struct LimitLayer {
    bucket: Arc<Mutex<TokenBucket>>,
    calls: ApiCallCounter,
}

impl LimitLayer {
    pub fn new(qps: f64, burst: u32, calls: ApiCallCounter) -> Self {
        Self {
            bucket: Arc::new(Mutex::new(TokenBucket::new(qps, burst))),
            calls,
        }
    }
}

impl<S> Layer<S> for LimitLayer {
    type Service = Limited<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Limited {
            inner,
            bucket: self.bucket.clone(),
            calls: self.calls.clone(),
            sleep: None,
            permit: false,
        }
    }
}

/// Waits for a token in `poll_ready`, so requests queue in kube's buffer in arrival order.
pub struct Limited<S> {
    inner: S,
    bucket: Arc<Mutex<TokenBucket>>,
    calls: ApiCallCounter,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    permit: bool,
}

impl<S, B> Service<Request<B>> for Limited<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.permit {
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            // A poisoned lock only means another request panicked mid-update; the bucket is still usable.
            let taken = self
                .bucket
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .try_take(Instant::now());
            match taken {
                Ok(()) => self.permit = true,
                Err(wait) => self.sleep = Some(Box::pin(tokio::time::sleep(wait))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        self.permit = false;
        self.calls
            .get_or_create(&VerbLabels {
                verb: verb_of(&req).to_string(),
            })
            .inc();
        self.inner.call(req)
    }
}

/// Refuses every mutating request (anything but GET) while the [`Fence`] is closed, before it is
/// sent: the one place every delete, patch and create of every collector passes, so no code path
/// can forget to check leadership.
#[derive(Clone)]
pub struct FenceLayer {
    fence: Fence,
    refused: Counter,
}

impl FenceLayer {
    pub fn new(fence: Fence, refused: Counter) -> Self {
        Self { fence, refused }
    }
}

impl<S> Layer<S> for FenceLayer {
    type Service = FencedService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        FencedService {
            inner,
            fence: self.fence.clone(),
            refused: self.refused.clone(),
        }
    }
}

pub struct FencedService<S> {
    inner: S,
    fence: Fence,
    refused: Counter,
}

/// The error a fenced request fails with.
#[derive(Debug, thiserror::Error)]
#[error("refused {method} {path}: {why}")]
pub struct Fenced {
    pub method: http::Method,
    pub path: String,
    pub why: Refusal,
}

/// Whether `e` is a 404 from the API server (the object, or the whole resource, is not there).
pub fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether the collector's pause refused `e` before it was sent (not a failure: wait for resume).
pub fn refused_by_pause(e: &kube::Error) -> bool {
    matches!(refusal(e), Some(Refusal::Paused(_)))
}

/// Why `e` was refused before it was sent, if the fence refused it.
pub fn refusal(e: &kube::Error) -> Option<Refusal> {
    let kube::Error::Service(inner) = e else {
        return None;
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(inner.as_ref());
    while let Some(err) = source {
        if let Some(f) = err.downcast_ref::<Fenced>() {
            return Some(f.why.clone());
        }
        source = err.source();
    }
    None
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B> Service<Request<B>> for FencedService<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if req.method() != http::Method::GET
            && let Err(why) = self.fence.check()
        {
            let err = Fenced {
                method: req.method().clone(),
                path: req.uri().path().to_string(),
                why,
            };
            // A pause is the operator's choice and expected; losing the lease is not.
            if matches!(err.why, Refusal::NotLeader) {
                self.refused.inc();
                tracing::warn!(error = %err, "request fenced");
            } else {
                tracing::debug!(error = %err, "request fenced");
            }
            return Box::pin(std::future::ready(Err(err.into())));
        }
        let fut = self.inner.call(req);
        Box::pin(async move { fut.await.map_err(Into::into) })
    }
}

/// Client settings shared by every collector.
#[derive(Clone, Debug)]
pub struct ClientSettings {
    pub qps: f64,
    pub burst: u32,
}

/// Builds a client from `config` with the rate limit and call counting installed, and
/// (leader election) the fence: refused requests count in `refused`.
pub fn build_client(
    config: Config,
    settings: &ClientSettings,
    calls: ApiCallCounter,
    fence: Fence,
    refused: Counter,
) -> Result<Client, kube::Error> {
    let layer = LimitLayer::new(settings.qps, settings.burst, calls);
    build_client_with(config, &layer, fence, refused)
}

/// Like [`build_client`], sharing `limit` (its token bucket and counters) with other clients:
/// each collector has a client of its own (its own fence, with its own pause switch) under one
/// rate limit for the process.
pub fn build_client_with(
    config: Config,
    limit: &LimitLayer,
    fence: Fence,
    refused: Counter,
) -> Result<Client, kube::Error> {
    let fence = FenceLayer::new(fence, refused);
    // Calls over one HTTP/2 connection, watches over HTTP/1.1 (engine/transport.rs); kube-rs's
    // own transport where that is not built (a proxy).
    let default_ns = config.default_namespace.clone();
    Ok(match super::transport::transport(&config)? {
        Some(transport) => ClientBuilder::new(transport, default_ns)
            .with_layer(limit)
            .with_layer(&fence)
            .build(),
        None => ClientBuilder::try_from(config)?
            .with_layer(limit)
            .with_layer(&fence)
            .build(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_allows_burst_then_paces_at_qps() {
        let mut b = TokenBucket::new(10.0, 3);
        let t0 = Instant::now();
        b.last = t0;
        for _ in 0..3 {
            assert!(b.try_take(t0).is_ok());
        }
        let wait = b.try_take(t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        assert!(b.try_take(t0 + Duration::from_millis(100)).is_ok());
        assert!(b.try_take(t0 + Duration::from_millis(100)).is_err());
    }

    #[test]
    fn bucket_never_exceeds_burst_after_idle() {
        let mut b = TokenBucket::new(100.0, 2);
        let t0 = Instant::now();
        b.last = t0;
        let later = t0 + Duration::from_secs(60);
        assert!(b.try_take(later).is_ok());
        assert!(b.try_take(later).is_ok());
        assert!(b.try_take(later).is_err());
    }

    #[test]
    fn zero_qps_is_unlimited() {
        let mut b = TokenBucket::new(0.0, 1);
        for _ in 0..1000 {
            assert!(b.try_take(Instant::now()).is_ok());
        }
    }

    #[test]
    fn verbs_are_named_like_the_api_server() {
        let req =
            |m: http::Method, uri: &str| Request::builder().method(m).uri(uri).body(()).unwrap();
        assert_eq!(
            verb_of(&req(http::Method::GET, "/api/v1/pods?watch=true&rv=1")),
            "watch"
        );
        assert_eq!(
            verb_of(&req(http::Method::GET, "/api/v1/pods?limit=500")),
            "get"
        );
        assert_eq!(
            verb_of(&req(http::Method::DELETE, "/api/v1/namespaces/a/pods/b")),
            "delete"
        );
        assert_eq!(
            verb_of(&req(http::Method::PATCH, "/api/v1/namespaces/a/pods/b")),
            "patch"
        );
    }
}
