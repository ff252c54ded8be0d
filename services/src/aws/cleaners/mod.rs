//! The cleaner framework: every resource kind is one module implementing [`Cleaner`], registered
//! in one list in [`registry`]. A phase runs its cleaners in `order`; cleaners sharing an order
//! value are independent and run concurrently; within a cleaner, deletes run with bounded
//! concurrency. One cleaner's failure never stops the others.

pub mod addresses;
pub mod instances;
pub mod internet_gateways;
pub mod inventory;
pub mod load_balancers;
pub mod nat_gateways;
pub mod network_interfaces;
pub mod registry;
pub mod route_tables;
pub mod security_groups;
pub mod sg_refs;
pub mod subnets;
pub mod tag_scan;
pub mod tags;
pub mod target_groups;
pub mod vpcs;

use super::errors::{ApiFailure, ErrorClass};
use super::teardown::{AwsClients, GcTask, PhaseReport, ResourceRef};
use async_trait::async_trait;
use futures::StreamExt;
use inventory::Inventory;
use std::collections::BTreeMap;
use tracing::Instrument;

/// How many deletes of one cleaner are in flight at once: enough to hide API latency, few enough
/// to stay clear of the account's API rate limits.
pub const DELETE_CONCURRENCY: usize = 16;

/// What every cleaner may look at during a pass.
pub struct CleanCtx<'a> {
    pub clients: &'a AwsClients,
    pub cluster: &'a str,
    /// Phase 2's one discovery (tagging API or describe calls); empty in phases 1 and 3.
    pub inventory: &'a Inventory,
    /// Phase 3: the CAPA-managed VPCs of the cluster. Empty means nothing of the network is ours.
    pub vpc_ids: &'a [String],
}

/// One resource a cleaner found.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// What the report shows: the ARN when there is one, else the AWS id.
    pub id: String,
    /// Set when discovery already knows it cannot be deleted yet (e.g. a target group still
    /// attached to a load balancer): reported as remaining without calling AWS.
    pub blocked: Option<String>,
    pub detail: Detail,
}

impl Target {
    pub fn new(id: impl Into<String>, detail: Detail) -> Self {
        Target {
            id: id.into(),
            blocked: None,
            detail,
        }
    }
}

/// Per-kind facts discovery gathered so `delete` needs no extra Describe call.
#[derive(Clone, Debug, PartialEq)]
pub enum Detail {
    /// The id is all the delete call needs.
    Plain,
    ClassicLoadBalancer {
        name: String,
    },
    V2LoadBalancer {
        arn: String,
    },
    SecurityGroup {
        group_id: String,
        revokes: Vec<sg_refs::SgRevoke>,
    },
    RouteTable {
        route_table_id: String,
        associations: Vec<String>,
    },
    /// An Elastic IP; `stale_association` is an association left on it by a NAT gateway that
    /// is already deleted (LocalStack keeps it), removed before the release.
    Address {
        allocation_id: String,
        stale_association: Option<String>,
    },
    InternetGateway {
        gateway_id: String,
        vpc_ids: Vec<String>,
    },
}

/// What happened to one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Deleted,
    /// Already gone (NotFound): as good as deleted.
    Gone,
    /// Deletion started or still blocked; the reason says what we wait for. Keeps the phase open.
    Remaining(String),
}

#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    #[error("{kind} {id}: {op} failed: {source}")]
    Api {
        kind: &'static str,
        id: String,
        op: &'static str,
        source: ApiFailure,
    },
    #[error("discovering {kind}s: {op} failed: {source}")]
    Discover {
        kind: &'static str,
        op: &'static str,
        source: ApiFailure,
    },
}

impl CleanError {
    /// For `map_err` on a discovery call: `.map_err(CleanError::discover(KIND, "DescribeX"))`.
    pub fn discover(kind: &'static str, op: &'static str) -> impl Fn(ApiFailure) -> CleanError {
        move |source| CleanError::Discover { kind, op, source }
    }
}

/// Maps the result of a delete call: NotFound is done, transient errors that outlived the retries
/// leave the resource remaining with the reason, anything else is an error naming the resource.
pub fn settle<T>(
    res: Result<T, ApiFailure>,
    kind: &'static str,
    id: &str,
    op: &'static str,
) -> Result<Outcome, CleanError> {
    match res {
        Ok(_) => Ok(Outcome::Deleted),
        Err(f) => match f.class {
            ErrorClass::NotFound => Ok(Outcome::Gone),
            ErrorClass::Transient => Ok(Outcome::Remaining(format!("{op}: {f}"))),
            ErrorClass::Fatal => Err(CleanError::Api {
                kind,
                id: id.to_string(),
                op,
                source: f,
            }),
        },
    }
}

