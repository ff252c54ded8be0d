//! Route53's side: the account's hosted zones, a zone's record sets, and the change batch that
//! deletes record sets exactly as they were listed.

use super::KIND;
use crate::cleaners::{CleanCtx, CleanError};
use crate::errors::{ApiFailure, call};
use crate::policy::dns_records::Rec;
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
            kind: crate::errors::FailureKind::Other,
        })?;
    let batch = ChangeBatch::builder()
        .comment("sweeper: external-dns records of a deleted cluster's load balancers")
        .set_changes(Some(changes))
        .build()
        .map_err(|e| ApiFailure {
            class: crate::errors::ErrorClass::Fatal,
            code: None,
            message: format!("cannot build the change batch: {e}"),
            kind: crate::errors::FailureKind::Other,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, assert_calls, mock};
    use aws_sdk_route53 as r53;
    use r53::operation::list_hosted_zones::ListHostedZonesOutput;
    use r53::operation::list_resource_record_sets::ListResourceRecordSetsOutput;
    use r53::types::{HostedZone, ResourceRecord};

    fn zone(id: &str, name: &str) -> HostedZone {
        HostedZone::builder()
            .id(format!("/hostedzone/{id}"))
            .name(name)
            .caller_reference(id)
            .build()
            .unwrap()
    }

    fn txt(name: &str) -> ResourceRecordSet {
        ResourceRecordSet::builder()
            .name(name)
            .r#type(RrType::Txt)
            .ttl(300)
            .resource_records(ResourceRecord::builder().value("\"x\"").build().unwrap())
            .build()
            .unwrap()
    }

    /// Every page of zones is read, following the marker; ids lose their `/hostedzone/`.
    #[tokio::test]
    async fn every_page_of_hosted_zones_is_read() {
        let first = mock!(r53::Client::list_hosted_zones)
            .match_requests(|r| r.marker().is_none())
            .then_output(|| {
                ListHostedZonesOutput::builder()
                    .hosted_zones(zone("Z1", "a.example."))
                    .marker("")
                    .is_truncated(true)
                    .next_marker("Z2")
                    .max_items(1)
                    .build()
                    .unwrap()
            });
        let second = mock!(r53::Client::list_hosted_zones)
            .match_requests(|r| r.marker() == Some("Z2"))
            .then_output(|| {
                ListHostedZonesOutput::builder()
                    .hosted_zones(zone("Z2", "b.example."))
                    .marker("Z2")
                    .is_truncated(false)
                    .max_items(1)
                    .build()
                    .unwrap()
            });
        let c = mocked::in_order(&[&first, &second]);
        let inv = Inventory::default();
        let zones = hosted_zones(&ctx(&c, &inv)).await.unwrap();
        assert_eq!(
            zones,
            [
                ("Z1".to_string(), "a.example.".to_string()),
                ("Z2".to_string(), "b.example.".to_string())
            ]
        );
        assert_calls(&second, 1, "the second page");
    }

    /// A zone's record sets are read page by page from the next name and type Route53 gives.
    #[tokio::test]
    async fn every_page_of_a_zones_records_is_read() {
        let first = mock!(r53::Client::list_resource_record_sets)
            .match_requests(|r| r.hosted_zone_id() == Some("Z1") && r.start_record_name().is_none())
            .then_output(|| {
                ListResourceRecordSetsOutput::builder()
                    .resource_record_sets(txt("a.example."))
                    .is_truncated(true)
                    .next_record_name("b.example.")
                    .next_record_type(RrType::Txt)
                    .max_items(1)
                    .build()
                    .unwrap()
            });
        let second = mock!(r53::Client::list_resource_record_sets)
            .match_requests(|r| {
                r.start_record_name() == Some("b.example.")
                    && r.start_record_type() == Some(&RrType::Txt)
            })
            .then_output(|| {
                ListResourceRecordSetsOutput::builder()
                    .resource_record_sets(txt("b.example."))
                    .is_truncated(false)
                    .max_items(1)
                    .build()
                    .unwrap()
            });
        let c = mocked::in_order(&[&first, &second]);
        let inv = Inventory::default();
        let sets = records(&ctx(&c, &inv), "Z1").await.unwrap();
        let names: Vec<&str> = sets.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["a.example.", "b.example."]);
    }
}
