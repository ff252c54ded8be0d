//! `sweeper gc plan`: what a teardown of the cluster would delete, per phase, deleting nothing.
//! The same passes as the real teardown, in dry-run mode, against the same discovery, asked by
//! the same request builder (request.rs).

use super::annotations;
use super::capi::Capi;
use super::claims;
use super::cluster;
use super::collector::GcKind;
use super::contract::{self, ClusterState, Decision, Subject};
use super::identity::{self, Placement};
use super::request::{self, Mode, ObjectFacts};
use crate::api::capa::{AWSCluster, AWSManagedControlPlane};
use kube::{Api, Client, ResourceExt};
use sweeper_aws::locate::tags::{capa_key, cloud_key};
use sweeper_aws::model::{AuditAction, Phase, ResourceRef};
use sweeper_aws::phases::{PassReport, teardown_pass};
use sweeper_aws::session::SessionCache;

/// What the plan reads of the cluster's CAPA object, whatever its kind.
struct Target {
    names: cluster::ClusterNames,
    /// What the request takes from the object besides its names.
    object: ObjectFacts,
    region: Option<String>,
    identity_ref: Option<crate::api::capa::IdentityRef>,
    annotations: std::collections::BTreeMap<String, String>,
    linked: Option<cluster::LinkedAnnotations>,
    /// The owning Cluster, for Cluster API's contract (paused or not).
    cluster: ClusterState,
    /// Whether the owner Cluster proves the object's name (cluster.rs, "Whose cluster").
    proof: Result<(), String>,
    /// What the object claims, for the name-collision check.
    claim: claims::NameClaim,
}

impl Target {
    /// Reads `namespace/name` of kind `K` through the same accessors the controller uses.
    async fn read<K: GcKind>(client: &Client, namespace: &str, name: &str) -> Result<Self, String> {
        let o = Api::<K>::namespaced(client.clone(), namespace)
            .get(name)
            .await
            .map_err(|e| e.to_string())?;
        let (region, identity_ref) = o.placement();
        let owning = cluster::Owning::read(&Capi::new(client.clone()), &o).await;
        let cluster = owning.state();
        let proof = owning.proof(&K::kind(&()), &o.name_any());
        Ok(Target {
            proof,
            claim: claims::NameClaim::of(&o),
            names: o.names().map_err(|e| e.to_string())?,
            object: ObjectFacts::of(&o),
            region: region.map(str::to_string),
            identity_ref: identity_ref.cloned(),
            annotations: o.annotations().clone(),
            linked: None,
            cluster,
        })
    }
}

/// Renders the plan for the CAPI Cluster `name` in `namespace`.
pub async fn plan(
    client: &Client,
    sessions: &SessionCache,
    capa_namespace: &str,
    namespace: &str,
    name: &str,
    alternative: bool,
) -> Result<String, String> {
    let (ar, target, t) = read_target(client, namespace, name).await?;
    let Target {
        names,
        object,
        region,
        identity_ref,
        annotations: ann,
        linked,
        cluster: state,
        proof,
        claim,
    } = t;
    // Cluster API's contract first, as the controller applies it: what a teardown would do now.
    let label = crate::engine::meta::object_label(&ar.kind, Some(namespace), &target);
    // As for a deletion that holds our finalizer: what a teardown would do now.
    let subject = Subject::new(&label, &ann, linked.as_ref(), true, true);
    let contract_line = match contract::decide(&subject, Some(&state)) {
        Decision::Release(why) | Decision::Ignore(why) => {
            // Never torn down: no AWS lookup is worth making.
            return Ok(format!(
                "plan for cluster {namespace}/{name} ({label}); nothing is deleted\n\
                 state: {}: {why}\n\
                 sweeper never tears this cluster down: nothing would be deleted\n",
                why.state()
            ));
        }
        Decision::Wait(hold) => format!(
            "state: {}: {hold}\nwhat the teardown would delete once it may go on:\n",
            hold.state()
        ),
        Decision::Act => format!("state: acted on ({})\n", state.describe()),
    };
    let settings = annotations::settings_of(&ann, linked.as_ref())
        .map_err(|e| format!("{} {target}: {e}", ar.kind))?;
    let tasks_line = annotations::tasks::describe(settings.tasks.as_deref(), &settings.tasks_from);
    let req = request::pass_request(&names, object, &settings, Mode::plan(alternative));
    // The cluster's own session, as the teardown would use it; refused means no plan.
    let at = Placement {
        namespace,
        region: region.as_deref(),
        identity_ref: identity_ref.as_ref(),
    };
    let spec = identity::resolve(client, capa_namespace, &at)
        .await
        .map_err(|e| format!("{} {target}: {e}; nothing is looked up in AWS", ar.kind))?;
    let session = sessions
        .session(&spec)
        .await
        .map_err(|e| format!("{} {target}: {e}; nothing is looked up in AWS", ar.kind))?;
    let report = teardown_pass(&session.clients, &req).await;
    let mut out = format!(
        "plan for cluster {namespace}/{name} ({} {target}); nothing is deleted\n\
         CAPA's own resources (phases 1 and 3): tag {}=owned\n\
         external resources (phase 2): tag {}=owned\n\
         session: {} (caller {})\n",
        ar.kind,
        capa_key(&names.capi),
        cloud_key(&names.tag),
        session.describe(),
        session.caller,
    );
    out.push_str(&contract_line);
    match &proof {
        Ok(()) => out.push_str(&format!(
            "whose cluster: proven (owner Cluster {namespace}/{name} references {target})\n"
        )),
        Err(why) => out.push_str(&format!(
            "whose cluster: NOT proven: {why}; a teardown deletes nothing until it is\n"
        )),
    }
    match claims::clashing(client, capa_namespace, sessions, &claim, &session.scope).await {
        Ok(found) if found.is_empty() => {}
        Ok(found) => out.push_str(&format!(
            "name collision: also claimed by {}; a teardown deletes nothing until only one object claims the name\n",
            found.iter().map(|(_, s)| s.as_str()).collect::<Vec<_>>().join("; ")
        )),
        Err(e) => out.push_str(&format!(
            "name collision: cannot be checked ({e}); a teardown deletes nothing until it can\n"
        )),
    }
    if let Some((label, _)) = &linked {
        out.push_str(&format!(
            "GC annotations read from the control plane and from {label} (clusterawsadm writes there)\n"
        ));
    }
    if settings.external_gc {
        out.push_str(&tasks_line);
    } else {
        out.push_str("external resource GC is disabled for this cluster: phase 2 is skipped\n");
    }
    match &settings.dns_owner {
        annotations::DnsOwner::Unset => out.push_str(&format!(
            "external-dns records: reported, not deleted (no {} annotation)\n",
            annotations::DNS_OWNER_ANNOTATION
        )),
        annotations::DnsOwner::Id(id) => out.push_str(&format!(
            "external-dns records of owner id {id:?} pointing at the load balancers deleted: deleted with them\n"
        )),
        annotations::DnsOwner::Invalid(e) => out.push_str(&format!("error: {e}\n")),
    }
    if let Some(bucket) = &req.s3_bucket {
        // Said up front: the rows below list what is in it, never as a delete.
        out.push_str(&format!(
            "CAPA's bootstrap bucket {bucket} (spec.s3Bucket): its objects in CAPA's layout and the \
             bucket are reported, never deleted\n"
        ));
    }
    render_phases(&mut out, &report, |_, _| None);
    Ok(out)
}

