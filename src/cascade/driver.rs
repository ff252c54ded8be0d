//! The one loop both cascade work queues run (attempt-to-delete, attempt-to-orphan), in
//! kube-runtime's controller shape: an attempt per item, and on failure an error policy that
//! decides, from the error alone, what happens to the item next. The driver applies the decision
//! (requeue with backoff, park until the collector is resumed, forget the failure count), counts
//! every failure by `{resource, reason}` and logs it, the same way for both queues.

use super::actions::ActionError;
use super::context::Ctx;
use super::failure::{WorkError, WorkFailure};
use super::metrics::CascadeMetrics;
use crate::engine::graph::uid::Uid;
use crate::engine::queue::WorkQueue;
use std::sync::Arc;

/// Which queue a driver serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queue {
    /// attempt-to-delete (`worker.rs`).
    Delete,
    /// attempt-to-orphan (`orphan.rs`).
    Orphan,
}

impl Queue {
    /// The queue's name, as the `queue` label of `sweeper_cascade_queue_depth`.
    pub fn name(self) -> &'static str {
        match self {
            Queue::Delete => "attempt_to_delete",
            Queue::Orphan => "attempt_to_orphan",
        }
    }

    fn items(self, ctx: &Ctx) -> &Arc<WorkQueue<Uid>> {
        match self {
            Queue::Delete => &ctx.delete_q,
            Queue::Orphan => &ctx.orphan_q,
        }
    }

    async fn attempt(self, ctx: &Ctx, uid: Uid) -> Result<(), WorkFailure> {
        match self {
            Queue::Delete => super::worker::attempt_to_delete(ctx, uid).await,
            Queue::Orphan => super::orphan::attempt_to_orphan(ctx, uid).await,
        }
    }
}

/// What happens to an item after an attempt (kube-runtime's `Action`, for a work queue).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Done: its failure count is forgotten.
    Forget,
    /// Failed: counted, then requeued with the queue's per-item backoff.
    Backoff,
    /// Refused by the collector's pause: not a failure. Requeued without backoff, and this
    /// driver waits until the collector is resumed.
    AwaitResume,
}

/// The error policy's decision for one failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub next: Next,
    /// The object waits for discovery to serve a kind (requeued when discovery changes).
    pub wait_for_kind: bool,
    /// An expected race (a conflict, an object changed since observed): logged at debug, as the
    /// retry re-classifies it at once.
    pub expected: bool,
}

/// The error policy of `queue`, pure: what a failure means for its item.
pub fn error_policy(queue: Queue, e: &WorkError) -> Policy {
    if e.paused() {
        return Policy {
            next: Next::AwaitResume,
            wait_for_kind: false,
            expected: true,
        };
    }
    let unknown_kind = matches!(
        e,
        WorkError::UnknownKind { .. } | WorkError::UnknownOwnerKind { .. }
    );
    Policy {
        next: Next::Backoff,
        // Only attempt-to-delete items are requeued by discovery (`Ctx::requeue_unresolved`
        // adds to the delete queue); an orphaning owner of an unknown kind retries with backoff.
        wait_for_kind: unknown_kind && queue == Queue::Delete,
        expected: matches!(
            e,
            WorkError::Action(ActionError::Conflict { .. }) | WorkError::Changed { .. }
        ),
    }
}

/// Runs one driver of `queue` until the queue shuts down.
pub async fn run(ctx: Arc<Ctx>, queue: Queue) {
    let q = queue.items(&ctx).clone();
    while let Some(uid) = q.get().await {
        let next = match queue.attempt(&ctx, uid).await {
            Ok(()) => Next::Forget,
            Err(f) => failed(&ctx, queue, &q, uid, &f),
        };
        match next {
            Next::Forget => q.forget(&uid),
            Next::Backoff => q.add_rate_limited(uid),
            Next::AwaitResume => {
                // Requeued as new (no backoff) once this attempt is marked done, then parked.
                q.forget(&uid);
                q.done(&uid);
                q.add(uid);
                ctx.config.fence.resumed().await;
                continue;
            }
        }
        q.done(&uid);
    }
}

/// Applies the error policy's effects (kind wait, count, log) and returns its decision.
fn failed(ctx: &Ctx, queue: Queue, q: &WorkQueue<Uid>, uid: Uid, f: &WorkFailure) -> Next {
    let policy = error_policy(queue, &f.error);
    if policy.next == Next::AwaitResume {
        return policy.next;
    }
    if policy.wait_for_kind {
        ctx.wait_for_kind(uid);
    }
    ctx.metrics
        .errors
        .get_or_create(&CascadeMetrics::failure(&f.resource, f.error.reason()))
        .inc();
    let failures = q.failures(&uid);
    if policy.expected {
        tracing::debug!(queue = queue.name(), error = %f.error, "conflict; re-classifying");
    } else {
        tracing::warn!(queue = queue.name(), error = %f.error, failures, "attempt failed; retrying with backoff");
    }
    policy.next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown_kind() -> WorkError {
        WorkError::UnknownKind {
            object: "Nope ns/x".into(),
            kind: "example.com/v1/Nope".into(),
        }
    }

    #[test]
    fn an_unknown_kind_waits_for_discovery_only_on_the_delete_queue() {
        let on_delete = error_policy(Queue::Delete, &unknown_kind());
        assert_eq!(on_delete.next, Next::Backoff);
        assert!(on_delete.wait_for_kind);
        let on_orphan = error_policy(Queue::Orphan, &unknown_kind());
        assert_eq!(on_orphan.next, Next::Backoff);
        assert!(
            !on_orphan.wait_for_kind,
            "discovery requeues into the delete queue only"
        );
    }

    #[test]
    fn a_conflict_or_a_change_is_retried_as_an_expected_race() {
        for queue in [Queue::Delete, Queue::Orphan] {
            let conflict = WorkError::Action(ActionError::Conflict {
                verb: "delete",
                kind: "ConfigMap".into(),
                name: "ns/x".into(),
            });
            let changed = WorkError::Changed {
                object: "ConfigMap ns/x".into(),
            };
            for e in [conflict, changed] {
                let p = error_policy(queue, &e);
                assert_eq!(
                    (p.next, p.expected, p.wait_for_kind),
                    (Next::Backoff, true, false)
                );
            }
            let p = error_policy(queue, &unknown_kind());
            assert!(!p.expected, "an unknown kind is worth a warning");
        }
    }
}
