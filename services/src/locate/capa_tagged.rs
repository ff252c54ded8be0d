//! Phase 1's one look at what CAPA tagged for the cluster
//! (`sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned`): ONE tagging-API query of CAPA's
//! key (all pages), of the four types phase 1 deletes. Its load balancers and target groups are
//! kept by ARN (`elasticloadbalancing`, `loadbalancer` or `targetgroup`) and deleted from it; its
//! instances and security groups only say whether CAPA left any ([`holds`]).
//!
//! Why instances and groups are a gate and not the answer: the instance and group cleaners need
//! what the tagging API does not say (an instance's state, a group's rules and VPC), so they
//! describe by CAPA's tag as before, but only when the query found one (or an ARN it could not
//! read). A cluster CAPA tore down itself, the usual case, then costs phase 1 this one request a
//! pass instead of three (`DescribeInstances` and `DescribeSecurityGroups` of CAPA's tag, empty):
//! 400 of the fleet benchmark's 8,000 requests. The tagging API is eventually consistent: an
//! instance CAPA launched a moment before the query may be missing from it, as from phase 2's
//! query; it is found by the next pass (a pass that deleted anything is never the last, and
//! phase 3 cannot delete a VPC an instance still runs in). With `--alternative-discovery` the
//! cleaners describe without the gate.
//!
//! Why the `ResourceTypeFilters` (`elasticloadbalancing:loadbalancer`,
//! `elasticloadbalancing:targetgroup`, `ec2:instance`, `ec2:security-group`): the service then
//! reads only those types' resources. Unfiltered, the query also returned the cluster's network, and an
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
/// GWLB), every target group, instance and security group.
pub const TYPES: [&str; 4] = [
    "elasticloadbalancing:loadbalancer",
    "elasticloadbalancing:targetgroup",
    "ec2:instance",
    "ec2:security-group",
];

/// One answer of the query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CapaTagged {
    Found(TaggedResource),
    /// An ARN that does not parse: never deleted, reported by the load balancer cleaner (it
    /// holds phase 1, since it may be CAPA's load balancer).
    Malformed(String),
}

/// Every resource of [`TYPES`] tagged `capa_key=owned` in the session's account and region. A
/// failure is reported as the asking cleaner's (`kind`).
pub async fn query(
    c: &AwsClients,
    capa_key: &str,
    kind: &'static str,
) -> Result<Vec<CapaTagged>, CleanError> {
    let found =
        resources_of_types_with_tag(&c.tagging, &TYPES, capa_key, &[tags::OWNED], Some(MAX_PAGE))
            .await
            .map_err(|e| match e {
                TaggingError::GetResources { source, .. } | TaggingError::GetEvery { source } => {
                    CleanError::Discover {
                        kind,
                        op: "GetResources",
                        source,
                    }
                }
            })?;
    let mut out: Vec<CapaTagged> = Vec::with_capacity(found.resources.len());
    for r in found.resources {
        if let Some(why) = c.scope.as_ref().and_then(|s| s.foreign(&r.arn)) {
            tracing::warn!(arn = %r.arn, %why, "CAPA-tagged resource outside the cluster's session: ignored");
            continue;
        }
        out.push(CapaTagged::Found(r));
    }
    out.extend(found.malformed.into_iter().map(|e| match e {
        crate::arn::ArnError::Malformed { arn, .. } => CapaTagged::Malformed(arn),
    }));
    Ok(out)
}

/// The found resources of ARN service and resource type (`elasticloadbalancing`
/// `loadbalancer`, `ec2` `instance`).
pub fn of_type<'a>(
    found: &'a [CapaTagged],
    service: &'a str,
    kind: &'a str,
) -> impl Iterator<Item = &'a TaggedResource> {
    found.iter().filter_map(move |f| match f {
        CapaTagged::Found(r) if r.arn.service == service && r.arn.resource_type() == kind => {
            Some(r)
        }
        _ => None,
    })
}

/// Whether the cleaner of `service` `kind` must describe: the query found one of its kind, or an
/// ARN it could not read (which could be one). Pure, for the gate's table test.
pub fn holds(found: &[CapaTagged], service: &str, kind: &str) -> bool {
    of_type(found, service, kind).next().is_some()
        || found.iter().any(|f| matches!(f, CapaTagged::Malformed(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(arn: &str) -> CapaTagged {
        CapaTagged::Found(TaggedResource {
            arn: arn.parse().unwrap(),
            tags: Default::default(),
        })
    }

    #[test]
    fn a_cleaner_describes_only_when_the_query_holds_its_kind_or_an_unreadable_arn() {
        let instance = found("arn:aws:ec2:us-east-1:0:instance/i-1");
        let group = found("arn:aws:ec2:us-east-1:0:security-group/sg-1");
        let lb = found("arn:aws:elasticloadbalancing:us-east-1:0:loadbalancer/c1-apiserver");
        let bad = CapaTagged::Malformed("arn:aws:ec2".into());
        let table: [(&str, Vec<CapaTagged>, bool, bool); 6] = [
            ("nothing", vec![], false, false),
            ("an instance", vec![instance.clone()], true, false),
            ("a group", vec![group.clone()], false, true),
            ("both", vec![instance, group], true, true),
            ("a load balancer only", vec![lb.clone()], false, false),
            ("an ARN that does not parse", vec![lb, bad], true, true),
        ];
        for (what, f, instances, groups) in table {
            assert_eq!(holds(&f, "ec2", "instance"), instances, "{what}: instances");
            assert_eq!(holds(&f, "ec2", "security-group"), groups, "{what}: groups");
        }
    }
}
