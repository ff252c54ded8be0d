//! `sweeper gc plan`: what a teardown of the cluster would delete, per phase, deleting nothing.
//! The same passes as the real teardown, in dry-run mode, against the same discovery, asked by
//! the same request builder (request.rs).

use crate::api::capa::{AWSCluster, AWSManagedControlPlane};
use crate::external::core::annotations;
use crate::external::core::capi::Capi;
use crate::external::core::claims;
use crate::external::core::cluster;
use crate::external::core::contract::{self, ClusterState, Decision, Subject};
use crate::external::core::identity::{self, Placement};
use crate::external::core::kind::GcKind;
use crate::external::core::request::{self, Mode, ObjectFacts};
use kube::{Api, Client, ResourceExt};
use sweeper_aws::locate::tags::{capa_key, cloud_key};
use sweeper_aws::phases::teardown_pass;
use sweeper_aws::session::SessionCache;

/// What the plan reads of the cluster's CAPA object, whatever its kind.
/// Why `gc plan` prints no plan, naming the object (`object` is its `object_label`).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The Cluster or what it references could not be resolved (the error names them).
    #[error(transparent)]
    Resolve(#[from] cluster::ResolveError),
    #[error("{object}: cannot read it: {source}")]
    Read {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("{object}: {source}")]
    Names {
        object: String,
        #[source]
        source: cluster::ClusterNameError,
    },
    #[error("{object}: {why}")]
    Annotations {
        object: String,
        why: annotations::AnnotationError,
    },
    #[error("{object}: {why}; nothing is looked up in AWS")]
    Session {
        object: String,
        why: identity::SessionRefused,
    },
}

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
    proof: Result<(), cluster::OwnerNotProven>,
    /// What the object claims, for the name-collision check.
    claim: claims::NameClaim,
}

impl Target {
    /// Reads `namespace/name` of kind `K` through the same accessors the controller uses.
    async fn read<K: GcKind>(
        client: &Client,
        namespace: &str,
        name: &str,
    ) -> Result<Self, PlanError> {
        let object = || crate::engine::meta::object_label(&K::kind(&()), Some(namespace), name);
        let o = Api::<K>::namespaced(client.clone(), namespace)
            .get(name)
            .await
            .map_err(|source| PlanError::Read {
                object: object(),
                source,
            })?;
        let (region, identity_ref) = o.placement();
        let owning = cluster::Owning::read(&Capi::new(client.clone()), &o).await;
        let cluster = owning.state();
        let proof = owning.proof(&K::kind(&()), &o.name_any());
        Ok(Target {
            proof,
            claim: claims::NameClaim::of(&o),
            names: o.names().map_err(|source| PlanError::Names {
                object: object(),
                source,
            })?,
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
) -> Result<String, PlanError> {
    let (ar, target, t) = read_target(client, namespace, name).await?;
    // Cluster API's contract first, as the controller applies it: what a teardown would do now.
    let label = crate::engine::meta::object_label(&ar.kind, Some(namespace), &target);
    // As for a deletion that holds our finalizer: what a teardown would do now.
    let subject = Subject::new(&label, &t.annotations, t.linked.as_ref(), true, true);
    let contract_line = match contract::decide(&subject, Some(&t.cluster)) {
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
        Decision::Act => format!("state: acted on ({})\n", t.cluster.describe()),
    };
    let settings = annotations::settings_of(&t.annotations, t.linked.as_ref()).map_err(|why| {
        PlanError::Annotations {
            object: label.clone(),
            why,
        }
    })?;
    let req = request::pass_request(&t.names, t.object, &settings, Mode::plan(alternative));
    // The cluster's own session, as the teardown would use it; refused means no plan.
    let at = Placement {
        namespace,
        region: t.region.as_deref(),
        identity_ref: t.identity_ref.as_ref(),
    };
    let session = identity::session(client, capa_namespace, sessions, &at)
        .await
        .map_err(|why| PlanError::Session {
            object: label.clone(),
            why,
        })?;
    let report = teardown_pass(&session.clients, &req).await;
    let mut out = format!(
        "plan for cluster {namespace}/{name} ({} {target}); nothing is deleted\n\
         CAPA's own resources (phases 1 and 3): tag {}=owned\n\
         external resources (phase 2): tag {}=owned\n\
         session: {} (caller {})\n",
        ar.kind,
        capa_key(&t.names.capi),
        cloud_key(&t.names.tag),
        session.describe(),
        session.caller,
    );
    out.push_str(&contract_line);
    out.push_str(&whose(&t.proof, namespace, name, &target));
    out.push_str(&collision(client, capa_namespace, sessions, &t.claim, &session.scope).await);
    out.push_str(&settings_lines(&settings, t.linked.as_ref(), &req));
    crate::external::report::text::phases(&mut out, &report, |_, _| None);
    Ok(out)
}

/// Whether the owner Cluster proves the name (core::cluster, "Whose cluster").
fn whose(
    proof: &Result<(), cluster::OwnerNotProven>,
    namespace: &str,
    name: &str,
    target: &str,
) -> String {
    match proof {
        Ok(()) => format!(
            "whose cluster: proven (owner Cluster {namespace}/{name} references {target})\n"
        ),
        Err(why) => {
            format!("whose cluster: NOT proven: {why}; a teardown deletes nothing until it is\n")
        }
    }
}

/// Whether another object claims the name in the same account and region (core::claims).
async fn collision(
    client: &Client,
    capa_namespace: &str,
    sessions: &SessionCache,
    claim: &claims::NameClaim,
    scope: &sweeper_aws::scope::Scope,
) -> String {
    match claims::clashing(client, capa_namespace, sessions, claim, scope).await {
        Ok(found) if found.is_empty() => String::new(),
        Ok(found) => format!(
            "name collision: also claimed by {}; a teardown deletes nothing until only one object claims the name\n",
            found
                .iter()
                .map(|(_, s)| s.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ),
        Err(e) => format!(
            "name collision: cannot be checked ({e}); a teardown deletes nothing until it can\n"
        ),
    }
}

/// What the cluster's GC annotations say: where they were read, the tasks, external-dns records,
/// the bootstrap bucket. Pure.
fn settings_lines(
    settings: &annotations::GcSettings,
    linked: Option<&cluster::LinkedAnnotations>,
    req: &sweeper_aws::phases::PassRequest,
) -> String {
    let mut out = String::new();
    if let Some((label, _)) = linked {
        out.push_str(&format!(
            "GC annotations read from the control plane and from {label} (clusterawsadm writes there)\n"
        ));
    }
    if settings.external_gc {
        out.push_str(&annotations::tasks::describe(
            settings.tasks.as_deref(),
            &settings.tasks_from,
        ));
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
    out
}

/// The cluster's infrastructure object (`AWSCluster`, or `AWSManagedControlPlane` with the
/// AWSManagedCluster whose switches count too, see controller), with its kind and name.
async fn read_target(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<(kube::api::ApiResource, String, Target), PlanError> {
    let (ar, target) = cluster::gc_target(client, namespace, name).await?;
    let t = if ar.kind == "AWSManagedControlPlane" {
        let mut t = Target::read::<AWSManagedControlPlane>(client, namespace, &target).await?;
        t.linked = cluster::managed_cluster_of(client, namespace, name).await?;
        t
    } else {
        Target::read::<AWSCluster>(client, namespace, &target).await?
    };
    Ok((ar, target, t))
}
