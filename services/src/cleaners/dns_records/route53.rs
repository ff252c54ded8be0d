//! Route53's side: the account's hosted zones, a zone's record sets, and the change batch that
//! deletes record sets exactly as they were listed.

use super::KIND;
use super::ownership::Rec;
use crate::cleaners::{CleanCtx, CleanError};
use crate::errors::{ApiFailure, call};
use aws_sdk_route53::types::{Change, ChangeAction, ChangeBatch, ResourceRecordSet, RrType};

/// Route53 takes at most 1000 changes in one batch.
pub const MAX_CHANGES: usize = 1000;

/// Every hosted zone of the account: (id without `/hostedzone/`, name).
pub async fn hosted_zones(ctx: &CleanCtx<'_>) -> Result<Vec<(String, String)>, CleanError> {
    let mut out = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let page = call("route53.ListHostedZones", || {
            ctx.clients
                .route53
                .list_hosted_zones()
                .set_marker(marker.clone())
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "ListHostedZones"))?;
        out.extend(page.hosted_zones().iter().map(|z| {
            (
                z.id().trim_start_matches("/hostedzone/").to_string(),
                z.name().to_string(),
            )
        }));
        match page.next_marker() {
            Some(m) if page.is_truncated() && !m.is_empty() => marker = Some(m.to_string()),
            _ => return Ok(out),
        }
    }
}

/// Every record set of zone `zone_id`, as listed: a DELETE must repeat a set exactly.
pub async fn records(
    ctx: &CleanCtx<'_>,
    zone_id: &str,
) -> Result<Vec<ResourceRecordSet>, CleanError> {
    let mut out = Vec::new();
    let mut next: (Option<String>, Option<RrType>, Option<String>) = (None, None, None);
    loop {
        let page = call("route53.ListResourceRecordSets", || {
            ctx.clients
                .route53
                .list_resource_record_sets()
                .hosted_zone_id(zone_id)
                .set_start_record_name(next.0.clone())
                .set_start_record_type(next.1.clone())
                .set_start_record_identifier(next.2.clone())
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "ListResourceRecordSets"))?;
        out.extend(page.resource_record_sets().iter().cloned());
        if !page.is_truncated() || page.next_record_name().is_none() {
            return Ok(out);
        }
        next = (
            page.next_record_name().map(str::to_string),
            page.next_record_type().cloned(),
            page.next_record_identifier().map(str::to_string),
        );
    }
}

/// What the rule reads of a record set.
pub fn rec_of(s: &ResourceRecordSet) -> Rec {
    Rec {
        name: s.name().to_string(),
        ty: s.r#type().as_str().to_string(),
        alias: s.alias_target().map(|a| a.dns_name().to_string()),
        values: s
            .resource_records()
            .iter()
            .map(|r| r.value().to_string())
            .collect(),
        set_id: s.set_identifier().map(str::to_string),
    }
}

/// One `ChangeResourceRecordSets` deleting `sets` in zone `zone_id`: all of them or, if any
/// changed since it was listed (InvalidChangeBatch), none.
pub async fn delete_sets(
    ctx: &CleanCtx<'_>,
    zone_id: &str,
    sets: &[ResourceRecordSet],
) -> Result<(), ApiFailure> {
    let changes: Vec<Change> = sets
        .iter()
        .map(|s| {
            Change::builder()
                .action(ChangeAction::Delete)
                .resource_record_set(s.clone())
                .build()
        })
        .collect::<Result<_, _>>()
        .map_err(|e| ApiFailure {
            class: crate::errors::ErrorClass::Fatal,
            code: None,
            message: format!("cannot build the change batch: {e}"),
            throttling: false,
        })?;
    let batch = ChangeBatch::builder()
        .comment("sweeper: external-dns records of a deleted cluster's load balancers")
        .set_changes(Some(changes))
        .build()
        .map_err(|e| ApiFailure {
            class: crate::errors::ErrorClass::Fatal,
            code: None,
            message: format!("cannot build the change batch: {e}"),
            throttling: false,
        })?;
    call("route53.ChangeResourceRecordSets", || {
        ctx.clients
            .route53
            .change_resource_record_sets()
            .hosted_zone_id(zone_id)
            .change_batch(batch.clone())
            .send()
    })
    .await
    .map(|_| ())
}
