//! The DNS names of phase 2's load balancers, read while they still exist: once one is gone,
//! nothing ties a record pointing at it to the cluster any more.

use super::KIND;
use crate::cleaners::load_balancers::{self, Api};
use crate::cleaners::{CleanCtx, CleanError};
use crate::errors::{ErrorClass, call};
use crate::locate::describe::ListedLb;
use crate::policy::dns_records::dns_key;
use futures::StreamExt;
use std::collections::{HashMap, HashSet};

/// Load balancers described per call (both ELB APIs take at most 20 names or ARNs).
const LB_CHUNK: usize = 20;

/// The DNS keys of phase 2's load balancers: the inventory's, exactly what the load-balancer
/// cleaner deletes in this pass when its task runs (its phase-2 locate step is the inventory
/// as is: the cluster's ownership rule, `shared` and other clusters' already left out).
pub async fn lb_dns_names(ctx: &CleanCtx<'_>) -> Result<HashSet<String>, CleanError> {
    // Phase 1 listed the region's load balancers in this pass, DNS names included: a name is
    // taken from there (an ARN's DNS name never changes), and only those that listing lacks
    // (made since, or not listed: a load balancer delete went out) are described here.
    let (held_classic, held_v2) = ctx.view.held_lbs().await;
    let dns_of = |held: &Option<std::sync::Arc<Vec<ListedLb>>>| -> HashMap<String, Option<String>> {
        held.iter()
            .flat_map(|l| l.iter())
            .map(|l| (l.id.clone(), l.dns.clone()))
            .collect()
    };
    let (listed_classic, listed_v2) = (dns_of(&held_classic), dns_of(&held_v2));
    let mut out = HashSet::new();
    let mut classic = Vec::new();
    let mut v2 = Vec::new();
    for t in load_balancers::tagged(ctx.inventory) {
        let (id, listed, rest) = match &t.detail {
            Api::Classic { name } => (name, &listed_classic, &mut classic),
            Api::V2 { arn } => (arn, &listed_v2, &mut v2),
        };
        match listed.get(id) {
            Some(dns) => out.extend(dns.as_deref().map(dns_key)),
            None => rest.push(id.clone()),
        }
    }
    // The chunks are described a few at once: this cleaner runs before the load balancers go,
    // so every round trip here delays the whole phase (bench-external, 110 load balancers).
    let chunks: Vec<(bool, Vec<String>)> = classic
        .chunks(LB_CHUNK)
        .map(|c| (true, c.to_vec()))
        .chain(v2.chunks(LB_CHUNK).map(|c| (false, c.to_vec())))
        .collect();
    let described: Vec<Result<Vec<String>, CleanError>> = futures::stream::iter(chunks)
        .map(|(is_classic, chunk)| async move {
            if is_classic {
                classic_names(ctx, &chunk).await
            } else {
                v2_names(ctx, &chunk).await
            }
        })
        .buffered(crate::cleaners::READ_CONCURRENCY)
        .collect()
        .await;
    for names in described {
        out.extend(names?.iter().map(|n| dns_key(n)));
    }
    Ok(out)
}

/// The DNS names of one chunk of classic load balancers. One missing name fails a whole batch
/// (LoadBalancerNotFound): then one at a time. A load balancer gone since locating is skipped.
async fn classic_names(ctx: &CleanCtx<'_>, chunk: &[String]) -> Result<Vec<String>, CleanError> {
    let describe = |names: Vec<String>| {
        call("elb.DescribeLoadBalancers", move || {
            ctx.clients
                .elb
                .describe_load_balancers()
                .set_load_balancer_names(Some(names.clone()))
                .send()
        })
    };
    let names_of = |page: &aws_sdk_elasticloadbalancing::operation::describe_load_balancers::DescribeLoadBalancersOutput| {
        page.load_balancer_descriptions()
            .iter()
            .filter_map(|d| d.dns_name().map(str::to_string))
            .collect::<Vec<_>>()
    };
    match describe(chunk.to_vec()).await {
        Ok(page) => Ok(names_of(&page)),
        Err(f) if f.class == ErrorClass::NotFound && chunk.len() > 1 => {
            let mut out = Vec::new();
            for name in chunk {
                match describe(vec![name.clone()]).await {
                    Ok(page) => out.extend(names_of(&page)),
                    Err(f) if f.class == ErrorClass::NotFound => {}
                    Err(f) => return Err(CleanError::discover(KIND, "DescribeLoadBalancers")(f)),
                }
            }
            Ok(out)
        }
        Err(f) if f.class == ErrorClass::NotFound => Ok(Vec::new()),
        Err(f) => Err(CleanError::discover(KIND, "DescribeLoadBalancers")(f)),
    }
}

