//! `sweeper teardown`: the one-shot teardown of a cluster that has no object here, the leaks
//! from before that `sweeper scan` found. The same three phases, asked by the same request
//! builder (request.rs) with the default settings, as the service's teardown; the same audit
//! record. It deletes only with `--yes`; first it prints the plan, each resource with the tag
//! that proves it the cluster's (from a scan of the region made for the purpose).
//!
//! Order, so that nothing is deleted for a name that may be alive: the names are checked
//! against the live objects and the not-ours list (no AWS call), then the session is built and
//! checked against the account and region asked for, then `eks:ListClusters` and the region's
//! scan (live EKS clusters, resources shared with a live name); only then the dry-run pass
//! (the plan) and, with `--yes`, the passes that delete, until done or `--max-passes`. Each
//! target is decided alone: one refused never stops the others, and the command fails if any
//! was refused or is not done.
//!
//! There is no Cluster API object to follow, so Cluster API's contract (paused, moving,
//! externally managed) cannot be read: a cluster moved to another management cluster
//! (`clusterctl move`) has no object here and looks gone. That is what the not-ours list is
//! for, and what the output warns of.

pub mod command;
pub mod decide;
mod opt_in;

use crate::api::capa::IdentityRef;
use crate::external::commands::scan::{self, LiveObjects, ScanTargets};
use crate::external::core::annotations::GcSettings;
use crate::external::core::audit;
use crate::external::core::cluster::ClusterNames;
use crate::external::core::identity::{self, Placement};
use crate::external::core::request::{self, Mode, ObjectFacts};
use crate::external::report::text;
use command::TeardownArgs;
use decide::{OrphanTarget, TargetError, TeardownRefusal, World};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use sweeper_aws::errors::ApiFailure;
use sweeper_aws::locate::eks;
use sweeper_aws::model::EksFacts;
use sweeper_aws::phases::{PassReport, teardown_pass};
use sweeper_aws::scan::{RegionScan, ScanError, ScanInput, scan_region};
use sweeper_aws::session::{Session, SessionCache, SessionError, SessionSpec};

/// The object kind the audit records of a one-shot teardown name (there is no object).
pub const AUDIT_OBJECT_KIND: &str = "SweeperTeardown";

/// What the command did, for its output and exit code.
pub struct TeardownOutput {
    pub text: String,
    /// Every target was torn down (or, without `--yes`, planned) and none was refused.
    pub ok: bool,
}

/// Runs the command (see the module doc).
pub async fn run(client: &Client, sessions: &SessionCache, args: &TeardownArgs) -> TeardownOutput {
    let mut text = String::new();
    // The settings are read once, before anything else: a bad --gc-task stops every target.
    let (targets, settings) = match targets(args)
        .and_then(|t| opt_in::settings(&args.gc_tasks).map(|settings| (t, settings)))
    {
        Ok(both) => both,
        Err(e) => {
            return TeardownOutput {
                text: format!("error: {e}; nothing is deleted\n"),
                ok: false,
            };
        }
    };
    let (mut not_ours, unread) = scan::annotated_not_ours(client, &args.namespace.namespace).await;
    if let Some(e) = unread {
        // The list may hold the very name asked for: without it nothing can be ruled out.
        return TeardownOutput {
            text: format!("error: {e}; nothing is deleted\n"),
            ok: false,
        };
    }
    not_ours.extend(args.not_ours.iter().cloned());
    let live = match scan::live_objects(client).await {
        Ok(l) => l,
        Err(e) => {
            return TeardownOutput {
                text: format!("error: {e}; nothing is deleted\n"),
                ok: false,
            };
        }
    };
    if !live.undecoded.is_empty() {
        text.push_str(&format!(
            "note: {} object(s) not decoded; every name they carry counts as live\n",
            live.undecoded.len()
        ));
    }
    let mut ok = true;
    let mut reach: Option<scan::Reach> = None;
    let regions: Vec<String> = targets
        .iter()
        .map(|t| t.region.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    for t in &targets {
        text.push_str(&format!("\nteardown of {}\n", t.label()));
        let one = One {
            client,
            sessions,
            args,
            live: &live,
            not_ours: &not_ours,
            regions: &regions,
            settings: &settings,
        };
        if let Err(stop) = one.run(t, &mut reach, &mut text).await {
            ok = false;
            text.push_str(&format!("{stop}\n"));
        }
    }
    TeardownOutput { text, ok }
}

/// Why one target's teardown stopped: the last line of its output.
#[derive(Debug, thiserror::Error)]
enum Stop {
    #[error("refused: {0}; nothing is deleted")]
    Refused(TeardownRefusal),
    #[error("error: {0}; nothing is deleted")]
    NoSession(NoSession),
    #[error(
        "error: eks:ListClusters failed, so no live EKS cluster can be ruled out: {0}; nothing is deleted"
    )]
    EksList(ApiFailure),
    #[error("error: {0}; nothing is deleted")]
    Scan(ScanError),
    #[error("not done after {passes} passes: run it again (it starts from what is left)")]
    NotDone { passes: u32 },
}