#[async_trait]
pub trait Cleaner: Send + Sync {
    /// The AWS service in ARNs: `elasticloadbalancing`, `ec2`.
    fn service(&self) -> &'static str;
    /// The resource kind: `load-balancer`, `target-group`, `security-group`, ...
    fn kind(&self) -> &'static str;
    /// Cleaners run in ascending order; equal orders run concurrently.
    fn order(&self) -> u32;
    /// The phase-2 task selection entry that enables this cleaner (`None`: always runs).
    fn task(&self) -> Option<GcTask> {
        None
    }
    /// True for "delete, then wait until deleted" kinds: while such a cleaner leaves anything
    /// remaining, the later cleaners of its phase wait for the next pass (AWS would refuse them
    /// anyway, and an emulator that doesn't could orphan what depends on this kind).
    fn gates_later(&self) -> bool {
        false
    }
    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError>;
    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError>;
}

/// Runs one cleaner: discover, then delete everything found (or only plan it in a dry run).
pub async fn run_cleaner(
    cleaner: &dyn Cleaner,
    ctx: &CleanCtx<'_>,
    phase: u8,
    dry_run: bool,
) -> PhaseReport {
    let mut report = PhaseReport::started(phase);
    let rref = |id: &str| ResourceRef {
        service: cleaner.service().to_string(),
        kind: cleaner.kind().to_string(),
        id: id.to_string(),
    };
    let span = tracing::info_span!(
        "cleaner",
        phase,
        service = cleaner.service(),
        kind = cleaner.kind()
    );
    let targets = match cleaner.discover(ctx).instrument(span.clone()).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(parent: &span, error = %e, "discovery failed");
            report.errors.push(e.to_string());
            return report;
        }
    };
    if dry_run {
        report.planned = targets.iter().map(|t| rref(&t.id)).collect();
        return report;
    }
    let results: Vec<(Target, Result<Outcome, CleanError>)> = futures::stream::iter(targets)
        .map(|t| {
            let span = tracing::info_span!(parent: &span, "delete", arn = %t.id);
            async move {
                let res = match &t.blocked {
                    Some(reason) => Ok(Outcome::Remaining(reason.clone())),
                    None => cleaner.delete(ctx, &t).await,
                };
                (t, res)
            }
            .instrument(span)
        })
        .buffer_unordered(DELETE_CONCURRENCY)
        .collect()
        .await;
    for (t, res) in results {
        match res {
            Ok(Outcome::Deleted) => report.deleted.push(rref(&t.id)),
            // Not deleted by this pass, so not reported: a discovery that keeps listing a gone
            // resource (eventual consistency) must not keep the teardown from being done.
            Ok(Outcome::Gone) => tracing::debug!(arn = %t.id, "already gone"),
            Ok(Outcome::Remaining(reason)) => {
                tracing::info!(arn = %t.id, %reason, "not deleted yet");
                report.remaining.push((rref(&t.id), reason));
            }
            Err(e) => {
                tracing::warn!(arn = %t.id, error = %e, "delete failed");
                report.errors.push(e.to_string());
            }
        }
    }
    report
}

/// Runs a phase's cleaners: ascending `order`, equal orders concurrently.
pub async fn run_phase(
    phase: u8,
    cleaners: &[Box<dyn Cleaner>],
    ctx: &CleanCtx<'_>,
    dry_run: bool,
) -> PhaseReport {
    let mut groups: BTreeMap<u32, Vec<&dyn Cleaner>> = BTreeMap::new();
    for c in cleaners {
        groups.entry(c.order()).or_default().push(c.as_ref());
    }
    let mut report = PhaseReport::started(phase);
    for group in groups.values() {
        let parts =
            futures::future::join_all(group.iter().map(|c| run_cleaner(*c, ctx, phase, dry_run)))
                .await;
        let gated = group.iter().zip(&parts).any(|(c, p)| {
            c.gates_later() && !dry_run && (!p.remaining.is_empty() || !p.errors.is_empty())
        });
        for p in parts {
            report.merge(p);
        }
        if gated {
            break;
        }
    }
    report
}
