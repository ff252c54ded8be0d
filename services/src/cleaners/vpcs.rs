//! Phase 3's gate and last step: the VPC is ours only when it carries the CAPA-owned tag. A
//! bring-your-own VPC (untagged, or tagged for another owner) is never discovered, so nothing in
//! it is touched by phase 3. Before phase 3 touches a VPC, `vpc_blockers::blockers` lists what in
//! it is not ours and would keep it from being deleted: phase 3 then waits, deleting none of it.

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::tags;
use crate::model::{AwsClients, Phase};
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

/// Last of phase 3 (order 70). Its targets are the pass's CAPA-managed VPCs (`capa_vpcs`, asked
/// for by the pass, see `phases::PASS_IAM_ACTIONS`), so it calls only the delete.
pub const DESCRIPTOR: Descriptor = Descriptor {
    iam_actions: &["ec2:DeleteVpc"],
    ..Descriptor::new("ec2", KIND, Phase::Network, 70)
};

#[async_trait]
impl Cleaner for Vpcs {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
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

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, assert_calls, filter_is, mock};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::delete_vpc::DeleteVpcOutput;
    use aws_sdk_ec2::operation::describe_vpcs::DescribeVpcsOutput;
    use aws_sdk_ec2::types::Vpc;

    #[tokio::test]
    async fn a_vpc_is_the_clusters_only_by_capas_owned_tag() {
        let describe = mock!(Client::describe_vpcs)
            .match_requests(|r| {
                filter_is(r.filters(), &format!("tag:{CAPA_KEY}"), &["owned"])
                    && r.filters().len() == 1
            })
            .then_output(|| {
                DescribeVpcsOutput::builder()
                    .vpcs(Vpc::builder().vpc_id("vpc-1").build())
                    .build()
            });
        let c = mocked::in_order(&[&describe]);
        assert_eq!(capa_vpcs(&c, "c1").await.unwrap(), ["vpc-1"]);
    }

    #[tokio::test]
    async fn the_vpcs_are_the_contexts_and_each_is_deleted_by_id() {
        let delete = mock!(Client::delete_vpc)
            .match_requests(|r| r.vpc_id() == Some("vpc-1"))
            .then_output(|| DeleteVpcOutput::builder().build());
        let c = mocked::in_order(&[&delete]);
        let inv = Inventory::default();
        let vpcs = ["vpc-1".to_string()];
        let cx = CleanCtx {
            vpc_ids: &vpcs,
            ..ctx(&c, &inv)
        };
        let found = Vpcs.discover(&cx).await.unwrap();
        assert_eq!(found, [Target::plain("vpc-1")]);
        assert_eq!(Vpcs.delete(&cx, &found[0]).await.unwrap(), Outcome::Deleted);
        assert_calls(&delete, 1, "DeleteVpc");
    }
}
