//! The HTTP transport under the collectors' Kubernetes client: calls over one HTTP/2 connection,
//! streams over HTTP/1.1.
//!
//! kube-rs speaks HTTP/1.1 only, one request in flight per connection. A burst of W concurrent
//! calls (the cascade's workers deleting 1,000 dependents) then opens up to W new TLS connections
//! beyond the few its pool holds, and each handshake costs the API server an RSA signature.
//! client-go, and so kube-controller-manager, sends everything over one HTTP/2 connection. On this
//! project's 2-core test machine sweeper's own CPU per deleted object fell from 0.14-0.15 to
//! 0.08-0.11 ms with it, and its DELETEs' time at the server from 29-44 to 15-29 ms
//! (docs/benchmarks.md, 2026-12-05). Its delete rate against a plain client's stayed inside the
//! runs' spread until the connection also set TCP_NODELAY, and its resident memory at 100,000
//! objects rose until the stream window shrank (both below).
//!
//! Decided here:
//! - **Calls** (get, list, create, patch, delete) go over HTTP/2 when the server offers it: one
//!   TLS connection, one handshake, however many calls are in flight.
//! - **Streams** (watches, `follow`, upgrades) stay on HTTP/1.1, a connection each, as before.
//!   kube-apiserver allows 100 streams per HTTP/2 connection (`--http2-max-streams-per-connection`
//!   unset) and hyper's HTTP/2 client queues a request beyond that instead of opening a second
//!   connection (Go's transport opens one). Sweeper's watches, one per resource type and never
//!   ending, would fill the connection and starve every call behind them.
//! - **Which protocol** is learnt from the first call's answer (ALPN offers h2 and http/1.1).
//!   Afterwards the HTTP/2 client runs HTTP/2 only, so hyper opens a single connection even for a
//!   burst that finds none (with both offered it lets every request of the burst connect, and
//!   drops all but one connection after their handshakes). A server without HTTP/2 (plain http,
//!   an HTTP/1.1 proxy) keeps every call on HTTP/1.1. A connection the HTTP/2-only client cannot
//!   make sends the next call back to learning.
//! - **Flow control**: a 1 MiB window per stream (client-go's is 4 MiB) and 1 GiB for the
//!   connection, so one slow reader of a large list never stalls the other calls sharing the
//!   connection. The stream window is memory: the cascade decodes its start-up list while the
//!   body arrives, and what the server sends ahead of the decoder waits in this process (on
//!   HTTP/1.1 it waited in the kernel's socket buffer). At 100,000 objects client-go's 4 MiB kept
//!   sweeper's resident memory about 2 MB above HTTP/1.1's, 1 MiB and 256 KiB did not (same
//!   sitting, docs/benchmarks.md, 2026-12-05 morning); 1 MiB still lets one list stream at
//!   20 MB/s over a 50 ms round trip.
//! - **TCP_NODELAY**, as Go's net package sets on every connection. Without it, a call written
//!   while an earlier frame on the shared connection waits for its ACK was held by Nagle's
//!   algorithm until the server's delayed ACK: sweeper's first deletion of a cascade came 50-63 ms
//!   after the owner's DELETE, 10-28 ms with it (same sitting, same reference).
//! - A kubeconfig with a `proxy-url` keeps kube-rs's own transport (HTTP/1.1 throughout): its
//!   proxy support is not rebuilt here.

use http::{Request, Response, Version};
use hyper::body::Incoming;
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::Config;
use kube::client::{Body, ConfigExt, DynBody};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};
use tower::util::BoxService;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

/// The boxed service a `kube::client::ClientBuilder` is built on.
pub type Transport = BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>;

type Connector = TimeoutConnector<hyper_rustls::HttpsConnector<HttpConnector>>;
type Hyper = HyperClient<Connector, Body>;

/// Per-stream and per-connection HTTP/2 receive windows (the module doc says why these).
const STREAM_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 1 << 30;

/// Which connection a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// A request answered and done: may share an HTTP/2 connection.
    Call,
    /// A response that stays open (a watch, a followed log) or an upgrade: a connection of its
    /// own.
    Stream,
}

/// Decides the lane from the request alone: `watch=true|1` or `follow=true|1` in the query, or
/// an `Upgrade` header.
pub fn lane<B>(req: &Request<B>) -> Lane {
    if req.headers().contains_key(http::header::UPGRADE) {
        return Lane::Stream;
    }
    let streaming = req.uri().query().is_some_and(|q| {
        q.split('&').any(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            matches!(key, "watch" | "follow") && matches!(value, "true" | "1")
        })
    });
    if streaming { Lane::Stream } else { Lane::Call }
}

/// What the server is known to speak to calls.
const UNKNOWN: u8 = 0;
const HTTP2: u8 = 1;
const HTTP1: u8 = 2;

#[derive(Clone)]
struct Split {
    /// Streams, and calls to a server without HTTP/2.
    http1: Hyper,
    /// Calls until the protocol is known: ALPN offers both.
    either: Hyper,
    /// Calls once the server is known to speak HTTP/2.
    http2: Hyper,
    learnt: Arc<AtomicU8>,
}

