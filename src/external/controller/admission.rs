//! Cluster API's contract on the controller's side (the decision itself is
//! `contract::decide`): read what the decision needs, the owning Cluster and on EKS the
//! AWSManagedCluster, only when something is at stake; report a wait on the object; record what is
//! left alone for `sweeper status`.

use crate::engine::finalizer::Stage;
use crate::engine::finalizer_controller::Admission;
use crate::external::controller::{Admitted, ExternalError, FINALIZER, KindReconciler};
use crate::external::core::cluster::{self, Owning};
use crate::external::core::conditions::{Desired, Severity};
use crate::external::core::contract::{self, ClusterState, Decision, Hold, Subject};
use crate::external::core::kind::GcKind;
use kube::ResourceExt;
use kube::runtime::events::EventType;
use std::ops::Not;
use std::time::Duration;

/// A waiting deletion looks again this often (the Cluster watch brings an unpause at once; this
/// covers a pause lifted where no watch sees it, e.g. on the AWSManagedCluster).
const PAUSED_RETRY: Duration = Duration::from_secs(60);
/// A Cluster that could not be read is read again after this long.
const UNREADABLE_RETRY: Duration = Duration::from_secs(10);
/// A live object of a paused cluster, without our finalizer, looks again this often.
const LIVE_PAUSED_RETRY: Duration = Duration::from_secs(300);

impl<K: GcKind> KindReconciler<K> {
    pub(super) async fn admission(
        &self,
        o: &K,
        stage: Stage,
    ) -> Result<Admission<Admitted>, ExternalError> {
        let label = Self::label(o);
        let deleting = o.meta().deletion_timestamp.is_some();
        let holds_finalizer = o.finalizers().iter().any(|f| f == FINALIZER);
        let own = Subject::new(&label, o.annotations(), None, holds_finalizer, deleting);
        // A dry run takes no finalizer: for a live object nothing is at stake.
        let at_stake = stage == Stage::Cleanup || self.ctx.dry_run.not();
        let mut admitted = Admitted::default();
        let decision = if at_stake && contract::needs_cluster(&own) {
            // One read of the owning Cluster answers both the contract and, on EKS, where the
            // AWSManagedCluster's opt-out is; validation is handed what was read.
            let owning = Owning::read(&self.ctx.capi, o).await;
            let mut state = owning.state();
            admitted.proof = Some(owning.proof(&K::kind(&()), &o.name_any()));
            let linked = match o.linked_switches(&self.ctx.capi, Some(owning)).await {
                Ok(l) => {
                    admitted.linked = Some(l.clone());
                    l
                }
                Err(e) => {
                    // Whether the AWSManagedCluster is paused, moved or handed over is unknown.
                    if !matches!(state, ClusterState::Unreadable { .. }) {
                        state = ClusterState::Unreadable {
                            name: cluster::owning_cluster(o)
                                .map(|c| format!("{}/{c}", o.namespace().unwrap_or_default()))
                                .unwrap_or_default(),
                            error: format!("its infrastructure object cannot be read: {e}"),
                        };
                    }
                    None
                }
            };
            let subject = Subject::new(
                &label,
                o.annotations(),
                linked.as_ref(),
                holds_finalizer,
                deleting,
            );
            contract::decide(&subject, Some(&state))
        } else {
            let decision = contract::decide(&own, None);
            if decision == Decision::Act {
                // A live object we guard: nothing is done for it until it is deleted, so the
                // Cluster is not read; what the Cluster watch saw still shows in `sweeper status`.
                return Ok(self.guarded(o, &label));
            }
            decision
        };
        let held = &self.ctx.metrics.held;
        match decision {
            Decision::Act => {
                held.release(&label);
                Ok(Admission::Proceed(admitted))
            }
            Decision::Release(why) => {
                held.hold(&label, why.state(), why.to_string());
                Ok(Admission::Release {
                    reason: why.reason(),
                    note: format!("{why}; finalizer {FINALIZER} released without any AWS call"),
                })
            }
            Decision::Ignore(why) => {
                held.hold(&label, why.state(), why.to_string());
                tracing::debug!(reason = %why, "left alone under Cluster API's contract");
                Ok(Admission::Ignore)
            }
            Decision::Wait(hold) => self.wait(o, &label, stage, hold).await,
        }
    }

    /// Nothing is called in AWS and no finalizer changes. A deletion that would run a pass now
    /// says why it waits on the object (condition, and one Event when that changes); a live
    /// object only waits.
    async fn wait(
        &self,
        o: &K,
        label: &str,
        stage: Stage,
        hold: Hold,
    ) -> Result<Admission<Admitted>, ExternalError> {
        let message = hold.to_string();
        self.ctx
            .metrics
            .held
            .hold(label, hold.state(), message.clone());
        let paused = matches!(hold, Hold::Paused(_));
        if stage != Stage::Cleanup {
            tracing::info!(reason = %message, "not taking the finalizer: {}", hold.state());
            return Ok(Admission::Hold {
                retry: Some(if paused {
                    LIVE_PAUSED_RETRY
                } else {
                    UNREADABLE_RETRY
                }),
                status: None,
            });
        }
        let (severity, event_type, event_reason) = if paused {
            (Severity::Info, EventType::Normal, "TeardownPaused")
        } else {
            (Severity::Warning, EventType::Warning, "ClusterUnreadable")
        };
        let text = format!("{message}; nothing in AWS is touched meanwhile");
        let changed = self
            .condition(o, Desired::not_done(severity, hold.reason(), &text))
            .await?;
        if changed {
            tracing::info!(reason = %message, "teardown waits: {}", hold.state());
            self.ctx
                .events
                .emit(&o.object_ref(&()), event_type, event_reason, text.clone())
                .await;
        }
        Ok(Admission::Hold {
            retry: Some(if paused {
                PAUSED_RETRY
            } else {
                UNREADABLE_RETRY
            }),
            status: Some((format!("waiting: {}", hold.state()), text)),
        })
    }

    /// Proceed with a live object, recording whether the Cluster watch last saw its Cluster paused.
    fn guarded(&self, o: &K, label: &str) -> Admission<Admitted> {
        let held = &self.ctx.metrics.held;
        let namespace = o.namespace().unwrap_or_default();
        match cluster::owning_cluster(o) {
            Some(c) if self.ctx.pauses.get(&namespace, &c) == Some(true) => {
                let hold = Hold::Paused(contract::PausedBy::Cluster(format!("{namespace}/{c}")));
                held.hold(label, hold.state(), hold.to_string());
            }
            _ => held.release(label),
        }
        Admission::Proceed(Admitted::default())
    }

    /// The object left the watch: it is held no more.
    pub(super) fn forgotten(&self, o: &K) {
        self.ctx.metrics.held.release(&Self::label(o));
    }
}
