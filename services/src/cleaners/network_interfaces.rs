//! Detached network interfaces that keep the cluster's security groups or subnets alive. Which
//! ones (detached, in a group phase 2 deletes or the VPC CNI's in the cluster's VPC; one in use
//! is never touched) is `policy::network_interfaces`'s, sent as the Describe's filters.

use super::security_groups;
use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, claim_into, settle};
use crate::errors::call;
use crate::locate::describe;
use crate::locate::inventory::Inventory;
use crate::locate::tagging::TaggedResource;
use crate::locate::tags;
use crate::model::{AwsClients, Phase};
use crate::policy::network_interfaces::asked_for;
use crate::policy::{Candidate, Ownership};
use async_trait::async_trait;
use std::collections::BTreeMap;

pub struct NetworkInterfaces;

const KIND: &str = "network-interface";

/// EC2 filters take at most 200 values.
const FILTER_CHUNK: usize = 200;

/// The VPC CNI's interfaces phase 2's locate step found (ids).
#[derive(Debug, Default)]
struct CniShare(Vec<String>);

/// Task `security-group`: they exist to be cleaned before the security groups (order 30 < 40);
/// selecting those selects these.
pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(security_groups::TASK),
    iam_actions: &[
        "ec2:DescribeNetworkInterfaces",
        "ec2:DeleteNetworkInterface",
    ],
    ..Descriptor::new("ec2", KIND, Phase::Tagged, 30)
};

#[async_trait]
impl Cleaner for NetworkInterfaces {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
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
            .filter(|n| {
                let tags: Vec<_> = tags::ec2_pairs(n.tag_set()).collect();
                let vpc = n.vpc_id();
                own.decide(&Candidate { tags: &tags, vpc }).is_delete()
            })
            .filter_map(|n| n.network_interface_id().map(str::to_string))
            .collect();
        inv.share_mut::<CniShare>().0.extend(found);
        Ok(())
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        let groups: Vec<String> = security_groups::tagged(ctx.inventory)
            .iter()
            .map(|(_, id)| id.clone())
            .collect();
        // The CNI's, if still detached (one attached since the scan is left to its owner).
        let cni = ctx
            .inventory
            .get::<CniShare>()
            .map_or(&[][..], |s| &s.0[..]);
        let mut ids: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        for (filter, values) in asked_for(&groups, cni) {
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

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::mocked::{self, CLUSTER, assert_calls, filter_is, mock};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::delete_network_interface::DeleteNetworkInterfaceOutput;
    use aws_sdk_ec2::operation::describe_network_interfaces::DescribeNetworkInterfacesOutput;
    use aws_sdk_ec2::types::NetworkInterface;

    fn eni(id: &str) -> NetworkInterface {
        NetworkInterface::builder()
            .network_interface_id(id)
            .vpc_id("vpc-1")
            .build()
    }

    fn tagged(arn: &str) -> TaggedResource {
        TaggedResource {
            arn: arn.parse().unwrap(),
            tags: Default::default(),
        }
    }

    #[tokio::test]
    async fn detached_interfaces_of_our_groups_and_the_cnis_are_asked_for_and_deleted() {
        let mut inv = Inventory::default();
        assert!(security_groups::SecurityGroups::TAGGED.claim(
            &tagged("arn:aws:ec2:us-east-1:0:security-group/sg-ours"),
            &mut inv
        ));
        assert!(NetworkInterfaces.claim(
            &tagged("arn:aws:ec2:us-east-1:0:network-interface/eni-cni"),
            &mut inv
        ));
        let by_group = mock!(Client::describe_network_interfaces)
            .match_requests(|r| {
                filter_is(r.filters(), "group-id", &["sg-ours"])
                    && filter_is(r.filters(), "status", &["available"])
                    && r.filters().len() == 2
            })
            .then_output(|| {
                DescribeNetworkInterfacesOutput::builder()
                    .network_interfaces(eni("eni-lb-left"))
                    .build()
            });
        // The CNI's: only if still detached (the status filter); one since attached is absent.
        let by_id = mock!(Client::describe_network_interfaces)
            .match_requests(|r| {
                filter_is(r.filters(), "network-interface-id", &["eni-cni"])
                    && filter_is(r.filters(), "status", &["available"])
            })
            .then_output(|| DescribeNetworkInterfacesOutput::builder().build());
        let delete = mock!(Client::delete_network_interface)
            .match_requests(|r| r.network_interface_id() == Some("eni-lb-left"))
            .then_output(|| DeleteNetworkInterfaceOutput::builder().build());
        let c = mocked::in_order(&[&by_group, &by_id, &delete]);
        let cx = ctx(&c, &inv);
        let found = NetworkInterfaces.discover(&cx).await.unwrap();
        assert_eq!(
            found.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["eni-lb-left"]
        );
        assert_eq!(
            NetworkInterfaces.delete(&cx, &found[0]).await.unwrap(),
            Outcome::Deleted
        );
        assert_calls(&delete, 1, "DeleteNetworkInterface");
    }

    #[tokio::test]
    async fn alternative_discovery_asks_for_the_cnis_tag_in_the_clusters_vpcs_only() {
        let describe = mock!(Client::describe_network_interfaces)
            .match_requests(|r| {
                filter_is(r.filters(), "vpc-id", &["vpc-1"])
                    && filter_is(
                        r.filters(),
                        &format!("tag:{}", tags::CNI_CLUSTER_TAG),
                        &[CLUSTER],
                    )
                    && filter_is(r.filters(), "status", &["available"])
            })
            .then_output(|| {
                let cni = aws_sdk_ec2::types::Tag::builder()
                    .key(tags::CNI_CLUSTER_TAG)
                    .value(CLUSTER)
                    .build();
                DescribeNetworkInterfacesOutput::builder()
                    .network_interfaces(
                        NetworkInterface::builder()
                            .network_interface_id("eni-cni")
                            .vpc_id("vpc-1")
                            .tag_set(cni.clone())
                            .build(),
                    )
                    // Answered from another VPC (a server ignoring the filter): not ours.
                    .network_interfaces(
                        NetworkInterface::builder()
                            .network_interface_id("eni-twin")
                            .vpc_id("vpc-2")
                            .tag_set(cni)
                            .build(),
                    )
                    .build()
            });
        let c = mocked::in_order(&[&describe]);
        let mut inv = Inventory::default();
        let own = Ownership::of(CLUSTER).with_vpcs(vec!["vpc-1".into()]);
        NetworkInterfaces
            .describe_owned(&c, &own, &mut inv)
            .await
            .unwrap();
        assert_eq!(inv.get::<CniShare>().unwrap().0, ["eni-cni"]);
        // No VPC known: nothing is asked, nothing taken.
        let none = mocked::no_calls();
        let mut inv = Inventory::default();
        NetworkInterfaces
            .describe_owned(&none, &Ownership::of(CLUSTER), &mut inv)
            .await
            .unwrap();
        assert!(inv.get::<CniShare>().is_none());
    }
}
