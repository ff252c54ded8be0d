//! Phase 1's load balancers and target groups: the ones CAPA tagged for the cluster
//! (`sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned`), found by ONE tagging-API query
//! of CAPA's key (all pages), kept by ARN (`elasticloadbalancing`, `loadbalancer` or
//! `targetgroup`).
//!
//! Why no `ResourceTypeFilters`: a classic load balancer's ARN is
//! `elasticloadbalancing:...:loadbalancer/<name>`, but not every implementation files it under
//! `elasticloadbalancing:loadbalancer` (moto, LocalStack's, answers classic ones only for its own
//! `elb`), and a filter that misses CAPA's classic API-server load balancer (CAPA's default kind)
//! would leave it for ever. Unfiltered, the query returns what CAPA tagged for this one cluster
//! (its instances, groups and network besides): tens of resources, one page of 100.
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

use super::tagging::{MAX_PAGE, TaggedResource, TaggingError, resources_with_tag};
use super::tags;
use crate::errors::CleanError;
use crate::model::AwsClients;

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
    let found = resources_with_tag(&c.tagging, capa_key, &[tags::OWNED], Some(MAX_PAGE))
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
