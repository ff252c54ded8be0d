//! Phase 2 (task `dns-record`): the Route53 records external-dns made for the cluster's load
//! balancers. external-dns owns a record through a companion TXT record
//! `heritage=external-dns,external-dns/owner=<owner-id>,…` (at the record's own name, or at
//! `<type>-<name>` in its newer format), and deletes the pair only while it runs: a deleted
//! cluster leaves them pointing at load balancers that are gone. The owner id defaults to
//! `default`, shared by every cluster that kept the default (external-dns#1758), so the TXT record
//! alone never says whose a record is.
//!
//! What this cleaner does today: it REPORTS, never deletes. A record is reported when it is an
//! `A`/`AAAA` alias or a `CNAME` whose target is the DNS name of one of the load balancers this
//! teardown deletes (phase 2's, found before they go: hence the first order), and external-dns
//! owns it (the TXT companion). The report names the hosted zone, the record, its type and the
//! owner id; it never holds the teardown. Deleting them (TXT and record together in one change
//! batch, only when the cluster names its owner id in an annotation, never `default`) is left
//! to do.

use super::load_balancers::{self, Api};
use super::{CleanCtx, CleanError, Cleaner, Outcome, Target};
use crate::errors::{ErrorClass, call};
use crate::model::GcTask;
use async_trait::async_trait;
use std::collections::HashSet;

/// Selects the external-dns records report (on by default: it only reports).
pub const TASK: GcTask = GcTask::new("dns-record");

pub struct DnsRecords;

const KIND: &str = "dns-record";

/// Load balancers described per call (both ELB APIs take at most 20 names or ARNs).
const LB_CHUNK: usize = 20;

/// One record set as the rule needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rec {
    pub name: String,
    pub ty: String,
    /// An alias record's target DNS name.
    pub alias: Option<String>,
    pub values: Vec<String>,
}

/// An external-dns record pointing at one of the load balancers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owned {
    pub name: String,
    pub ty: String,
    /// The name of its TXT companion.
    pub txt: String,
    pub owner: String,
    /// The load balancer DNS name it points at.
    pub target: String,
}

/// A DNS name made comparable: lower case, no trailing dot, no `dualstack.` prefix (Route53
/// aliases to an ELB are written `dualstack.<lb dns name>.`).
pub fn dns_key(name: &str) -> String {
    let n = name.trim().trim_end_matches('.').to_ascii_lowercase();
    n.strip_prefix("dualstack.")
        .map(str::to_string)
        .unwrap_or(n)
}

/// The owner id of an external-dns TXT value (`"heritage=external-dns,external-dns/owner=x,…"`),
/// or `None` for any other TXT value.
pub fn external_dns_owner(txt: &str) -> Option<String> {
    let v = txt.trim().trim_matches('"');
    let mut heritage = false;
    let mut owner = None;
    for part in v.split(',') {
        match part.split_once('=') {
            Some(("heritage", "external-dns")) => heritage = true,
            Some(("external-dns/owner", o)) => owner = Some(o.to_string()),
            _ => {}
        }
    }
    owner.filter(|_| heritage)
}

/// The external-dns records among one zone's `sets` that point at one of `lbs` (DNS keys), with
/// their TXT companion. Pure, so the ownership rule is unit-tested.
pub fn owned_records(sets: &[Rec], lbs: &HashSet<String>) -> Vec<Owned> {
    let txt_owner = |name: &str| {
        sets.iter()
            .filter(|s| s.ty == "TXT" && dns_key(&s.name) == dns_key(name))
            .flat_map(|s| s.values.iter())
            .find_map(|v| external_dns_owner(v))
    };
    let mut out = Vec::new();
    for s in sets {
        let target = match s.ty.as_str() {
            "A" | "AAAA" => s.alias.as_deref().map(dns_key),
            "CNAME" => s.values.first().map(|v| dns_key(v)),
            _ => None,
        };
        let Some(target) = target.filter(|t| lbs.contains(t)) else {
            continue;
        };
        // The newer format's companion first (`a-www.example.com`), then the older one's.
        let newer = format!("{}-{}", s.ty.to_ascii_lowercase(), s.name);
        let found = [newer, s.name.clone()]
            .into_iter()
            .find_map(|txt| txt_owner(&txt).map(|owner| (txt, owner)));
        if let Some((txt, owner)) = found {
            out.push(Owned {
                name: s.name.clone(),
                ty: s.ty.clone(),
                txt,
                owner,
                target,
            });
        }
    }
    out
}

