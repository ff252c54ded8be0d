//! Phase 1's load balancers and target groups: the ones CAPA tagged for the cluster
//! (`sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned`), found by ONE tagging-API query
//! of CAPA's key (all pages), kept by ARN (`elasticloadbalancing`, `loadbalancer` or
//! `targetgroup`).
//!
//! Why the two `ResourceTypeFilters` (`elasticloadbalancing:loadbalancer`,
//! `elasticloadbalancing:targetgroup`): the service then reads only those types' resources.
//! Unfiltered, the query also returned the cluster's instances, groups and network, and an
//! implementation may walk every resource of every service in the account and region to answer it
//! (moto, LocalStack's, does; with the unfiltered query a fleet of 100 teardowns sent 76
//! requests/s where it had sent 97, docs/benchmarks.md, 2026-12-02). AWS files classic load balancers
//! (`elasticloadbalancing:...:loadbalancer/<name>`) under `elasticloadbalancing:loadbalancer` too,
//! so the filter keeps CAPA's classic API-server load balancer (CAPA's default kind); moto files
//! them under a type of its own (`elb`), which `localstack/sweeper_localstack/patches.py`
//! corrects for the test environment.
//!
//! Why not the region's listings: phase 1 used to list every load balancer and target group of
//! the region and read every one's tags (`DescribeTags`, 20 per call) to find the one or two CAPA
//! made, on every pass of every cluster. That grows with the region: with 2,000 load balancers
//! and target groups it is 100 calls a pass. The query asks for exactly what phase 1 wants, in one
//! call (a page holds 100). The region's listing without tags is still made where it is needed:
//! phase 3's blocker check must see every load balancer in the VPC, ours or not.
//! With `--alternative-discovery` (the tagging API not trusted) phase 1 keeps the listings.
//!
//! What the query returns is checked again before anything is deleted: an ARN of another
//! account, region or partition than the session's is dropped (logged, as phase 2 does), and
//! each cleaner still applies CAPA's rule to the tags returned.

use super::tagging::{MAX_PAGE, TaggedResource, TaggingError, resources_of_types_with_tag};
use super::tags;
use crate::errors::CleanError;
use crate::model::AwsClients;

/// The tagging API's resource types the query asks for: every load balancer (classic, ALB, NLB,
/// GWLB) and every target group.
pub const TYPES: [&str; 2] = [
    "elasticloadbalancing:loadbalancer",
    "elasticloadbalancing:targetgroup",
];

/// One answer of the query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CapaElb {
    Found(TaggedResource),
    /// An ARN that does not parse: never deleted, reported by the load balancer cleaner (it
    /// holds phase 1, since it may be CAPA's load balancer).
    Malformed(String),
}

/// Every load balancer and target group tagged `capa_key=owned` in the session's account and
/// region.
pub async fn query(c: &AwsClients, capa_key: &str) -> Result<Vec<CapaElb>, CleanError> {
    let found =
        resources_of_types_with_tag(&c.tagging, &TYPES, capa_key, &[tags::OWNED], Some(MAX_PAGE))
            .await
            .map_err(|e| match e {
                TaggingError::GetResources { source, .. } | TaggingError::GetEvery { source } => {
                    CleanError::Discover {
                        kind: "load-balancer",
                        op: "GetResources",
                        source,
                    }
                }
            })?;
    let mut out: Vec<CapaElb> = Vec::with_capacity(found.resources.len());
    for r in found.resources {
        if let Some(why) = c.scope.as_ref().and_then(|s| s.foreign(&r.arn)) {
            tracing::warn!(arn = %r.arn, %why, "CAPA-tagged resource outside the cluster's session: ignored");
            continue;
        }
        out.push(CapaElb::Found(r));
    }
    out.extend(found.malformed.into_iter().map(|e| match e {
        crate::arn::ArnError::Malformed { arn, .. } => CapaElb::Malformed(arn),
    }));
    Ok(out)
}

/// The found resources of ARN resource type `kind` (`loadbalancer`, `targetgroup`).
pub fn of_type<'a>(
    found: &'a [CapaElb],
    kind: &'a str,
) -> impl Iterator<Item = &'a TaggedResource> {
    found.iter().filter_map(move |f| match f {
        CapaElb::Found(r)
            if r.arn.service == "elasticloadbalancing" && r.arn.resource_type() == kind =>
        {
            Some(r)
        }
        _ => None,
    })
}
