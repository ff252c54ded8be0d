//! Whose cluster, on the controller's side. Before a pass deletes anything: the owner Cluster
//! proves the object's name (cluster.rs, [`unproven`](KindReconciler::unproven) when it does
//! not), and no other object claims one of the cluster's names in its account and region
//! (the decision is `claims::rivals`). Either failing holds the teardown and says why (condition
//! and Warning Event; a collision on both objects).

use crate::engine::finalizer_controller::{Checked, Pass};
use crate::external::controller::{ClusterInput, ExternalError, FINALIZER, KindReconciler};
use crate::external::core::claims::{self, NameClaim};
use crate::external::core::cluster::{self, ClusterNames};
use crate::external::core::conditions::{self, Desired, Severity};
use crate::external::core::kind::GcKind;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::events::EventType;
use std::time::Duration;
use sweeper_aws::scope::Scope;

/// A held teardown looks again this often: the other object may be gone by then.
const COLLISION_RETRY: Duration = Duration::from_secs(30);
pub(super) const REASON: &str = "NameCollision";

impl<K: GcKind> KindReconciler<K> {
    /// The owner is not proven: nothing is deleted, the finalizer stays, and the object says why
    /// and how an administrator lets it go.
    pub(super) async fn unproven(
        &self,
        o: &K,
        why: &cluster::OwnerNotProven,
    ) -> Result<Checked<ClusterInput>, ExternalError> {
        let text = format!(
            "whose cluster this is is not proven: {why}. Nothing is deleted and the finalizer {FINALIZER} stays until the owner Cluster references this object; to let it go without a teardown, an administrator removes that finalizer by hand (docs/capa.md, \"Whose cluster\"), then `sweeper teardown` cleans up what is proven to be the cluster's"
        );
        tracing::warn!(reason = %why, "owner not proven: nothing is deleted");
        if self
            .condition(
                o,
                Desired::not_done(Severity::Warning, "OwnerNotProven", &text),
            )
            .await?
        {
            self.warn(o, "OwnerNotProven", text).await;
        }
        Ok(Checked::Invalid {
            release: false,
            retry: Some(crate::external::controller::UNPROVEN_RETRY),
        })
    }

    /// `None`: no other object claims the names here. `Some(pass)`: the teardown is held.
    pub(super) async fn collision(
        &self,
        o: &K,
        names: &ClusterNames,
        here: &Scope,
    ) -> Result<Option<Pass>, ExternalError> {
        let me = NameClaim::of(o);
        let c = &self.ctx;
        let clashing =
            match claims::clashing(&c.client, &c.capa_namespace, &c.sessions, &me, here).await {
                Ok(found) => found,
                Err(e) => {
                    let text = format!("{e}; nothing is deleted until it can be checked");
                    tracing::warn!(error = %e, "cannot check for objects claiming the same name");
                    if self
                        .condition(
                            o,
                            Desired::not_done(Severity::Warning, "ClaimsUnreadable", &text),
                        )
                        .await?
                    {
                        self.warn(o, "ClaimsUnreadable", text.clone()).await;
                    }
                    return Ok(Some(Pass::Left {
                        phase: "name check".into(),
                        detail: text,
                        after: COLLISION_RETRY,
                    }));
                }
            };
        if clashing.is_empty() {
            return Ok(None);
        }
        let others: Vec<String> = clashing.iter().map(|(_, s)| s.clone()).collect();
        let text = format!(
            "cluster name {} is also claimed by {} (account {}, region {}): AWS tags carry only the name, so their resources cannot be told apart; nothing of that name is deleted until only one object claims it",
            names.describe(),
            others.join("; "),
            here.account,
            here.region
        );
        tracing::warn!(others = %others.join("; "), "name collision: teardown held");
        if self
            .condition(o, Desired::not_done(Severity::Warning, REASON, &text))
            .await?
        {
            self.warn(o, REASON, text.clone()).await;
            let me_label = Self::label(o);
            for (rival, _) in &clashing {
                self.tell_rival(rival, &me_label, names).await;
            }
        }
        Ok(Some(Pass::Left {
            phase: "name collision".into(),
            detail: text,
            after: COLLISION_RETRY,
        }))
    }

    /// The other object hears of the collision too: a Warning Event and our condition on it. A
    /// failure to write there is logged: it never changes what this object does.
    async fn tell_rival(&self, rival: &NameClaim, me: &str, names: &ClusterNames) {
        let ar = if rival.kind == "AWSManagedControlPlane" {
            ApiResource::erase::<crate::api::capa::AWSManagedControlPlane>(&())
        } else {
            ApiResource::erase::<crate::api::capa::AWSCluster>(&())
        };
        let text = format!(
            "{me} is being deleted and claims cluster name {} in the same account and region as this object: its teardown is held, and this object's would be too, until only one object claims the name",
            names.describe()
        );
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.ctx.client.clone(), &rival.namespace, &ar);
        if let Err(e) = conditions::set(
            &api,
            &rival.name,
            Desired::not_done(Severity::Warning, REASON, &text),
        )
        .await
        {
            tracing::warn!(object = %rival.label, error = %e, "cannot set the name-collision condition on the other object");
        }
        let reference = ObjectReference {
            api_version: Some(ar.api_version.clone()),
            kind: Some(ar.kind.clone()),
            name: Some(rival.name.clone()),
            namespace: Some(rival.namespace.clone()),
            uid: Some(rival.uid.clone()),
            ..Default::default()
        };
        self.ctx
            .events
            .emit(&reference, EventType::Warning, REASON, text)
            .await;
    }
}