#[async_trait]
impl Cleaner for DnsRecords {
    type Detail = ();

    fn service(&self) -> &'static str {
        "route53"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    /// Before the load balancers: their DNS names can be read only while they exist.
    fn order(&self) -> u32 {
        5
    }
    fn task(&self) -> Option<GcTask> {
        Some(TASK)
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        // A report must never hold the teardown: a failure to look is reported in its place.
        match find(ctx).await {
            Ok(found) => Ok(found),
            Err(e) => {
                tracing::warn!(error = %e, "external-dns records could not be checked");
                Ok(vec![Target::plain(format!("route53 ({})", ctx.cluster)).kept(format!(
                    "external-dns records pointing at the cluster's load balancers could not be checked: {e}"
                ))])
            }
        }
    }

    async fn delete(&self, _ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        // Never reached: every target is report-only (`Target::kept`).
        Ok(Outcome::Remaining(format!(
            "{}: external-dns records are reported, not deleted",
            t.id
        )))
    }
}

/// The external-dns records pointing at phase 2's load balancers, as report-only targets.
async fn find(ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
    let lbs = lb_dns_names(ctx).await?;
    if lbs.is_empty() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for (zone_id, zone_name) in hosted_zones(ctx).await? {
        for o in owned_records(&records(ctx, &zone_id).await?, &lbs) {
            let why = format!(
                "external-dns record {} ({}, owner id {:?}, TXT {}) in hosted zone {} ({}) points at load balancer {}: reported, not deleted",
                o.name, o.ty, o.owner, o.txt, zone_name, zone_id, o.target
            );
            found.push(Target::plain(format!("{zone_id}/{} {}", o.name, o.ty)).kept(why));
        }
    }
    Ok(found)
}

/// The DNS keys of phase 2's load balancers.
async fn lb_dns_names(ctx: &CleanCtx<'_>) -> Result<HashSet<String>, CleanError> {
    let mut classic = Vec::new();
    let mut v2 = Vec::new();
    for t in load_balancers::external(ctx.inventory) {
        match &t.detail {
            Api::Classic { name } => classic.push(name.clone()),
            Api::V2 { arn } => v2.push(arn.clone()),
        }
    }
    let mut out = HashSet::new();
    // One missing name fails a whole batch (LoadBalancerNotFound): then one at a time. A load
    // balancer gone since discovery is skipped.
    for chunk in classic.chunks(LB_CHUNK) {
        let res = call("elb.DescribeLoadBalancers", || {
            ctx.clients
                .elb
                .describe_load_balancers()
                .set_load_balancer_names(Some(chunk.to_vec()))
                .send()
        })
        .await;
        match res {
            Ok(page) => out.extend(
                page.load_balancer_descriptions()
                    .iter()
                    .filter_map(|d| d.dns_name())
                    .map(dns_key),
            ),
            Err(f) if f.class == ErrorClass::NotFound && chunk.len() > 1 => {
                for name in chunk {
                    let one = call("elb.DescribeLoadBalancers", || {
                        ctx.clients
                            .elb
                            .describe_load_balancers()
                            .load_balancer_names(name)
                            .send()
                    })
                    .await;
                    match one {
                        Ok(page) => out.extend(
                            page.load_balancer_descriptions()
                                .iter()
                                .filter_map(|d| d.dns_name())
                                .map(dns_key),
                        ),
                        Err(f) if f.class == ErrorClass::NotFound => {}
                        Err(f) => {
                            return Err(CleanError::discover(KIND, "DescribeLoadBalancers")(f));
                        }
                    }
                }
            }
            Err(f) if f.class == ErrorClass::NotFound => {}
            Err(f) => return Err(CleanError::discover(KIND, "DescribeLoadBalancers")(f)),
        }
    }
    for chunk in v2.chunks(LB_CHUNK) {
        let res = call("elbv2.DescribeLoadBalancers", || {
            ctx.clients
                .elbv2
                .describe_load_balancers()
                .set_load_balancer_arns(Some(chunk.to_vec()))
                .send()
        })
        .await;
        let pages = match res {
            Ok(page) => vec![page],
            Err(f) if f.class == ErrorClass::NotFound => {
                let mut pages = Vec::new();
                for arn in chunk {
                    let one = call("elbv2.DescribeLoadBalancers", || {
                        ctx.clients
                            .elbv2
                            .describe_load_balancers()
                            .load_balancer_arns(arn)
                            .send()
                    })
                    .await;
                    match one {
                        Ok(page) => pages.push(page),
                        Err(f) if f.class == ErrorClass::NotFound => {}
                        Err(f) => {
                            return Err(CleanError::discover(KIND, "DescribeLoadBalancers")(f));
                        }
                    }
                }
                pages
            }
            Err(f) => return Err(CleanError::discover(KIND, "DescribeLoadBalancers")(f)),
        };
        out.extend(
            pages
                .iter()
                .flat_map(|p| p.load_balancers())
                .filter_map(|l| l.dns_name())
                .map(dns_key),
        );
    }
    Ok(out)
}

