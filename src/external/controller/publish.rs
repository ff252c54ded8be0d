//! How a pass is told on the object: our condition, Warning Events, a refused identity's
//! backoff, a dry run's plan, and the audit record of what was deleted in AWS.

use crate::engine::finalizer_controller::Pass;
use crate::external::controller::metrics::ExternalMetrics;
use crate::external::controller::{ExternalError, FINALIZER, KindReconciler};
use crate::external::core::cluster::ClusterNames;
use crate::external::core::conditions::{self, Desired, Severity};
use crate::external::core::kind::GcKind;
use crate::external::report::outcome::dry_run_summary;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use std::time::Duration;
use sweeper_aws::phases::PassReport;

impl<K: GcKind> KindReconciler<K> {
    pub(super) fn dynamic(&self, obj: &impl Resource<DynamicType = ()>) -> Api<DynamicObject> {
        let ns = obj.meta().namespace.clone().unwrap_or_default();
        Api::namespaced_with(self.ctx.client.clone(), &ns, &ApiResource::erase::<K>(&()))
    }

    pub(super) fn label(obj: &impl Resource<DynamicType = ()>) -> String {
        crate::engine::meta::object_label(
            &K::kind(&()),
            obj.meta().namespace.as_deref(),
            obj.meta().name.as_deref().unwrap_or_default(),
        )
    }

    /// Sets our condition; true when it changed.
    pub(super) async fn condition(
        &self,
        obj: &impl Resource<DynamicType = ()>,
        want: Desired<'_>,
    ) -> Result<bool, ExternalError> {
        let name = obj.meta().name.clone().unwrap_or_default();
        conditions::set(&self.dynamic(obj), &name, want)
            .await
            .map_err(|source| ExternalError::Condition {
                object: Self::label(obj),
                source,
            })
    }

    /// The cluster's identity or session was refused: nothing is called or deleted, the
    /// finalizer stays, the condition and a Warning Event name the identity and the reason,
    /// and the pass is retried with backoff (a fix to an identity object or Secret is seen at
    /// the next try, since they are read fresh).
    pub(super) async fn refused(
        &self,
        o: &K,
        uid: &str,
        reason: &str,
        message: String,
    ) -> Result<Pass, ExternalError> {
        let after = self.ctx.refused_again(uid);
        tracing::warn!(%reason, error = %message, retry_in = ?after, "cluster identity refused: no AWS call made, nothing deleted");
        self.ctx
            .metrics
            .identity_refused
            .get_or_create(&crate::external::controller::metrics::ReasonLabels {
                reason: reason.into(),
            })
            .inc();
        let text = format!("{message}; nothing is deleted until it is fixed");
        if self
            .condition(o, Desired::not_done(Severity::Warning, reason, &text))
            .await?
        {
            self.warn(o, reason, text.clone()).await;
        }
        Ok(Pass::Left {
            phase: "identity".into(),
            detail: text,
            after,
        })
    }

    /// `--external-dry-run`: a pass that only planned. The plan goes into the condition (reason
    /// `DryRun`), an Event and the would-delete metric when it is new or changes, and into
    /// `sweeper status`; it is made again every minute while the object is being deleted.
    pub(super) async fn planned(
        &self,
        o: &K,
        cluster_name: &str,
        place: &str,
        report: &PassReport,
        problem: Option<&str>,
    ) -> Result<Pass, ExternalError> {
        let mut message = format!("{} ({place})", dry_run_summary(report));
        if let Some(p) = problem {
            message = format!("{p}; {message}");
        }
        tracing::info!(cluster = %cluster_name, plan = %message, "dry run: external teardown plan");
        let changed = self
            .condition(o, Desired::not_done(Severity::Info, "DryRun", &message))
            .await?;
        if changed {
            for r in report.phases.iter().flat_map(|p| &p.planned) {
                self.ctx
                    .metrics
                    .would_delete
                    .get_or_create(&ExternalMetrics::labels(&r.service, &r.kind))
                    .inc();
            }
            self.ctx
                .events
                .emit(
                    &o.object_ref(&()),
                    EventType::Normal,
                    "DryRunPlan",
                    message.clone(),
                )
                .await;
            if let Some(p) = problem {
                self.warn(o, "InvalidConfiguration", p.to_string()).await;
            }
        }
        // A finalizer a live run added before the switch to dry run: the plan is reported and the
        // finalizer goes, so handing garbage collection back (sweeper to dry run, then CAPA's gate
        // on) never leaves a deletion hanging on a collector that will not delete.
        if o.finalizers().iter().any(|f| f == FINALIZER) {
            return Ok(Pass::Release {
                reason: "DryRunReleased",
                note: format!(
                    "dry run: nothing deleted; finalizer {FINALIZER} released so the deletion is not held. Plan: {message}"
                ),
            });
        }
        Ok(Pass::Left {
            phase: "DryRun".into(),
            detail: message,
            after: Duration::from_secs(60),
        })
    }

    /// The audit trail: what this pass deleted in AWS, recorded in sweeper's namespace and
    /// labelled with the cluster (its namespace and name). A failed write is logged, never
    /// fatal: the deletes happened.
    pub(super) async fn audit(
        &self,
        o: &K,
        names: &ClusterNames,
        session: &sweeper_aws::session::Session,
        report: &PassReport,
    ) {
        let deleted: Vec<_> = report
            .phases
            .iter()
            .flat_map(|p| p.audit.iter().map(move |a| (p.phase.number(), a)))
            .collect();
        // What the pass found and left for the user (external-dns records of the cluster's load
        // balancers): in the audit record of the pass that deletes those load balancers.
        let kept: Vec<_> = report
            .phases
            .iter()
            .flat_map(|p| p.kept.iter().map(move |k| (p.phase.number(), k)))
            .collect();
        if !deleted.is_empty()
            && let Err(e) = crate::external::core::audit::write(
                &self.ctx.client,
                &self.ctx.audit_namespace,
                names,
                session,
                &o.object_ref(&()),
                crate::external::core::audit::AuditedPass {
                    deleted: &deleted,
                    kept: &kept,
                },
                self.ctx.audit_ttl,
            )
            .await
        {
            tracing::warn!(error = %e, "cannot write the AWS audit record; the deletes happened and are logged");
        }
    }

    pub(super) async fn warn(
        &self,
        obj: &impl Resource<DynamicType = ()>,
        reason: &str,
        note: String,
    ) {
        self.ctx
            .events
            .emit(&obj.object_ref(&()), EventType::Warning, reason, note)
            .await;
    }
}
