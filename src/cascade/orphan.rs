//! attempt-to-orphan: an owner deleted with propagationPolicy=Orphan keeps the `orphan`
//! finalizer until every dependent's reference to it is removed; the dependents survive.

use super::actions::{self, Target};
use super::context::Ctx;
use super::metrics::CascadeMetrics;
use super::worker::WorkError;
use crate::engine::graph::kinds::ResolvedKind;
use crate::engine::graph::node::CLUSTER;
use crate::engine::graph::uid::Uid;
use crate::engine::meta::FINALIZER_ORPHAN;
use std::sync::Arc;

pub async fn run(ctx: Arc<Ctx>) {
    while let Some(uid) = ctx.orphan_q.get().await {
        match attempt_to_orphan(&ctx, uid).await {
            Ok(()) => ctx.orphan_q.forget(&uid),
            Err(e) if e.paused() => {
                ctx.orphan_q.forget(&uid);
                ctx.orphan_q.done(&uid);
                ctx.orphan_q.add(uid);
                ctx.config.fence.resumed().await;
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "orphaning failed; retrying with backoff");
                ctx.orphan_q.add_rate_limited(uid);
            }
        }
        ctx.orphan_q.done(&uid);
    }
}

struct Edit {
    gvk: String,
    resolved: Option<ResolvedKind>,
    namespace: Option<String>,
    name: String,
    rv: u64,
    refs: Vec<serde_json::Value>,
}

/// Where the owner's finalizer is released: its kind, namespace, name and uid.
type OwnerTarget = (Option<ResolvedKind>, Option<String>, String, String);

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
    let target = (
        g.kinds.resolve(node.kind).cloned(),
        (node.namespace != CLUSTER)
            .then(|| g.namespace(node.namespace).map(str::to_string))
            .flatten(),
        node.name.to_string(),
        g.uid_text(&owner),
    );
    Some((edits, target))
}

#[tracing::instrument(skip(ctx, owner), fields(owner = %owner))]
async fn attempt_to_orphan(ctx: &Ctx, owner: Uid) -> Result<(), WorkError> {
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
        let t = Target {
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
                first_error.get_or_insert(err);
            }
        }
    }
    if let Some(err) = first_error {
        return Err(err.into());
    }
    let (resolved, namespace, name, uid_text) = owner_target;
    let Some(resolved) = resolved else {
        return Err(WorkError::UnknownKind {
            object: name,
            kind: "owner".into(),
        });
    };
    let t = Target {
        resource: &resolved,
        namespace: namespace.as_deref(),
        name: &name,
    };
    actions::remove_finalizers(&ctx.client, &t, &uid_text, &[FINALIZER_ORPHAN]).await?;
    tracing::info!(
        dependents = edits.len(),
        "orphaned dependents and released the owner"
    );
    Ok(())
}
