//! Phase 3: Elastic IPs of the cluster's NAT gateways: those CAPA tagged for the cluster plus
//! those the VPC's CAPA-tagged NAT gateways (in any state, deleted included) hold. Released once no live NAT
//! gateway holds them; while one does, they are reported waiting.

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::aws::discovery::tags;
use crate::aws::errors::call;
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

#[async_trait]
impl Cleaner for Addresses {
    type Detail = Address;

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        20
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        // Only with a CAPA-managed VPC: EIPs belong to the network phase.
        if ctx.vpc_ids.is_empty() {
            return Ok(Vec::new());
        }
        let nats = call("ec2.DescribeNatGateways", || {
            ctx.clients
                .ec2
                .describe_nat_gateways()
                .filter(tags::ec2_filter("vpc-id", ctx.vpc_ids))
                .filter(tags::ec2_tag_filter(&ctx.capa_key(), tags::OWNED))
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeNatGateways"))?;
        // allocation id -> is its NAT gateway gone?
        let mut nat_of: HashMap<String, bool> = HashMap::new();
        for n in nats.nat_gateways() {
            let gone = n.state().map(|s| s.as_str()) == Some("deleted");
            for a in n.nat_gateway_addresses() {
                if let Some(id) = a.allocation_id() {
                    let e = nat_of.entry(id.to_string()).or_insert(true);
                    *e = *e && gone;
                }
            }
        }
        let mut filters = vec![vec![tags::ec2_tag_filter(&ctx.capa_key(), tags::OWNED)]];
        if !nat_of.is_empty() {
            let ids: Vec<String> = nat_of.keys().cloned().collect();
            filters.push(vec![tags::ec2_filter("allocation-id", &ids)]);
        }
        let mut found = BTreeMap::new();
        for f in filters {
            let out = call("ec2.DescribeAddresses", || {
                ctx.clients
                    .ec2
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
            .map(|(allocation_id, (assoc, tags))| {
                let nat_gone = nat_of.get(&allocation_id).copied();
                let (blocked, stale_association) = match (assoc, nat_gone) {
                    (None, _) => (None, None),
                    (Some(a), Some(true)) => (None, Some(a)),
                    (Some(a), _) => (
                        Some(format!(
                            "still associated ({a}); waiting for its NAT gateway"
                        )),
                        None,
                    ),
                };
                let mut t = Target::new(
                    allocation_id.clone(),
                    Address {
                        allocation_id,
                        stale_association,
                    },
                )
                .with_tags(tags.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                t.blocked = blocked;
                t
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<Address>) -> Result<Outcome, CleanError> {
        let Address {
            allocation_id,
            stale_association,
        } = &t.detail;
        if let Some(assoc) = stale_association {
            let res = call("ec2.DisassociateAddress", || {
                ctx.clients
                    .ec2
                    .disassociate_address()
                    .association_id(assoc)
                    .send()
            })
            .await;
            if let Outcome::Remaining(r) = settle(res, KIND, &t.id, "DisassociateAddress")? {
                return Ok(Outcome::Remaining(r));
            }
        }
        let res = call("ec2.ReleaseAddress", || {
            ctx.clients
                .ec2
                .release_address()
                .allocation_id(allocation_id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "ReleaseAddress")
    }
}
