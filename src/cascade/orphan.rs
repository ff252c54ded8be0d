//! attempt-to-orphan: an owner deleted with propagationPolicy=Orphan keeps the `orphan`
//! finalizer until every dependent's reference to it is removed; the dependents survive.

use super::actions::{self, ActionTarget};
use super::context::Ctx;
use super::failure::{WorkError, WorkFailure};
use super::metrics::CascadeMetrics;
use crate::engine::graph::kinds::ResolvedKind;
use crate::engine::graph::node::CLUSTER;
use crate::engine::graph::uid::Uid;
use crate::engine::meta::FINALIZER_ORPHAN;

struct Edit {
    gvk: String,
    resolved: Option<ResolvedKind>,
    namespace: Option<String>,
    name: String,
    rv: u64,
    refs: Vec<serde_json::Value>,
}

/// Where the owner's finalizer is released.
struct OwnerTarget {
    /// `group/version/kind`, for the failure count.
    gvk: String,
    resolved: Option<ResolvedKind>,
    namespace: Option<String>,
    name: String,
    uid: String,
}

/// The dependents' rewritten owner references and the owner's coordinates, read under the graph's
/// read lock; `None` when the owner is gone or no longer orphaning.
fn plan(ctx: &Ctx, owner: Uid) -> Option<(Vec<Edit>, OwnerTarget)> {
    let g = ctx.read();
    let node = g.get(&owner)?;
    if !node.orphaning() {
        return None;
    }
    let edits: Vec<Edit> = g
        .dependents(node)
        .filter(|d| d.observed())
        .map(|d| {
            let info = g.kinds.info(d.kind);
            Edit {
                gvk: format!("{}/{}", info.api_version, info.kind),
                resolved: g.kinds.resolve(d.kind).cloned(),
                namespace: g.namespace(d.namespace).map(str::to_string),
                name: d.name.to_string(),
                rv: d.resource_version,
                refs: d
                    .owners
                    .iter()
                    .filter(|l| l.uid != owner)
                    .map(|l| super::snapshot::owner_ref_json(&g, l))
                    .collect(),
            }
        })
        .collect();
    let info = g.kinds.info(node.kind);
    let target = OwnerTarget {
        gvk: format!("{}/{}", info.api_version, info.kind),
        resolved: g.kinds.resolve(node.kind).cloned(),
        namespace: (node.namespace != CLUSTER)
            .then(|| g.namespace(node.namespace).map(str::to_string))
            .flatten(),
        name: node.name.to_string(),
        uid: g.uid_text(&owner),
    };
    Some((edits, target))
}

#[tracing::instrument(skip(ctx, owner), fields(owner = %owner))]
pub(crate) async fn attempt_to_orphan(ctx: &Ctx, owner: Uid) -> Result<(), WorkFailure> {
    // Collect the rewrites under the read lock; make the calls without it.
    let Some((edits, owner_target)) = plan(ctx, owner) else {
        return Ok(()); // gone, or no longer orphaning
    };
    if ctx.config.dry_run {
        tracing::info!(dependents = edits.len(), "dry run: would orphan dependents");
        return Ok(());
    }
    let mut first_error = None;
    for e in &edits {
        let Some(resolved) = &e.resolved else {
            continue;
        };
        let t = ActionTarget {
            resource: resolved,
            namespace: e.namespace.as_deref(),
            name: &e.name,
        };
        match actions::set_owner_references(&ctx.client, &t, e.rv, e.refs.clone().into()).await {
            Ok(_) => {
                ctx.metrics
                    .orphaned
                    .get_or_create(&CascadeMetrics::resource(&e.gvk))
                    .inc();
            }
            Err(err) => {
                first_error.get_or_insert(WorkFailure {
                    resource: e.gvk.clone(),
                    error: err.into(),
                });
            }
        }
    }
    if let Some(failure) = first_error {
        return Err(failure);
    }
    let OwnerTarget {
        gvk,
        resolved,
        namespace,
        name,
        uid,
    } = owner_target;
    let owner_failed = |error: WorkError| WorkFailure {
        resource: gvk.clone(),
        error,
    };
    let Some(resolved) = resolved else {
        return Err(owner_failed(WorkError::UnknownKind {
            object: name,
            kind: "owner".into(),
        }));
    };
    let t = ActionTarget {
        resource: &resolved,
        namespace: namespace.as_deref(),
        name: &name,
    };
    actions::remove_finalizers(&ctx.client, &t, &uid, &[FINALIZER_ORPHAN])
        .await
        .map_err(|e| owner_failed(e.into()))?;
    tracing::info!(
        dependents = edits.len(),
        "orphaned dependents and released the owner"
    );
    Ok(())
}

#[cfg(test)]
mod tests;
