//! The one HTTP port: /healthz (process alive), /readyz (connected and discovered), /metrics.
//! Collectors add their query routes (graph, status) by merging a router into [`router`].

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

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
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
}

/// Serves until `shutdown` is cancelled, then drains in-flight requests.
pub async fn serve(
    addr: SocketAddr,
    app: Router,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let local = listener.local_addr().unwrap_or(addr);
    tracing::info!(addr = %local, "HTTP server listening (/healthz, /readyz, /metrics)");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(|source| ServerError::Serve { addr, source })
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
