//! Readiness, owned by the engine: each component (discovery, a collector's watches, leader
//! election, the pause switch) declares itself and says when it is ready or why not. The HTTP
//! server only reads it (/readyz, /status), so no arrow runs from the engine up to the server.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Cheap to clone; clones share the state.
#[derive(Clone, Default)]
pub struct Health {
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

impl Health {
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets (or with None clears) a note shown on /readyz.
    pub fn set_note(&self, key: &'static str, note: Option<String>) {
        let mut n = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        match note {
            Some(v) => n.insert(key, v),
            None => n.remove(key),
        };
    }

    /// The notes, one `\nkey: value` line each, for the /readyz body.
    pub fn notes(&self) -> String {
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