/// The DNS names of one chunk of v2 load balancers, as [`classic_names`] for classic ones.
async fn v2_names(ctx: &CleanCtx<'_>, chunk: &[String]) -> Result<Vec<String>, CleanError> {
    let describe = |arns: Vec<String>| {
        call("elbv2.DescribeLoadBalancers", move || {
            ctx.clients
                .elbv2
                .describe_load_balancers()
                .set_load_balancer_arns(Some(arns.clone()))
                .send()
        })
    };
    let names_of = |page: &aws_sdk_elasticloadbalancingv2::operation::describe_load_balancers::DescribeLoadBalancersOutput| {
        page.load_balancers()
            .iter()
            .filter_map(|l| l.dns_name().map(str::to_string))
            .collect::<Vec<_>>()
    };
    match describe(chunk.to_vec()).await {
        Ok(page) => Ok(names_of(&page)),
        Err(f) if f.class == ErrorClass::NotFound => {
            let mut out = Vec::new();
            for arn in chunk {
                match describe(vec![arn.clone()]).await {
                    Ok(page) => out.extend(names_of(&page)),
                    Err(f) if f.class == ErrorClass::NotFound => {}
                    Err(f) => return Err(CleanError::discover(KIND, "DescribeLoadBalancers")(f)),
                }
            }
            Ok(out)
        }
        Err(f) => Err(CleanError::discover(KIND, "DescribeLoadBalancers")(f)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cleaners::Cleaner;
    use crate::cleaners::load_balancers::LoadBalancers;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::locate::tagging::TaggedResource;
    use crate::mocked::{self, CLOUD_KEY, assert_calls, code, mock};
    use aws_sdk_elasticloadbalancingv2 as elbv2;
    use elbv2::operation::describe_load_balancers::{
        DescribeLoadBalancersError, DescribeLoadBalancersOutput,
    };

    const KEPT: &str = "arn:aws:elasticloadbalancing:us-east-1:0:loadbalancer/net/k8s-a/1";
    const GONE: &str = "arn:aws:elasticloadbalancing:us-east-1:0:loadbalancer/net/k8s-b/2";

    fn inventory() -> Inventory {
        let mut inv = Inventory::default();
        for arn in [KEPT, GONE] {
            let tagged = TaggedResource {
                arn: arn.parse().unwrap(),
                tags: [(CLOUD_KEY.to_string(), "owned".to_string())].into(),
            };
            assert!(Cleaner::claim(&LoadBalancers::TAGGED, &tagged, &mut inv));
        }
        inv
    }

    fn described(arn: &str, dns: &str) -> DescribeLoadBalancersOutput {
        DescribeLoadBalancersOutput::builder()
            .load_balancers(
                elbv2::types::LoadBalancer::builder()
                    .load_balancer_arn(arn)
                    .dns_name(dns)
                    .build(),
            )
            .build()
    }

    /// A load balancer deleted since locating fails its whole chunk: the chunk is described
    /// again one at a time, the gone one is skipped, and the rest still count.
    #[tokio::test]
    async fn a_load_balancer_gone_since_discovery_is_skipped_and_the_rest_still_count() {
        let not_found = || DescribeLoadBalancersError::generic(code("LoadBalancerNotFound"));
        let chunk = mock!(elbv2::Client::describe_load_balancers)
            .match_requests(|r| r.load_balancer_arns().len() == 2)
            .then_error(not_found);
        let kept = mock!(elbv2::Client::describe_load_balancers)
            .match_requests(|r| r.load_balancer_arns() == [KEPT])
            .then_output(|| described(KEPT, "K8S-A-1.elb.us-east-1.amazonaws.com."));
        let gone = mock!(elbv2::Client::describe_load_balancers)
            .match_requests(|r| r.load_balancer_arns() == [GONE])
            .then_error(not_found);
        let c = mocked::in_order(&[&chunk, &kept, &gone]);
        let inv = inventory();
        let names = lb_dns_names(&ctx(&c, &inv)).await.unwrap();
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["k8s-a-1.elb.us-east-1.amazonaws.com"],
            "the one that exists, made comparable"
        );
        assert_calls(&gone, 1, "the gone one, asked alone");
    }

    /// Phase 1 listed the region's load balancers in this pass: a DNS name is read from that
    /// listing, and only a load balancer it lacks is described by ARN.
    #[tokio::test]
    async fn a_name_the_passs_listing_holds_is_not_described_again() {
        let not_found = || DescribeLoadBalancersError::generic(code("LoadBalancerNotFound"));
        let listing = mock!(elbv2::Client::describe_load_balancers)
            .match_requests(|r| r.load_balancer_arns().is_empty())
            .then_output(|| described(KEPT, "K8S-A-1.elb.us-east-1.amazonaws.com."));
        // Not in the listing (made since, or gone): asked by ARN, alone.
        let gone = mock!(elbv2::Client::describe_load_balancers)
            .match_requests(|r| r.load_balancer_arns() == [GONE])
            .then_error(not_found);
        let again = mock!(elbv2::Client::describe_load_balancers)
            .match_requests(|r| r.load_balancer_arns() == [GONE])
            .then_error(not_found);
        let c = mocked::in_order(&[&listing, &gone, &again]);
        let inv = inventory();
        let cx = ctx(&c, &inv);
        cx.view.v2_lbs(&c).await.unwrap();
        let names = lb_dns_names(&cx).await.unwrap();
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["k8s-a-1.elb.us-east-1.amazonaws.com"]
        );
        assert_calls(&gone, 1, "only the one the listing lacks, by ARN");
    }

    /// Any other failure is the locate step's error: the records cannot be tied to the cluster.
    #[tokio::test]
    async fn another_failure_is_an_error_not_an_empty_answer() {
        let throttled = mock!(elbv2::Client::describe_load_balancers)
            .then_error(|| DescribeLoadBalancersError::generic(code("AccessDenied")));
        let c = mocked::in_order(&[&throttled]);
        let inv = inventory();
        assert!(lb_dns_names(&ctx(&c, &inv)).await.is_err());
    }
}