type ResponseFuture = Pin<
    Box<dyn Future<Output = Result<Response<Incoming>, hyper_util::client::legacy::Error>> + Send>,
>;

impl Service<Request<Body>> for Split {
    type Response = Response<Incoming>;
    type Error = hyper_util::client::legacy::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // hyper's legacy client is always ready; it queues in `request`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        if lane(&req) == Lane::Stream {
            return Box::pin(self.http1.request(req));
        }
        match self.learnt.load(Ordering::Relaxed) {
            HTTP2 => {
                // A server that stops speaking HTTP/2 (restarted behind a proxy without it)
                // fails every connection attempt of the HTTP/2-only client: learn again.
                let learnt = self.learnt.clone();
                let fut = self.http2.request(req);
                Box::pin(async move {
                    let res = fut.await;
                    if res.as_ref().is_err_and(|e| e.is_connect()) {
                        learnt.store(UNKNOWN, Ordering::Relaxed);
                    }
                    res
                })
            }
            HTTP1 => Box::pin(self.http1.request(req)),
            _ => {
                let learnt = self.learnt.clone();
                let fut = self.either.request(req);
                Box::pin(async move {
                    let res = fut.await?;
                    let spoke = if res.version() == Version::HTTP_2 {
                        HTTP2
                    } else {
                        HTTP1
                    };
                    if learnt.swap(spoke, Ordering::Relaxed) != spoke {
                        tracing::debug!(version = ?res.version(), "API server calls protocol learnt");
                    }
                    Ok(res)
                })
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Offer {
    Http1,
    Either,
    Http2,
}

fn hyper_client(config: &Config, offer: Offer) -> Result<Hyper, kube::Error> {
    let tls = config.rustls_client_config()?;
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let builder = match &config.tls_server_name {
        Some(name) => {
            let name = rustls_pki_types::ServerName::try_from(name.clone()).map_err(|e| {
                kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e))
            })?;
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    // Nagle's algorithm held calls on the shared HTTP/2 connection (module doc).
    http.set_nodelay(true);
    let https = match offer {
        Offer::Http1 => builder.enable_http1().wrap_connector(http),
        Offer::Either => builder.enable_http1().enable_http2().wrap_connector(http),
        Offer::Http2 => builder.enable_http2().wrap_connector(http),
    };
    // The timeouts kube-rs sets on its own connector.
    let mut connector = TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let mut builder = HyperClient::builder(TokioExecutor::new());
    builder
        .http2_initial_stream_window_size(STREAM_WINDOW)
        .http2_initial_connection_window_size(CONNECTION_WINDOW);
    if matches!(offer, Offer::Http2) {
        builder.http2_only(true);
    }
    Ok(builder.build(connector))
}

/// The transport for `config`, with kube-rs's own layers around it (base URI, authentication
/// and its refresh, extra headers, its retry of transient server errors); None when kube-rs's
/// transport must be kept (a proxy).
pub fn transport(config: &Config) -> Result<Option<Transport>, kube::Error> {
    if config.proxy_url.is_some() {
        return Ok(None);
    }
    let split = Split {
        http1: hyper_client(config, Offer::Http1)?,
        either: hyper_client(config, Offer::Either)?,
        http2: hyper_client(config, Offer::Http2)?,
        learnt: Arc::new(AtomicU8::new(UNKNOWN)),
    };
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.default_retry.then(|| {
            tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry())
        }))
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(split)
        .map_response(|res: Response<Incoming>| {
            res.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        });
    Ok(Some(BoxService::new(service)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(uri: &str) -> Request<()> {
        Request::get(uri).body(()).unwrap()
    }

    #[test]
    fn lane_by_request() {
        let cases = [
            (
                "/api/v1/configmaps?watch=true&resourceVersion=5",
                Lane::Stream,
            ),
            ("/api/v1/configmaps?resourceVersion=5&watch=1", Lane::Stream),
            ("/api/v1/namespaces/a/pods/p/log?follow=true", Lane::Stream),
            ("/api/v1/configmaps?watch=false", Lane::Call),
            ("/api/v1/configmaps?limit=500", Lane::Call),
            ("/api/v1/configmaps", Lane::Call),
            // a name that merely contains the word is not a watch
            (
                "/api/v1/namespaces/watch/configmaps/watch?labelSelector=watch%3Dtrue",
                Lane::Call,
            ),
            ("/api/v1/configmaps?allowWatchBookmarks=true", Lane::Call),
        ];
        for (uri, want) in cases {
            assert_eq!(lane(&req(uri)), want, "{uri}");
        }
        let upgrade = Request::get("/api/v1/namespaces/a/pods/p/exec")
            .header(http::header::UPGRADE, "websocket")
            .body(())
            .unwrap();
        assert_eq!(lane(&upgrade), Lane::Stream);
    }
}
