//! Each teardown's progress while its pass runs, for `/status` (`tenant_progress`) and
//! `sweeper status`: the tenant's objects still there and those deleted so far. A pass of a few
//! hundred deletes takes seconds at the client's rate limit; without this the only sign of life
//! between two passes was the log.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The `/status` field holding every teardown's progress, by tenant id.
pub const FIELD: &str = "tenant_progress";

/// One teardown's progress, as `/status` shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Objects of the tenant the current pass found and has not seen go yet.
    pub left: u64,
    /// Objects this process deleted for the teardown, over all its passes.
    pub deleted: u64,
}

/// Shared by the collector (which writes it) and its `/status` part (which reads it).
#[derive(Clone, Default)]
pub struct TeardownProgress {
    inner: Arc<Mutex<BTreeMap<String, Progress>>>,
}

impl TeardownProgress {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Progress>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A pass found `found` objects of `tenant` still there.
    pub fn found(&self, tenant: &str, found: u64) {
        self.lock().entry(tenant.to_string()).or_default().left = found;
    }

    /// A pass's last check found `more` objects the index had not shown.
    pub fn found_more(&self, tenant: &str, more: u64) {
        self.lock().entry(tenant.to_string()).or_default().left += more;
    }

    /// One object of `tenant` deleted; `gone`: it went at once (no finalizer holds it), so it is
    /// no longer left.
    pub fn deleted(&self, tenant: &str, gone: bool) {
        let mut map = self.lock();
        let p = map.entry(tenant.to_string()).or_default();
        p.deleted += 1;
        if gone {
            p.left = p.left.saturating_sub(1);
        }
    }

    /// The teardown is over (released) or forgotten.
    pub fn finish(&self, tenant: &str) {
        self.lock().remove(tenant);
    }

    pub fn get(&self, tenant: &str) -> Option<Progress> {
        self.lock().get(tenant).copied()
    }

    pub fn list(&self) -> BTreeMap<String, Progress> {
        self.lock().clone()
    }
}

/// `sweeper status`'s lines for the progress in `/status` (none when there is none).
pub fn render(status: &serde_json::Map<String, serde_json::Value>) -> String {
    let all: BTreeMap<String, Progress> = status
        .get(FIELD)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    all.iter()
        .map(|(tenant, p)| {
            format!(
                "\n  tenant {tenant}: {} left, {} deleted",
                p.left, p.deleted
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_counts_down_what_is_left_and_up_what_is_deleted() {
        let p = TeardownProgress::default();
        p.found("abc123", 3);
        p.deleted("abc123", true);
        p.deleted("abc123", false);
        assert_eq!(
            p.get("abc123"),
            Some(Progress {
                left: 2,
                deleted: 2
            }),
            "an object held by finalizers is deleted but still there"
        );
        p.found("abc123", 1);
        p.found_more("abc123", 2);
        assert_eq!(p.get("abc123").map(|x| (x.left, x.deleted)), Some((3, 2)));
        let status = serde_json::Map::from_iter([(
            FIELD.to_string(),
            serde_json::to_value(p.list()).unwrap(),
        )]);
        assert_eq!(render(&status), "\n  tenant abc123: 3 left, 2 deleted");
        p.finish("abc123");
        assert!(p.list().is_empty());
        assert_eq!(render(&serde_json::Map::new()), "");
    }
}
