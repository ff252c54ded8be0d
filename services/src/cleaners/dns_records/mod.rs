//! Phase 2 (task `dns-record`): the Route53 records external-dns made for the cluster's load
//! balancers. external-dns owns a record through a companion TXT record
//! `heritage=external-dns,external-dns/owner=<owner-id>,…` (at the record's own name, or at
//! `<type>-<name>` in its newer format), and deletes the pair only while it runs: a deleted
//! cluster leaves them pointing at load balancers that are gone. The owner id defaults to
//! `default`, shared by every cluster that kept the default (external-dns#1758), so the TXT record
//! alone never says whose a record is.
//!
//! Which records are found, reported or deleted, and why, is `policy::dns_records`'s (the rule
//! and its every case, [`policy::fates`]). A record deleted goes with its TXT companion(s),
//! with every other such pair of the hosted zone, in one `ChangeResourceRecordSets` batch
//! (chunked only past Route53's 1000 changes), each DELETE repeating the record set exactly as
//! listed: if anything changed meanwhile Route53 refuses the whole batch and nothing is
//! half-deleted.
//!
//! Why before the load balancers (the first order of phase 2), in the same pass: "pointing at a
//! load balancer this teardown deletes" must be found again after a crash, and once the load
//! balancer is gone nothing ties a record to the cluster any more. So records are deleted only
//! for load balancers this pass has selected for deletion, and before them. A crash between the
//! two is harmless: the next pass finds the load balancer again and deletes it. For the same
//! reason, while deleting is asked for, a failure (a change batch refused, a zone that cannot be
//! listed) holds the rest of the phase for this pass ([`Descriptor::gates_later`]): the load
//! balancers wait, so the next pass can still find their records and try again.

mod lbs;
mod route53;

use super::load_balancers;
use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::model::{Failure, GcTask, Phase};
use crate::policy::dns_records::{self as policy, Allowed, Fate};
pub use crate::policy::dns_records::{
    Owned, Rec, dns_key, external_dns_owner, owned_records, owner_id_problem,
};
use async_trait::async_trait;
use aws_sdk_route53::types::ResourceRecordSet;
use futures::StreamExt;
use std::fmt;

/// Selects the external-dns records (on by default: without an owner id it only reports).
pub const TASK: GcTask = GcTask::new("dns-record");

pub struct DnsRecords;

const KIND: &str = "dns-record";

/// One external-dns record to delete with its TXT companion(s), as listed.
#[derive(Clone, Default, PartialEq)]
pub struct Pair {
    pub zone_id: String,
    pub zone_name: String,
    pub owner: String,
    /// The load balancer DNS name it points at.
    pub target: String,
    /// The record first, then its TXT companions: the exact sets the DELETEs repeat.
    pub sets: Vec<ResourceRecordSet>,
}

/// What the audit record shows: the zone, each set's name and type, the owner and the target.
impl fmt::Debug for Pair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sets: Vec<String> = self
            .sets
            .iter()
            .map(|s| format!("{} {}", s.r#type().as_str(), s.name()))
            .collect();
        write!(
            f,
            "hosted zone {} ({}): {} (external-dns owner id {:?}, pointing at load balancer {})",
            self.zone_name,
            self.zone_id,
            sets.join(" + "),
            self.owner,
            self.target
        )
    }
}

impl DnsRecords {
    /// Deleting is asked for in this pass: a valid owner id, and the load balancers go.
    fn deleting<'a>(ctx: &CleanCtx<'a>) -> Option<&'a str> {
        let lbs_deleted = ctx.tasks.contains(&load_balancers::TASK);
        Allowed::of(ctx.external_dns_owner, lbs_deleted).deleting()
    }
}

/// Before the load balancers (order 5): their DNS names can be read only while they exist, and a
/// record is deleted only while its load balancer can still be found (see the module doc). Gates
/// later: a failed delete holds the load balancers for this pass. Only deletes and, while
/// deleting is asked for, locating can fail here: a report alone never holds anything.
pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    gates_later: true,
    iam_actions: &[
        "route53:ListHostedZones",
        "route53:ListResourceRecordSets",
        "route53:ChangeResourceRecordSets",
        // The load balancers' DNS names (`lbs`).
        "elasticloadbalancing:DescribeLoadBalancers",
    ],
    ..Descriptor::new("route53", KIND, Phase::Tagged, 5)
};

#[async_trait]
impl Cleaner for DnsRecords {
    type Detail = Pair;

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Pair>>, CleanError> {
        match find(ctx).await {
            Ok(found) => Ok(found),
            // Deleting was asked for: the load balancers must wait until their records can be
            // looked at, or the records could never be tied to the cluster again.
            Err(e) if Self::deleting(ctx).is_some() => Err(e),
            // Only reporting: a failure to look is reported in place of the report.
            Err(e) => {
                tracing::warn!(error = %e, "external-dns records could not be checked");
                Ok(vec![Target::new(format!("route53 ({})", ctx.cluster), Pair::default()).kept(
                    format!(
                        "external-dns records pointing at the cluster's load balancers could not be checked: {e}"
                    ),
                )])
            }
        }
    }

