//! The DNS names of phase 2's load balancers, read while they still exist: once one is gone,
//! nothing ties a record pointing at it to the cluster any more.

use super::KIND;
use super::ownership::dns_key;
use crate::cleaners::load_balancers::{self, Api};
use crate::cleaners::{CleanCtx, CleanError};
use crate::errors::{ErrorClass, call};
use std::collections::HashSet;

/// Load balancers described per call (both ELB APIs take at most 20 names or ARNs).
const LB_CHUNK: usize = 20;

/// The DNS keys of phase 2's load balancers: the inventory's, exactly what the load-balancer
/// cleaner deletes in this pass when its task runs (its phase-2 discovery is the inventory
/// as is: the cluster's ownership rule, `shared` and other clusters' already left out).
pub async fn lb_dns_names(ctx: &CleanCtx<'_>) -> Result<HashSet<String>, CleanError> {
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
