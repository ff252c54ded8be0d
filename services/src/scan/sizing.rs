//! What the cost model needs beyond an ARN (a volume's size and type, a snapshot's size, an
//! endpoint's type and subnets) and the creation times AWS gives, for the candidates' resources
//! only: a live cluster's resources are never described. The ids go to the server as a filter
//! in chunks (a filter, unlike an id list, does not fail the whole call for one id gone since the
//! listing), so the calls grow with the candidates' volumes, not with the clusters.
//!
//! Instances and NAT gateways are described for another reason: EC2 keeps a terminated
//! instance and a deleted NAT gateway visible, tags and all, for about an hour, and the tagging
//! API still lists them. Such a resource is [`Described::gone`]: the scan drops it, so a cluster
//! just torn down is not reported as an orphan for what no longer exists.

use super::prices::Sizing;
use crate::errors::{ApiFailure, call};
use crate::locate::describe::all_pages;
use crate::locate::tags::ec2_filter;
use crate::model::AwsClients;
use std::collections::BTreeMap;

/// Ids per describe: within every EC2 filter's limit (200 values).
const CHUNK: usize = 200;

/// One resource's sizing and creation time (seconds since the epoch).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Described {
    pub sizing: Sizing,
    pub created: Option<i64>,
    /// Terminated (shutting down) or deleted (deleting): still listed, no longer there.
    pub gone: bool,
    /// The EC2 state the describe read (volumes, instances): the teardown's rules read it too
    /// (`deleted_by`).
    pub state: Option<String>,
    /// The VPC an instance runs in: one the teardown keeps holds CAPA's network (phase 3 waits).
    pub vpc: Option<String>,
}

/// The describes' answers by resource id, and the calls made.
#[derive(Debug, Default)]
pub struct Sized {
    pub by_id: BTreeMap<String, Described>,
    pub calls: BTreeMap<&'static str, usize>,
}

/// The candidates' resource ids, by the kind a describe reads.
#[derive(Debug, Default)]
pub struct Ids {
    pub volumes: Vec<String>,
    pub snapshots: Vec<String>,
    pub endpoints: Vec<String>,
    pub instances: Vec<String>,
    pub nat_gateways: Vec<String>,
}

