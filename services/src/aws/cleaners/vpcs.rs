//! Phase 3's gate and last step: the VPC is ours only when it carries the CAPA-owned tag. A
//! bring-your-own VPC (untagged, or tagged for another owner) is never discovered, so nothing in
//! it is touched by phase 3. Before phase 3 touches a VPC, [`blockers`] lists what in it is not
//! ours and would keep it from being deleted: phase 3 then waits, deleting none of it.

use super::instances;
use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::aws::discovery::describe;
use crate::aws::discovery::tags;
use crate::aws::errors::call;
use crate::aws::model::{AwsClients, ResourceRef};
use async_trait::async_trait;

pub struct Vpcs;

const KIND: &str = "vpc";

/// The cluster's CAPA-managed VPC ids (normally one).
pub async fn capa_vpcs(c: &AwsClients, cluster: &str) -> Result<Vec<String>, CleanError> {
    let out = call("ec2.DescribeVpcs", || {
        c.ec2
            .describe_vpcs()
            .filters(tags::ec2_tag_filter(&tags::capa_key(cluster), tags::OWNED))
            .send()
    })
    .await
    .map_err(CleanError::discover(KIND, "DescribeVpcs"))?;
    Ok(out
        .vpcs()
        .iter()
        .filter_map(|v| v.vpc_id())
        .map(str::to_string)
        .collect())
}

fn blocker(service: &str, kind: &str, id: &str, vpc: &str) -> (ResourceRef, String) {
    let r = ResourceRef {
        service: service.into(),
        kind: kind.into(),
        id: id.into(),
    };
    (r, vpc.to_string())
}

/// What in `vpcs` the cluster does not own (no CAPA tag, and left by phases 1 and 2) and that
/// keeps a VPC from being deleted, with the VPC it blocks: load balancers of both APIs, live
/// instances, NAT gateways, detached network interfaces (attached ones go with their instance or
/// load balancer), security groups other than the default one, VPC endpoints, and subnets. Phase 1 has removed
/// CAPA's instances, API-server load balancer and security groups, and phase 2 the cluster's
/// external resources (unless opted out or not selected), so whatever is found here is someone
/// else's: an opted-out cluster's load balancers, a workload's instance.
pub async fn blockers(
    c: &AwsClients,
    cluster: &str,
    vpcs: &[String],
) -> Result<Vec<(ResourceRef, String)>, CleanError> {
    let capa = tags::capa_key(cluster);
    let in_vpcs = || tags::ec2_filter("vpc-id", vpcs);
    let mut out = Vec::new();
    for (lb, vpc) in describe::load_balancers_in(c, vpcs).await? {
        out.push(blocker("elasticloadbalancing", "load-balancer", &lb, &vpc));
    }
    for i in instances::live_instances(c, vec![in_vpcs()]).await? {
        if let Some(vpc) = &i.vpc {
            out.push(blocker("ec2", "instance", &i.id, vpc));
        }
    }
    // NAT gateways: another owner's is a blocker; every one's interface is the gateway's, not
    // a leftover (LocalStack reports it `available`).
    let nats = call("ec2.DescribeNatGateways", || {
        c.ec2.describe_nat_gateways().filter(in_vpcs()).send()
    })
    .await
    .map_err(CleanError::discover("nat-gateway", "DescribeNatGateways"))?;
    let mut nat_enis = std::collections::HashSet::new();
    for n in nats.nat_gateways() {
        nat_enis.extend(
            n.nat_gateway_addresses()
                .iter()
                .filter_map(|a| a.network_interface_id()),
        );
        let live = !matches!(n.state().map(|s| s.as_str()), Some("deleted"));
        if live
            && !tags::is_owned(tags::ec2_pairs(n.tags()), &capa)
            && let (Some(id), Some(vpc)) = (n.nat_gateway_id(), n.vpc_id())
        {
            out.push(blocker("ec2", "nat-gateway", id, vpc));
        }
    }
    let enis = describe::detached_network_interfaces(c, vec![in_vpcs()]).await?;
    for n in &enis {
        if let (Some(id), Some(vpc)) = (n.network_interface_id(), n.vpc_id())
            && !nat_enis.contains(id)
        {
            out.push(blocker("ec2", "network-interface", id, vpc));
        }
    }
    for g in describe::security_groups(c, vec![in_vpcs()]).await? {
        let capa_owned = tags::is_owned(tags::ec2_pairs(g.tags()), &capa);
        if g.group_name() == Some("default") || capa_owned {
            continue;
        }
        if let (Some(id), Some(vpc)) = (g.group_id(), g.vpc_id()) {
            out.push(blocker("ec2", "security-group", id, vpc));
        }
    }
    // VPC endpoints: CAPA's go in this phase (vpc_endpoints.rs); another's keeps the VPC.
    let endpoints = call("ec2.DescribeVpcEndpoints", || {
        c.ec2.describe_vpc_endpoints().filters(in_vpcs()).send()
    })
    .await
    .map_err(CleanError::discover("vpc-endpoint", "DescribeVpcEndpoints"))?;
    for e in endpoints.vpc_endpoints() {
        let gone = super::vpc_endpoints::is_gone(e.state().map(|s| s.as_str()));
        if gone || tags::is_owned(tags::ec2_pairs(e.tags()), &capa) {
            continue;
        }
        if let (Some(id), Some(vpc)) = (e.vpc_endpoint_id(), e.vpc_id()) {
            out.push(blocker("ec2", "vpc-endpoint", id, vpc));
        }
    }
    let subnets = call("ec2.DescribeSubnets", || {
        c.ec2.describe_subnets().filters(in_vpcs()).send()
    })
    .await
    .map_err(CleanError::discover("subnet", "DescribeSubnets"))?;
    for s in subnets.subnets() {
        if tags::is_owned(tags::ec2_pairs(s.tags()), &capa) {
            continue;
        }
        if let (Some(id), Some(vpc)) = (s.subnet_id(), s.vpc_id()) {
            out.push(blocker("ec2", "subnet", id, vpc));
        }
    }
    Ok(out)
}

#[async_trait]
impl Cleaner for Vpcs {
    type Detail = ();

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        70
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        Ok(ctx
            .vpc_ids
            .iter()
            .map(|v| Target::plain(v.clone()))
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.DeleteVpc", || {
            ctx.clients.ec2.delete_vpc().vpc_id(&t.id).send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteVpc")
    }
}
