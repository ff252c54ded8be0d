//! The one HTTP port: /healthz (process alive), /readyz (connected and discovered), /metrics.
//! Collectors add their query routes (graph, status) to the protected ones ([`app`]).
//!
//! By default the port speaks HTTPS ([`tls`]) and everything but the probes needs a bearer token
//! the API server authenticates and authorizes ([`auth`]), as controller-runtime serves metrics;
//! `--http-insecure` serves plain HTTP with no authentication, for local use.

pub mod auth;
pub mod tls;

use crate::engine::health::Health;
use crate::metrics::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Shared, cheap-to-clone state behind the HTTP handlers: the metrics and the engine's
/// readiness (read here, written by the engine; `Deref` lets callers ask it directly).
#[derive(Clone)]
pub struct AppState {
    pub metrics: Arc<Metrics>,
    pub health: Health,
}

impl AppState {
    pub fn new(metrics: Metrics) -> Self {
        Self {
            metrics: Arc::new(metrics),
            health: Health::new(),
        }
    }
}

impl std::ops::Deref for AppState {
    type Target = Health;
    fn deref(&self) -> &Health {
        &self.health
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    if state.is_ready() {
        (StatusCode::OK, format!("ok{}", state.notes()))
    } else {
        let reasons = state.reasons();
        let parts: Vec<String> = state
            .not_ready()
            .into_iter()
            .map(|c| match reasons.get(c) {
                Some(r) => format!("{c} ({r})"),
                None => c.to_string(),
            })
            .collect();
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}{}", parts.join(", "), state.notes()),
        )
    }
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    match state.metrics.encode() {
        Ok(body) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The probes: open to anyone, whatever the port's security (kubelet probes carry no token).
pub fn probes(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// /metrics, one of the protected routes.
pub fn metrics_router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// The whole port: the probes, and `protected` behind the token review when there is a
/// `reviewer` (none: `--http-insecure`).
pub fn app(state: AppState, protected: Router, reviewer: Option<auth::Reviewer>) -> Router {
    // The fallback too: an unknown path is refused like a known one, so the routes a build
    // serves (e.g. /graph only with the cascade collector) are not told to strangers.
    let protected = protected.fallback(|| async { StatusCode::NOT_FOUND });
    let protected = match reviewer {
        Some(r) => protected.layer(axum::middleware::from_fn_with_state(r, auth::require)),
        None => protected,
    };
    probes(state).merge(protected)
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot bind the HTTP server to {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HTTP server on {addr} failed: {source}")]
    Serve {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

/// Serves until `shutdown` is cancelled, then drains in-flight requests: HTTPS with `cert`,
/// plain HTTP without.
pub async fn serve(
    addr: SocketAddr,
    app: Router,
    cert: Option<std::sync::Arc<tls::Certificate>>,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let local = listener.local_addr().unwrap_or(addr);
    let stop = async move { shutdown.cancelled().await };
    let served = match cert {
        Some(cert) => {
            let listener = tls::TlsListener::new(listener, tls::acceptor(cert))
                .map_err(|source| ServerError::Bind { addr, source })?;
            tracing::info!(addr = %local, "HTTPS server listening (/healthz, /readyz open; /metrics, /status, /graph need a token)");
            axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
        }
        None => {
            tracing::info!(addr = %local, "HTTP server listening, insecure: no TLS, no authentication (/healthz, /readyz, /metrics, /status, /graph)");
            axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
        }
    };
    served.map_err(|source| ServerError::Serve { addr, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_component_is() {
        let s = AppState::new(Metrics::new());
        assert!(!s.is_ready(), "nothing declared yet");
        s.expect("discovery");
        s.expect("cascade");
        s.set_ready("discovery", true);
        assert!(!s.is_ready());
        assert_eq!(s.not_ready(), vec!["cascade"]);
        s.set_ready("cascade", true);
        assert!(s.is_ready());
        s.set_all_unready();
        assert!(!s.is_ready());
    }
}