/// Every page of `page` for each chunk of `ids`, into `out`: the described resources, and the
/// pages read counted under `op` (what the mocked tests pin).
async fn chunked<'a, F, Fut>(
    op: &'static str,
    ids: &'a [String],
    out: &mut Sized,
    page: F,
) -> Result<(), ApiFailure>
where
    F: Fn(&'a [String], Option<String>) -> Fut,
    Fut: std::future::Future<Output = PageOf>,
{
    for chunk in ids.chunks(CHUNK) {
        let mut pages = 0;
        let found = all_pages(|token| {
            pages += 1;
            page(chunk, token)
        })
        .await?;
        *out.calls.entry(op).or_default() += pages;
        out.by_id.extend(found);
    }
    Ok(())
}

/// One describe page: the resources it described, by id, and the next token.
type PageOf = Result<(Vec<(String, Described)>, Option<String>), ApiFailure>;

/// Describes the candidates' resources (`ids`) in the session's region: one describe per kind,
/// in this order (the mocked tests pin it).
pub async fn describe(c: &AwsClients, ids: &Ids) -> Result<Sized, ApiFailure> {
    let mut out = Sized::default();
    describe_volumes(c, &ids.volumes, &mut out).await?;
    describe_snapshots(c, &ids.snapshots, &mut out).await?;
    describe_endpoints(c, &ids.endpoints, &mut out).await?;
    describe_instances(c, &ids.instances, &mut out).await?;
    describe_nat_gateways(c, &ids.nat_gateways, &mut out).await?;
    Ok(out)
}

/// Volumes: size and type (the cost model's), creation time.
async fn describe_volumes(
    c: &AwsClients,
    ids: &[String],
    out: &mut Sized,
) -> Result<(), ApiFailure> {
    chunked("ec2.DescribeVolumes", ids, out, |ids, token| async move {
        let page = call("ec2.DescribeVolumes", || {
            c.ec2
                .describe_volumes()
                .filters(ec2_filter("volume-id", ids))
                .set_next_token(token.clone())
                .send()
        })
        .await?;
        let found = page.volumes().iter().filter_map(|v| {
            let described = Described {
                sizing: Sizing {
                    size_gib: v.size().map(i64::from),
                    volume_type: v.volume_type().map(|t| t.as_str().to_string()),
                    ..Default::default()
                },
                created: v.create_time().map(|t| t.secs()),
                gone: false,
                state: v.state().map(|s| s.as_str().to_string()),
                vpc: None,
            };
            Some((v.volume_id()?.to_string(), described))
        });
        Ok((found.collect(), page.next_token().map(str::to_string)))
    })
    .await
}

/// Snapshots: size, start time; the account's own only.
async fn describe_snapshots(
    c: &AwsClients,
    ids: &[String],
    out: &mut Sized,
) -> Result<(), ApiFailure> {
    chunked("ec2.DescribeSnapshots", ids, out, |ids, token| async move {
        let page = call("ec2.DescribeSnapshots", || {
            c.ec2
                .describe_snapshots()
                // The account's own: without it EC2 searches every public snapshot too.
                .owner_ids("self")
                .filters(ec2_filter("snapshot-id", ids))
                .set_next_token(token.clone())
                .send()
        })
        .await?;
        let found = page.snapshots().iter().filter_map(|s| {
            let described = Described {
                sizing: Sizing {
                    size_gib: s.volume_size().map(i64::from),
                    ..Default::default()
                },
                created: s.start_time().map(|t| t.secs()),
                gone: false,
                state: None,
                vpc: None,
            };
            Some((s.snapshot_id()?.to_string(), described))
        });
        Ok((found.collect(), page.next_token().map(str::to_string)))
    })
    .await
}

/// VPC endpoints: type and subnet count (an interface endpoint is priced per subnet).
async fn describe_endpoints(
    c: &AwsClients,
    ids: &[String],
    out: &mut Sized,
) -> Result<(), ApiFailure> {
    chunked(
        "ec2.DescribeVpcEndpoints",
        ids,
        out,
        |ids, token| async move {
            let page = call("ec2.DescribeVpcEndpoints", || {
                c.ec2
                    .describe_vpc_endpoints()
                    .filters(ec2_filter("vpc-endpoint-id", ids))
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            let found = page.vpc_endpoints().iter().filter_map(|e| {
                let described = Described {
                    sizing: Sizing {
                        endpoint_type: e.vpc_endpoint_type().map(|t| t.as_str().to_string()),
                        endpoint_subnets: Some(e.subnet_ids().len()),
                        ..Default::default()
                    },
                    created: e.creation_timestamp().map(|t| t.secs()),
                    gone: false,
                    state: None,
                    vpc: None,
                };
                Some((e.vpc_endpoint_id()?.to_string(), described))
            });
            Ok((found.collect(), page.next_token().map(str::to_string)))
        },
    )
    .await
}

/// Instances: launch time, and whether one is gone ([`instance_gone`]).
async fn describe_instances(
    c: &AwsClients,
    ids: &[String],
    out: &mut Sized,
) -> Result<(), ApiFailure> {
    chunked("ec2.DescribeInstances", ids, out, |ids, token| async move {
        let page = call("ec2.DescribeInstances", || {
            c.ec2
                .describe_instances()
                .filters(ec2_filter("instance-id", ids))
                .set_next_token(token.clone())
                .send()
        })
        .await?;
        let found = page
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(|i| {
                let described = Described {
                    sizing: Sizing::default(),
                    created: i.launch_time().map(|t| t.secs()),
                    gone: instance_gone(i.state().and_then(|s| s.name())),
                    state: i
                        .state()
                        .and_then(|s| s.name())
                        .map(|n| n.as_str().to_string()),
                    vpc: i.vpc_id().map(str::to_string),
                };
                Some((i.instance_id()?.to_string(), described))
            });
        Ok((found.collect(), page.next_token().map(str::to_string)))
    })
    .await
}

/// NAT gateways: creation time, and whether one is gone ([`nat_gateway_gone`]).
async fn describe_nat_gateways(
    c: &AwsClients,
    ids: &[String],
    out: &mut Sized,
) -> Result<(), ApiFailure> {
    chunked(
        "ec2.DescribeNatGateways",
        ids,
        out,
        |ids, token| async move {
            let page = call("ec2.DescribeNatGateways", || {
                c.ec2
                    .describe_nat_gateways()
                    .filter(ec2_filter("nat-gateway-id", ids))
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            let found = page.nat_gateways().iter().filter_map(|n| {
                let described = Described {
                    sizing: Sizing::default(),
                    created: n.create_time().map(|t| t.secs()),
                    gone: nat_gateway_gone(n.state()),
                    state: None,
                    vpc: None,
                };
                Some((n.nat_gateway_id()?.to_string(), described))
            });
            Ok((found.collect(), page.next_token().map(str::to_string)))
        },
    )
    .await
}

/// A terminated or shutting-down instance is still listed for about an hour: no longer there.
fn instance_gone(state: Option<&aws_sdk_ec2::types::InstanceStateName>) -> bool {
    use aws_sdk_ec2::types::InstanceStateName as S;
    matches!(state, Some(S::Terminated | S::ShuttingDown))
}

/// A deleted or deleting NAT gateway is still listed for about an hour: no longer there.
fn nat_gateway_gone(state: Option<&aws_sdk_ec2::types::NatGatewayState>) -> bool {
    use aws_sdk_ec2::types::NatGatewayState as S;
    matches!(state, Some(S::Deleted | S::Deleting))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{InstanceStateName as I, NatGatewayState as N};

    #[test]
    fn only_terminated_or_shutting_down_instances_are_gone() {
        let table = [
            (None, false),
            (Some(I::Pending), false),
            (Some(I::Running), false),
            (Some(I::Stopping), false),
            (Some(I::Stopped), false),
            (Some(I::ShuttingDown), true),
            (Some(I::Terminated), true),
        ];
        for (state, gone) in table {
            assert_eq!(instance_gone(state.as_ref()), gone, "{state:?}");
        }
    }

    #[test]
    fn only_deleted_or_deleting_nat_gateways_are_gone() {
        let table = [
            (None, false),
            (Some(N::Pending), false),
            (Some(N::Available), false),
            (Some(N::Failed), false),
            (Some(N::Deleting), true),
            (Some(N::Deleted), true),
        ];
        for (state, gone) in table {
            assert_eq!(nat_gateway_gone(state.as_ref()), gone, "{state:?}");
        }
    }
}
