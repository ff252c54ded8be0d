//! The one HTTP port: /healthz (process alive), /readyz (connected and discovered), /metrics.
//! Collectors add their query routes (graph, status) by merging a router into [`router`].

use crate::metrics::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// Shared, cheap-to-clone state behind the HTTP handlers.
#[derive(Clone)]
pub struct AppState {
    pub metrics: Arc<Metrics>,
    /// Readiness by component ("discovery", "cascade", ...): ready when all are. A component
    /// that is not ready may say why (e.g. its watch keeps failing).
    components: Arc<Mutex<BTreeMap<&'static str, Readiness>>>,
    /// Lines /readyz adds whether ready or not (e.g. which collectors are paused): a paused
    /// collector is healthy and ready, only told apart here.
    notes: Arc<Mutex<BTreeMap<&'static str, String>>>,
}

#[derive(Clone, Debug, Default)]
struct Readiness {
    ready: bool,
    reason: Option<String>,
}

impl AppState {
    pub fn new(metrics: Metrics) -> Self {
        Self {
            metrics: Arc::new(metrics),
            components: Arc::new(Mutex::new(BTreeMap::new())),
            notes: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    /// Sets (or with None clears) a note shown on /readyz.
    pub fn set_note(&self, key: &'static str, note: Option<String>) {
        let mut n = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        match note {
            Some(v) => n.insert(key, v),
            None => n.remove(key),
        };
    }

    fn notes(&self) -> String {
        self.notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| format!("\n{k}: {v}"))
            .collect()
    }

    /// Declares a component that must report ready before /readyz does.
    pub fn expect(&self, component: &'static str) {
        self.lock().entry(component).or_default();
    }

    pub fn set_ready(&self, component: &'static str, ready: bool) {
        self.lock().insert(
            component,
            Readiness {
                ready,
                reason: None,
            },
        );
    }

    /// Marks `component` not ready, saying why (shown on /readyz and /status).
    pub fn set_failing(&self, component: &'static str, reason: String) {
        self.lock().insert(
            component,
            Readiness {
                ready: false,
                reason: Some(reason),
            },
        );
    }

    /// Marks every component unready (shutdown).
    pub fn set_all_unready(&self) {
        self.lock().values_mut().for_each(|v| v.ready = false);
    }

    pub fn is_ready(&self) -> bool {
        let c = self.lock();
        !c.is_empty() && c.values().all(|v| v.ready)
    }

    /// Components not ready yet, for the /readyz body.
    pub fn not_ready(&self) -> Vec<&'static str> {
        self.lock()
            .iter()
            .filter(|(_, v)| !v.ready)
            .map(|(k, _)| *k)
            .collect()
    }

    /// Why components are not ready, where they said: `component -> reason`.
    pub fn reasons(&self) -> BTreeMap<String, String> {
        self.lock()
            .iter()
            .filter(|(_, v)| !v.ready)
            .filter_map(|(k, v)| Some((k.to_string(), v.reason.clone()?)))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, Readiness>> {
        self.components.lock().unwrap_or_else(|p| p.into_inner())
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