/// Why a target has no session to act with; each names the identity or the account.
#[derive(Debug, thiserror::Error)]
enum NoSession {
    #[error("--identity {id:?}: expected KIND/NAME, e.g. AWSClusterRoleIdentity/prod")]
    IdentityForm { id: String },
    #[error("--identity {id}: {source}")]
    Identity {
        id: String,
        source: identity::IdentityError,
    },
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(
        "no identity of this management cluster reaches account {account} in {region}: give --identity KIND/NAME"
    )]
    Unreached { account: String, region: String },
}

/// The targets the command line names: one, or a scan's candidates.
fn targets(args: &TeardownArgs) -> Result<Vec<OrphanTarget>, TargetError> {
    if let Some(path) = &args.from_scan {
        let shown = || path.display().to_string();
        if args.cluster_names.is_empty() && !args.all {
            return Err(TargetError::NoSelection { path: shown() });
        }
        if args.eks_name.is_some() || args.account.is_some() {
            return Err(TargetError::ScanGivesNames);
        }
        let raw = std::fs::read_to_string(path).map_err(|source| TargetError::Unreadable {
            path: shown(),
            source,
        })?;
        let file: decide::ScanFile =
            serde_json::from_str(&raw).map_err(|source| TargetError::NotAScan {
                path: shown(),
                source,
            })?;
        return decide::targets_from_scan(
            &file,
            &args.cluster_names,
            args.all,
            args.region.as_deref(),
        );
    }
    let [name] = args.cluster_names.as_slice() else {
        return Err(TargetError::OneName);
    };
    let Some(region) = &args.region else {
        return Err(TargetError::NoRegion);
    };
    Ok(vec![OrphanTarget {
        capa: name.clone(),
        eks: args.eks_name.clone(),
        region: region.clone(),
        account: args.account.clone(),
    }])
}

/// One target's teardown, with what every target shares.
struct One<'a> {
    client: &'a Client,
    sessions: &'a SessionCache,
    args: &'a TeardownArgs,
    live: &'a LiveObjects,
    not_ours: &'a BTreeSet<String>,
    /// Every target's region: the scan's reach asks sweeper's own identity there too.
    regions: &'a [String],
    /// The settings every target is torn down with (`--gc-task`).
    settings: &'a GcSettings,
}