    /// Every pair of a hosted zone in one change batch (see the module doc).
    async fn delete_together(
        &self,
        ctx: &CleanCtx<'_>,
        targets: &[Target<Pair>],
    ) -> Option<Vec<Result<Outcome, CleanError>>> {
        let mut out: Vec<Option<Result<Outcome, CleanError>>> =
            targets.iter().map(|_| None).collect();
        let mut zones: Vec<&str> = targets.iter().map(|t| t.detail.zone_id.as_str()).collect();
        zones.sort_unstable();
        zones.dedup();
        for zone in zones {
            let of_zone: Vec<usize> = (0..targets.len())
                .filter(|&i| targets[i].detail.zone_id == zone)
                .collect();
            for batch in batches(&of_zone, |i| targets[i].detail.sets.len()) {
                let picked: Vec<&Target<Pair>> = batch.iter().map(|&i| &targets[i]).collect();
                for (i, res) in batch.iter().zip(delete_batch(ctx, zone, &picked).await) {
                    out[*i] = Some(res);
                }
            }
        }
        Some(
            out.into_iter()
                .map(|r| {
                    r.unwrap_or_else(|| Ok(Outcome::Remaining("not in any change batch".into())))
                })
                .collect(),
        )
    }

    /// One pair alone (the phase runner deletes through [`Cleaner::delete_together`]).
    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<Pair>) -> Result<Outcome, CleanError> {
        let mut res = delete_batch(ctx, &t.detail.zone_id, &[t]).await;
        res.pop()
            .unwrap_or_else(|| Ok(Outcome::Remaining("nothing to delete".into())))
    }
}

/// Splits `items` into runs whose sizes (`size` changes each) add up to at most
/// [`route53::MAX_CHANGES`], never splitting an item: a record and its TXT record stay together.
fn batches(items: &[usize], size: impl Fn(usize) -> usize) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut used = 0;
    for &i in items {
        let n = size(i);
        match out.last_mut() {
            Some(last) if used + n <= route53::MAX_CHANGES => last.push(i),
            _ => {
                out.push(vec![i]);
                used = 0;
            }
        }
        used += n;
    }
    out
}

/// Deletes `pairs` of zone `zone` in one change batch: all deleted, or all left. A refusal is one
/// error (on the first pair) and the others remaining, all retried by the next pass from a fresh
/// listing.
async fn delete_batch(
    ctx: &CleanCtx<'_>,
    zone: &str,
    pairs: &[&Target<Pair>],
) -> Vec<Result<Outcome, CleanError>> {
    let sets: Vec<ResourceRecordSet> = pairs
        .iter()
        .flat_map(|t| t.detail.sets.iter().cloned())
        .collect();
    let res = route53::delete_sets(ctx, zone, &sets).await;
    let Some(first) = pairs.first() else {
        return Vec::new();
    };
    match settle(res, KIND, &first.id, "ChangeResourceRecordSets") {
        Ok(o) => {
            if matches!(o, Outcome::Deleted) {
                tracing::info!(zone, records = pairs.len(), "external-dns records deleted");
            }
            pairs.iter().map(|_| Ok(o.clone())).collect()
        }
        Err(e) => {
            tracing::warn!(zone, error = %e, "external-dns records not deleted; retried next pass");
            let kind = e.kind();
            let mut out = vec![Err(e)];
            out.extend(pairs[1..].iter().map(|_| {
                // The batch's failure is theirs too: same kind.
                Ok(Outcome::Remaining(Failure::new(
                    kind,
                    format!(
                        "its change batch failed (see the error for {}); retried next pass",
                        first.id
                    ),
                )))
            }));
            out
        }
    }
}

/// The external-dns records pointing at phase 2's load balancers: deletable pairs, and the
/// others as report-only targets saying why they stay.
async fn find(ctx: &CleanCtx<'_>) -> Result<Vec<Target<Pair>>, CleanError> {
    if load_balancers::tagged(ctx.inventory).is_empty() {
        return Ok(Vec::new());
    }
    // The account's zones before the load balancers' names: in an account without a hosted
    // zone no record can point at them, and their names are not read (a request saved in every
    // pass that deletes load balancers there; 100 of the fleet benchmark's 8,038).
    let zones = route53::hosted_zones(ctx).await?;
    if zones.is_empty() {
        return Ok(Vec::new());
    }
    let lbs = lbs::lb_dns_names(ctx).await?;
    if lbs.is_empty() {
        return Ok(Vec::new());
    }
    let allowed = Allowed::of(
        ctx.external_dns_owner,
        ctx.tasks.contains(&load_balancers::TASK),
    );
    // The zones' record sets are listed a few zones at once (an account may hold many zones,
    // and this cleaner runs before the load balancers go); read in the zones' order.
    let listed: Vec<_> = futures::stream::iter(zones)
        .map(|(zone_id, zone_name)| async move {
            route53::records(ctx, &zone_id)
                .await
                .map(|raw| (zone_id, zone_name, raw))
        })
        .buffered(crate::cleaners::READ_CONCURRENCY)
        .collect()
        .await;
    let mut found = Vec::new();
    for zone in listed {
        let (zone_id, zone_name, raw) = zone?;
        let sets: Vec<Rec> = raw.iter().map(route53::rec_of).collect();
        let owned = owned_records(&sets, &lbs);
        for (o, fate) in owned.iter().zip(policy::fates(&sets, &owned, allowed)) {
            let id = format!("{zone_id}/{} {}", o.name, o.ty);
            let what = format!(
                "external-dns record {} ({}, owner id {:?}, TXT {}) in hosted zone {} ({}) points at load balancer {}",
                o.name, o.ty, o.owner, o.txt, zone_name, zone_id, o.target
            );
            let pair = |txts: &[usize]| Pair {
                zone_id: zone_id.clone(),
                zone_name: zone_name.clone(),
                owner: o.owner.clone(),
                target: o.target.clone(),
                sets: std::iter::once(o.record)
                    .chain(txts.iter().copied())
                    .map(|i| raw[i].clone())
                    .collect(),
            };
            found.push(match fate {
                Fate::Delete { txts } => Target::new(id, pair(&txts)),
                Fate::Keep(why) => Target::new(id, pair(&[])).kept(format!("{what}: {why}")),
            });
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests;
