//! Phase 3: Elastic IPs of the cluster's NAT gateways: those CAPA tagged for the cluster plus
//! those the VPC's CAPA-tagged NAT gateways (in any state, deleted included) hold. Released once no live NAT
//! gateway holds them; while one does, they are reported waiting (`policy::network::elastic_ip`).

use super::vpc_owned::{InVpcs, before_delete};
use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::tags;
use crate::model::Phase;
use crate::policy::network as policy;
use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};

pub struct Addresses;

/// What a release needs beyond the allocation id.
#[derive(Clone, Debug, PartialEq)]
pub struct Address {
    pub allocation_id: String,
    /// An association left on the address by a NAT gateway that is already deleted (LocalStack
    /// keeps it), removed before the release.
    pub stale_association: Option<String>,
}

const KIND: &str = "elastic-ip";

/// After the NAT gateways that hold them (order 20).
pub const DESCRIPTOR: Descriptor = Descriptor {
    iam_actions: &[
        // The NAT gateways' allocations, then the addresses.
        "ec2:DescribeNatGateways",
        "ec2:DescribeAddresses",
        "ec2:DisassociateAddress",
        "ec2:ReleaseAddress",
    ],
    ..Descriptor::new("ec2", KIND, Phase::Network, 20)
};

#[async_trait]
impl Cleaner for Addresses {
    type Detail = Address;

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Address>>, CleanError> {
        let Some(at) = InVpcs::of(ctx) else {
            return Ok(Vec::new());
        };
        // The VPCs' gateways as the pass listed them, CAPA's taken here; described again if a
        // NAT gateway delete went out since (the runner forgets the list: `locate::view`).
        let nats = ctx.view.nat_gateways(ctx.clients, at.vpcs).await?;
        // allocation id -> is its NAT gateway gone?
        let mut nat_of: HashMap<String, bool> = HashMap::new();
        for n in nats.iter().filter(|n| at.is_capas(n.tags())) {
            let gone = n.state().map(|s| s.as_str()) == Some("deleted");
            for a in n.nat_gateway_addresses() {
                if let Some(id) = a.allocation_id() {
                    let e = nat_of.entry(id.to_string()).or_insert(true);
                    *e = *e && gone;
                }
            }
        }
        let mut filters = vec![vec![at.capa_owned()]];
        if !nat_of.is_empty() {
            let ids: Vec<String> = nat_of.keys().cloned().collect();
            filters.push(vec![tags::ec2_filter("allocation-id", &ids)]);
        }
        let mut found = BTreeMap::new();
        for f in filters {
            let out = call("ec2.DescribeAddresses", || {
                at.ec2
                    .describe_addresses()
                    .set_filters(Some(f.clone()))
                    .send()
            })
            .await
            .map_err(CleanError::discover(KIND, "DescribeAddresses"))?;
            for a in out.addresses() {
                if let Some(id) = a.allocation_id() {
                    let tags: Vec<(String, String)> = tags::ec2_pairs(a.tags())
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    found.insert(
                        id.to_string(),
                        (a.association_id().map(str::to_string), tags),
                    );
                }
            }
        }
        Ok(found
            .into_iter()
            .filter_map(|(allocation_id, (assoc, tags))| {
                let nat_gone = nat_of.get(&allocation_id).copied();
                let (verdict, stale) = policy::elastic_ip(assoc.as_deref(), nat_gone);
                let t = Target::new(
                    allocation_id.clone(),
                    Address {
                        allocation_id,
                        stale_association: stale.map(str::to_string),
                    },
                )
                .with_tags(tags.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                t.judged(verdict)
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<Address>) -> Result<Outcome, CleanError> {
        let ec2 = &ctx.clients.ec2;
        let Address {
            allocation_id,
            stale_association,
        } = &t.detail;
        if let Some(assoc) = stale_association {
            let res = call("ec2.DisassociateAddress", || {
                ec2.disassociate_address().association_id(assoc).send()
            })
            .await;
            if let Some(wait) = before_delete(res, KIND, &t.id, "DisassociateAddress")? {
                return Ok(wait);
            }
        }
        let res = call("ec2.ReleaseAddress", || {
            ec2.release_address().allocation_id(allocation_id).send()
        })
        .await;
        settle(res, KIND, &t.id, "ReleaseAddress")
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::cleaners::{CleanCtx, Cleaner};
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, assert_calls, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::describe_addresses::DescribeAddressesOutput;
    use aws_sdk_ec2::operation::describe_nat_gateways::DescribeNatGatewaysOutput;
    use aws_sdk_ec2::operation::disassociate_address::DisassociateAddressOutput;
    use aws_sdk_ec2::operation::release_address::ReleaseAddressOutput;
    use aws_sdk_ec2::types::{Address as Eip, NatGateway, NatGatewayAddress, NatGatewayState};

    fn nat(state: &str, allocation: &str) -> NatGateway {
        NatGateway::builder()
            .nat_gateway_id(format!("nat-{allocation}"))
            .state(NatGatewayState::from(state))
            .tags(tag(CAPA_KEY, "owned"))
            .nat_gateway_addresses(
                NatGatewayAddress::builder()
                    .allocation_id(allocation)
                    .build(),
            )
            .build()
    }

    fn eip(allocation: &str, association: Option<&str>) -> Eip {
        Eip::builder()
            .allocation_id(allocation)
            .set_association_id(association.map(str::to_string))
            .build()
    }

    #[tokio::test]
    async fn without_a_capa_managed_vpc_nothing_is_asked() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        assert!(Addresses.discover(&ctx(&c, &inv)).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn capa_tagged_and_nat_held_addresses_are_found_and_a_live_nats_address_waits() {
        // The VPC's gateways, every owner's (the pass's one listing, `locate::view`): another
        // owner's gateway's address is never asked for, CAPA's are.
        let nats = mock!(Client::describe_nat_gateways)
            .match_requests(|r| {
                filter_is(r.filter(), "vpc-id", &["vpc-1"]) && r.filter().len() == 1
            })
            .then_output(|| {
                let theirs = NatGateway::builder()
                    .nat_gateway_id("nat-theirs")
                    .state(NatGatewayState::Available)
                    .nat_gateway_addresses(
                        NatGatewayAddress::builder()
                            .allocation_id("eipalloc-theirs")
                            .build(),
                    )
                    .build();
                DescribeNatGatewaysOutput::builder()
                    .nat_gateways(nat("available", "eipalloc-live"))
                    .nat_gateways(nat("deleted", "eipalloc-stale"))
                    .nat_gateways(theirs)
                    .build()
            });
        let tagged = mock!(Client::describe_addresses)
            .match_requests(|r| {
                filter_is(r.filters(), &format!("tag:{CAPA_KEY}"), &["owned"])
                    && r.filters().len() == 1
            })
            .then_output(|| {
                DescribeAddressesOutput::builder()
                    .addresses(
                        Eip::builder()
                            .allocation_id("eipalloc-free")
                            .tags(tag(CAPA_KEY, "owned"))
                            .build(),
                    )
                    .build()
            });
        let held = mock!(Client::describe_addresses)
            .match_requests(|r| {
                let f = r.filters();
                f.len() == 1
                    && f[0].name() == Some("allocation-id")
                    && f[0].values().len() == 2
                    && f[0].values().iter().any(|v| v == "eipalloc-live")
                    && f[0].values().iter().any(|v| v == "eipalloc-stale")
            })
            .then_output(|| {
                DescribeAddressesOutput::builder()
                    .addresses(eip("eipalloc-live", Some("eipassoc-live")))
                    .addresses(eip("eipalloc-stale", Some("eipassoc-stale")))
                    .build()
            });
        let c = mocked::in_order(&[&nats, &tagged, &held]);
        let inv = Inventory::default();
        let vpcs = ["vpc-1".to_string()];
        let cx = CleanCtx {
            vpc_ids: &vpcs,
            ..ctx(&c, &inv)
        };
        let found = Addresses.discover(&cx).await.unwrap();
        let seen: Vec<(&str, bool, Option<&str>)> = found
            .iter()
            .map(|t| {
                (
                    t.id.as_str(),
                    t.blocked.is_some(),
                    t.detail.stale_association.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("eipalloc-free", false, None),
                ("eipalloc-live", true, None),
                ("eipalloc-stale", false, Some("eipassoc-stale")),
            ]
        );
        assert_calls(&held, 1, "DescribeAddresses by allocation");
    }

    #[tokio::test]
    async fn a_stale_association_is_removed_before_the_release() {
        let disassociate = mock!(Client::disassociate_address)
            .match_requests(|r| r.association_id() == Some("eipassoc-stale"))
            .then_output(|| DisassociateAddressOutput::builder().build());
        let release = mock!(Client::release_address)
            .match_requests(|r| r.allocation_id() == Some("eipalloc-1"))
            .then_output(|| ReleaseAddressOutput::builder().build());
        let c = mocked::in_order(&[&disassociate, &release]);
        let inv = Inventory::default();
        let t = Target::new(
            "eipalloc-1",
            Address {
                allocation_id: "eipalloc-1".into(),
                stale_association: Some("eipassoc-stale".into()),
            },
        );
        assert_eq!(
            Addresses.delete(&ctx(&c, &inv), &t).await.unwrap(),
            Outcome::Deleted
        );
        assert_calls(&release, 1, "ReleaseAddress");
    }
}