/// Every hosted zone of the account: (id, name).
async fn hosted_zones(ctx: &CleanCtx<'_>) -> Result<Vec<(String, String)>, CleanError> {
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

/// Every record set of zone `zone_id`.
async fn records(ctx: &CleanCtx<'_>, zone_id: &str) -> Result<Vec<Rec>, CleanError> {
    let mut out = Vec::new();
    let mut next: (
        Option<String>,
        Option<aws_sdk_route53::types::RrType>,
        Option<String>,
    ) = (None, None, None);
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
        out.extend(page.resource_record_sets().iter().map(|s| {
            Rec {
                name: s.name().to_string(),
                ty: s.r#type().as_str().to_string(),
                alias: s.alias_target().map(|a| a.dns_name().to_string()),
                values: s
                    .resource_records()
                    .iter()
                    .map(|r| r.value().to_string())
                    .collect(),
            }
        }));
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

#[cfg(test)]
mod tests {
    use super::*;

    const LB: &str = "k8s-web-abc-123.elb.us-east-1.amazonaws.com";

    fn rec(name: &str, ty: &str, alias: Option<&str>, values: &[&str]) -> Rec {
        Rec {
            name: name.into(),
            ty: ty.into(),
            alias: alias.map(str::to_string),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn txt(owner: &str) -> String {
        format!(
            "\"heritage=external-dns,external-dns/owner={owner},external-dns/resource=service/default/web\""
        )
    }

    fn lbs() -> HashSet<String> {
        [LB.to_string()].into()
    }

    #[test]
    fn an_external_dns_record_pointing_at_the_clusters_load_balancer_is_found() {
        let alias = format!("dualstack.{LB}.");
        let sets = [
            rec("www.example.com.", "A", Some(&alias), &[]),
            rec("a-www.example.com.", "TXT", None, &[&txt("c1")]),
            rec("api.example.com.", "CNAME", None, &[LB]),
            rec("api.example.com.", "TXT", None, &[&txt("default")]),
        ];
        let found = owned_records(&sets, &lbs());
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(
            (
                found[0].name.as_str(),
                found[0].txt.as_str(),
                found[0].owner.as_str()
            ),
            ("www.example.com.", "a-www.example.com.", "c1")
        );
        assert_eq!(
            (found[1].txt.as_str(), found[1].owner.as_str()),
            ("api.example.com.", "default")
        );
    }

    #[test]
    fn look_alikes_are_not() {
        let sets = [
            // Points elsewhere, with an external-dns TXT.
            rec(
                "other.example.com.",
                "CNAME",
                None,
                &["lb-of-another.elb.amazonaws.com"],
            ),
            rec("other.example.com.", "TXT", None, &[&txt("c1")]),
            // Points at the load balancer, but no external-dns TXT: someone's hand-made record.
            rec("hand.example.com.", "CNAME", None, &[LB]),
            rec("hand.example.com.", "TXT", None, &["\"v=spf1 -all\""]),
        ];
        assert!(owned_records(&sets, &lbs()).is_empty());
        assert_eq!(
            external_dns_owner("\"heritage=other,external-dns/owner=x\""),
            None
        );
    }
}