impl One<'_> {
    fn world<'w>(
        &'w self,
        eks: Option<&'w BTreeSet<String>>,
        held: &'w [sweeper_aws::scan::HeldName],
        session: Option<(&'w str, &'w str)>,
    ) -> World<'w> {
        World {
            objects: &self.live.names,
            eks,
            not_ours: self.not_ours,
            held,
            session,
        }
    }

    /// The target's output, added to `out`; `Err` says why it stopped (its last line).
    // Long: the refusals in the order the facts arrive (names, session, live EKS, the region's
    // scan), each decided by decide::refusal; the deletes are `delete`.
    #[tracing::instrument(skip_all, fields(cluster = %t.capa, eks = ?t.eks, region = %t.region))]
    async fn run(
        &self,
        t: &OrphanTarget,
        reach: &mut Option<scan::Reach>,
        out: &mut String,
    ) -> Result<(), Stop> {
        let refuse = |r: TeardownRefusal| {
            tracing::warn!(refusal = %r, "teardown refused; nothing is deleted");
            Stop::Refused(r)
        };
        if let Some(r) = decide::refusal(t, &self.world(None, &[], None)) {
            return Err(refuse(r));
        }
        let session = self.session(t, reach).await.map_err(|e| {
            tracing::warn!(error = %e, "no session; nothing is deleted");
            Stop::NoSession(e)
        })?;
        out.push_str(&format!(
            "session: {} (caller {})\n",
            session.describe(),
            session.caller
        ));
        let at = Some((
            session.scope.account.as_str(),
            session.scope.region.as_str(),
        ));
        if let Some(r) = decide::refusal(t, &self.world(None, &[], at)) {
            return Err(refuse(r));
        }
        let c = &session.clients;
        let (eks_live, _) = eks::cluster_names(c).await.map_err(Stop::EksList)?;
        let input = ScanInput {
            live: self.live.names.clone(),
            not_ours: self.not_ours.clone(),
            page_size: None,
            iam: Default::default(),
        };
        let region_scan = scan_region(c, &session.scope.account, &session.scope.region, &input)
            .await
            .map_err(Stop::Scan)?;
        if let Some(r) = decide::refusal(t, &self.world(Some(&eks_live), &region_scan.held, at)) {
            return Err(refuse(r));
        }
        let names = ClusterNames {
            capi: t.capa.clone(),
            tag: t.eks.clone().unwrap_or_else(|| t.capa.clone()),
        };
        let facts = ObjectFacts {
            vpc_ids: self.args.vpc_ids.clone(),
            // No object: CAPA's recorded OIDC issuer is unknown, so the IRSA provider is kept
            // (its rule needs the issuer). EKS's log group is the opt-in `eks-log-group` task's,
            // which runs only when named with --gc-task.
            eks: t.eks.as_ref().map(|_| EksFacts { oidc_issuer: None }),
            // No object: no spec.s3Bucket to name the bootstrap bucket (only reported anyway).
            s3_bucket: None,
        };
        let mode = |dry_run| Mode {
            dry_run,
            alternative_discovery: false,
            ebs_snapshot: true,
        };
        let plan = teardown_pass(
            c,
            &request::pass_request(&names, facts.clone(), self.settings, mode(true)),
        )
        .await;
        text::plan(out, &names, &plan, &proofs_of(&region_scan, t));
        opt_in::render_added(out, &self.args.gc_tasks, &plan);
        if !self.args.yes {
            out.push_str(
                "dry run: nothing is deleted. Check every resource and its proof above, then run again with --yes.\n",
            );
            return Ok(());
        }
        let req = request::pass_request(&names, facts, self.settings, mode(false));
        self.delete(t, &session, &names, &req, out).await
    }

    /// The passes that delete, until one finds nothing left (or `--max-passes`); each pass's
    /// lines and audit record are added to `out`.
    async fn delete(
        &self,
        t: &OrphanTarget,
        session: &Session,
        names: &ClusterNames,
        req: &sweeper_aws::phases::PassRequest,
        out: &mut String,
    ) -> Result<(), Stop> {
        let mut delays = backon::BackoffBuilder::build(
            backon::ExponentialBuilder::default()
                .with_min_delay(Duration::from_secs(2))
                .with_max_delay(Duration::from_secs(30))
                .without_max_times(),
        );
        for pass in 1..=self.args.max_passes {
            let report = teardown_pass(&session.clients, req).await;
            let record = self.audit(names, session, &report).await;
            text::pass(out, pass, &report, record.as_deref());
            if report.done {
                out.push_str(&format!("done: {} torn down\n", t.label()));
                return Ok(());
            }
            if pass < self.args.max_passes {
                tokio::time::sleep(delays.next().unwrap_or(Duration::from_secs(30))).await;
            }
        }
        Err(Stop::NotDone {
            passes: self.args.max_passes,
        })
    }

    /// The target's session: `--identity` followed as CAPA does, else with `--from-scan` the
    /// session the scan reached the candidate's (account, region) with, else sweeper's own in
    /// the target's region.
    async fn session(
        &self,
        t: &OrphanTarget,
        reach: &mut Option<scan::Reach>,
    ) -> Result<Arc<Session>, NoSession> {
        if let Some(id) = &self.args.identity {
            let (kind, name) = id
                .split_once('/')
                .ok_or_else(|| NoSession::IdentityForm { id: id.clone() })?;
            let identity_ref = IdentityRef {
                kind: Some(kind.to_string()),
                name: Some(name.to_string()),
            };
            let at = Placement {
                namespace: &self.args.cluster_namespace,
                region: Some(&t.region),
                identity_ref: Some(&identity_ref),
            };
            let spec = identity::resolve(self.client, &self.args.capa_namespace, &at)
                .await
                .map_err(|source| NoSession::Identity {
                    id: id.clone(),
                    source,
                })?;
            return Ok(self.sessions.session(&spec).await?);
        }
        if self.args.from_scan.is_some() {
            let account = t.account.clone().unwrap_or_default();
            if reach.is_none() {
                let targets = ScanTargets {
                    regions: self.regions.to_vec(),
                    capa_namespace: self.args.capa_namespace.clone(),
                    not_ours: self.not_ours.clone(),
                };
                *reach = Some(scan::reach(self.client, self.sessions, &targets, self.live).await);
            }
            let found = reach.as_ref().and_then(|r| {
                r.sessions
                    .get(&(account.clone(), t.region.clone()))
                    .cloned()
            });
            if let Some(s) = found {
                return Ok(s);
            }
            // Sweeper's own identity in the target's region may reach it (a region the first
            // reach did not ask for).
            let own = self
                .sessions
                .session(&SessionSpec::controller(Some(t.region.clone())))
                .await?;
            if own.scope.account == account {
                return Ok(own);
            }
            return Err(NoSession::Unreached {
                account,
                region: t.region.clone(),
            });
        }
        Ok(self
            .sessions
            .session(&SessionSpec::controller(Some(t.region.clone())))
            .await?)
    }

    /// The audit record of a pass that deleted or changed something; its name, or why it
    /// could not be written (the deletes happened: the output and the log have them).
    async fn audit(
        &self,
        names: &ClusterNames,
        session: &Session,
        report: &PassReport,
    ) -> Option<String> {
        let deleted: Vec<_> = report
            .phases
            .iter()
            .flat_map(|p| p.audit.iter().map(move |a| (p.phase.number(), a)))
            .collect();
        if deleted.is_empty() {
            return None;
        }
        let kept: Vec<_> = report
            .phases
            .iter()
            .flat_map(|p| p.kept.iter().map(move |k| (p.phase.number(), k)))
            .collect();
        let object = ObjectReference {
            kind: Some(AUDIT_OBJECT_KIND.into()),
            name: Some(names.capi.clone()),
            namespace: Some(self.args.cluster_namespace.clone()),
            ..Default::default()
        };
        Some(
            match audit::write(
                self.client,
                &self.args.namespace.namespace,
                names,
                session,
                &object,
                audit::AuditedPass {
                    deleted: &deleted,
                    kept: &kept,
                },
                self.args.audit_ttl,
            )
            .await
            {
                Ok(name) => format!("audit record {}/{name}", self.args.namespace.namespace),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot write the audit record; the deletes happened and are logged");
                    format!(
                        "the audit record could not be written ({e}); the deletes above happened"
                    )
                }
            },
        )
    }
}

/// Each resource of the region's scan that names the target, by ARN and by id: its proofs as
/// the plan shows them.
fn proofs_of(s: &RegionScan, t: &OrphanTarget) -> text::Proofs {
    let mut p = text::Proofs::default();
    for c in s
        .candidates
        .iter()
        .filter(|c| t.names().any(|n| n == c.cluster))
    {
        for r in &c.resources {
            let line = r
                .proofs
                .iter()
                .map(|p| format!("{} ({})", p.tag, p.rule_label))
                .collect::<Vec<_>>()
                .join(", ");
            if let Ok(arn) = r.arn.parse::<sweeper_aws::arn::Arn>() {
                p.by_id.insert(arn.resource_id().to_string(), line.clone());
            }
            p.by_id.insert(r.arn.clone(), line);
        }
    }
    p
}
