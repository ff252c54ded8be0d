//! Detached (`available`) network interfaces that keep the cluster's security groups or subnets
//! alive: those in the cluster's security groups (left by deleted load balancers or nodes), and
//! those the VPC CNI tagged `cluster.k8s.amazonaws.com/name=<name>` in the cluster's VPC (the
//! discovery confirmed the VPC). An interface in use is never touched: it goes with its owner.

use super::security_groups;
use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, claim_into, settle};
use crate::aws::discovery::describe;
use crate::aws::discovery::inventory::{Inventory, Ownership};
use crate::aws::discovery::tagging::TaggedResource;
use crate::aws::discovery::tags;
use crate::aws::errors::call;
use crate::aws::model::{AwsClients, GcTask};
use async_trait::async_trait;
use std::collections::BTreeMap;

pub struct NetworkInterfaces;

const KIND: &str = "network-interface";

/// EC2 filters take at most 200 values.
const FILTER_CHUNK: usize = 200;

/// The VPC CNI's interfaces phase 2's discovery found (ids).
#[derive(Debug, Default)]
struct CniShare(Vec<String>);

#[async_trait]
impl Cleaner for NetworkInterfaces {
    type Detail = ();

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        30
    }
    // They exist to be cleaned before the security groups; selecting those selects these.
    fn task(&self) -> Option<GcTask> {
        Some(security_groups::TASK)
    }

    fn claim(&self, r: &TaggedResource, inv: &mut Inventory) -> bool {
        claim_into(
            r,
            inv,
            ("ec2", "network-interface"),
            |s: &mut CniShare, r| s.0.push(r.arn.resource_id().to_string()),
        )
    }

    async fn describe_owned(
        &self,
        c: &AwsClients,
        own: &Ownership,
        inv: &mut Inventory,
    ) -> Result<(), CleanError> {
        if own.vpcs().is_empty() {
            return Ok(());
        }
        let filters = vec![
            tags::ec2_filter("vpc-id", own.vpcs()),
            tags::ec2_tag_filter(tags::CNI_CLUSTER_TAG, own.cluster()),
        ];
        let found: Vec<String> = describe::detached_network_interfaces(c, filters)
            .await?
            .iter()
            .filter(|n| own.accepts(tags::ec2_pairs(n.tag_set()), n.vpc_id()))
            .filter_map(|n| n.network_interface_id().map(str::to_string))
            .collect();
        inv.share_mut::<CniShare>().0.extend(found);
        Ok(())
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        let groups: Vec<String> = security_groups::external(ctx.inventory)
            .iter()
            .map(|(_, id)| id.clone())
            .collect();
        // The CNI's, if still detached (one attached since the scan is left to its owner).
        let cni = ctx
            .inventory
            .get::<CniShare>()
            .map_or(&[][..], |s| &s.0[..]);
        let mut ids: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        for (filter, values) in [("group-id", &groups[..]), ("network-interface-id", cni)] {
            for chunk in values.chunks(FILTER_CHUNK) {
                let filters = vec![tags::ec2_filter(filter, chunk)];
                ids.extend(
                    describe::detached_network_interfaces(ctx.clients, filters)
                        .await?
                        .iter()
                        .filter_map(|n| {
                            let tags = tags::ec2_pairs(n.tag_set())
                                .map(|(k, v)| (k.to_string(), v.to_string()))
                                .collect();
                            Some((n.network_interface_id()?.to_string(), tags))
                        }),
                );
            }
        }
        Ok(ids
            .into_iter()
            .map(|(id, tags)| {
                Target::plain(id).with_tags(tags.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.DeleteNetworkInterface", || {
            ctx.clients
                .ec2
                .delete_network_interface()
                .network_interface_id(&t.id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteNetworkInterface")
    }
}