/// The cluster's infrastructure object (`AWSCluster`, or `AWSManagedControlPlane` with the
/// AWSManagedCluster whose switches count too, see controller), with its kind and name.
async fn read_target(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<(kube::api::ApiResource, String, Target), String> {
    let (ar, target) = cluster::gc_target(client, namespace, name)
        .await
        .map_err(|e| e.to_string())?;
    let t = if ar.kind == "AWSManagedControlPlane" {
        let mut t = Target::read::<AWSManagedControlPlane>(client, namespace, &target).await?;
        t.linked = cluster::managed_cluster_of(client, namespace, name)
            .await
            .map_err(|e| e.to_string())?;
        t
    } else {
        Target::read::<AWSCluster>(client, namespace, &target).await?
    };
    Ok((ar, target, t))
}

/// Each phase's plan: what it would delete (with `proof`'s line under each resource it has one
/// for), what blocks the network (kept), errors, and what was ignored as outside the session.
/// Pure.
pub(super) fn render_phases(
    out: &mut String,
    report: &PassReport,
    proof: impl Fn(Phase, &ResourceRef) -> Option<String>,
) {
    for p in &report.phases {
        out.push_str(&format!(
            "phase {}: {} resource(s)\n",
            p.phase,
            p.planned.len()
        ));
        for r in &p.planned {
            out.push_str(&format!("  {} {} {}\n", r.service, r.kind, r.id));
            if let Some(why) = proof(p.phase, r) {
                out.push_str(&format!("    proof: {why}\n"));
            }
        }
        for (r, action) in &p.planned_changes {
            match action {
                AuditAction::Untagged { key } => out.push_str(&format!(
                    "  untag, not delete: {} {}: remove {key}=shared\n",
                    r.service, r.id
                )),
                AuditAction::Revoked { rule } => out.push_str(&format!(
                    "  revoke, not delete: in {} {} {}: {rule}\n",
                    r.service, r.kind, r.id
                )),
                AuditAction::Deleted => {}
            }
        }
        for (r, vpc) in &p.blockers {
            out.push_str(&format!(
                "  blocked by {} {} {} (not the cluster's; kept, and {vpc} with it until it is gone)\n",
                r.service, r.kind, r.id
            ));
        }
        for (r, why) in &p.kept {
            out.push_str(&format!(
                "  reported, not deleted: {} {} {}: {why}\n",
                r.service, r.kind, r.id
            ));
        }
        for e in &p.errors {
            out.push_str(&format!("  error: {e}\n"));
        }
        for f in &p.foreign {
            out.push_str(&format!("  ignored (outside the cluster's session): {f}\n"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweeper_aws::phases::{Phase, PhaseReport, ResourceRef};

    #[test]
    fn an_untag_is_planned_as_an_untag_never_as_a_delete() {
        let subnet = ResourceRef {
            service: "ec2".into(),
            kind: "shared-tag".into(),
            id: "subnet-1".into(),
        };
        let mut p3 = PhaseReport::started(Phase::Network);
        p3.planned_changes.push((
            subnet,
            AuditAction::Untagged {
                key: "kubernetes.io/cluster/c1".into(),
            },
        ));
        let mut out = String::new();
        render_phases(
            &mut out,
            &PassReport {
                done: false,
                phases: vec![p3],
            },
            |_, _| None,
        );
        assert_eq!(
            out,
            "phase 3: 0 resource(s)\n  untag, not delete: ec2 subnet-1: remove kubernetes.io/cluster/c1=shared\n"
        );
    }
}
