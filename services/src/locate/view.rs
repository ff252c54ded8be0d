//! One pass's shared listings: what several steps of a pass ask AWS alike, asked once. Phase 3's
//! blocker check lists everything in the CAPA-managed VPCs (NAT gateways, VPC endpoints,
//! subnets, security groups) and the region's load balancers; then the network's cleaners asked
//! for the same lists again with narrower filters (CAPA's tag, GuardDuty's name), and phase 2's
//! external-dns step described by ARN the load balancers phase 1 had just listed. Here each list
//! is described once per pass and every step filters the same answer itself, exactly as the
//! server's filter would (an exact tag pair, name or service name: EC2 matches filter values
//! exactly and case-sensitively, and none of these values holds a wildcard). Phase 1's tagging
//! query of what CAPA tagged (`locate::capa_tagged`) is held here too, for its four cleaners.
//!
//! Why this is safe: a [`PassView`] lives for one pass only (`phases::teardown_pass` makes a new
//! one), so every pass still derives its state from the world, and a resource created between
//! passes is seen by the next one. Within the pass, a list is served again only while nothing of
//! the pass could have changed it: as soon as a cleaner sends a delete of a kind, the phase
//! runner calls [`PassView::forget`] with its kind and the next step asks AWS again. What the
//! pass did not do itself (another controller's create in the seconds between two steps) is the
//! same race a fresh Describe has a moment after it answers. A failed listing is not kept.

use super::capa_tagged::{self, CapaTagged};
use super::describe::{self, ListedLb};
use super::tags;
use crate::errors::{CleanError, call};
use crate::model::AwsClients;
use aws_sdk_ec2::types::{NatGateway, SecurityGroup, Subnet, VpcEndpoint};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Mutex;

/// The (service, kind) whose deletes change each listing, as the cleaners' descriptors name
/// them: [`PassView::forget`] is called with a cleaner's descriptor's.
pub const NAT_GATEWAYS: (&str, &str) = ("ec2", "natgateway");
pub const VPC_ENDPOINTS: (&str, &str) = ("ec2", "vpc-endpoint");
pub const SUBNETS: (&str, &str) = ("ec2", "subnet");
pub const SECURITY_GROUPS: (&str, &str) = ("ec2", "security-group");
pub const LOAD_BALANCERS: (&str, &str) = ("elasticloadbalancing", "load-balancer");
pub const TARGET_GROUPS: (&str, &str) = ("elasticloadbalancing", "target-group");
pub const INSTANCES: (&str, &str) = ("ec2", "instance");
/// Every kind a listing here is forgotten for.
pub const KINDS: [(&str, &str); 7] = [
    INSTANCES,
    NAT_GATEWAYS,
    VPC_ENDPOINTS,
    SUBNETS,
    SECURITY_GROUPS,
    LOAD_BALANCERS,
    TARGET_GROUPS,
];

/// One listing: the VPCs it was described for (none for the region's load balancers; the CAPA
/// key for phase 1's tagging query) and its answer. Held across the fetch, so concurrent steps wait for the one Describe in flight.
type Slot<T> = Mutex<Option<(Vec<String>, Arc<Vec<T>>)>>;

/// The pass's listings, each described at most once until a delete of its kind.
#[derive(Debug, Default)]
pub struct PassView {
    nat_gateways: Slot<NatGateway>,
    vpc_endpoints: Slot<VpcEndpoint>,
    subnets: Slot<Subnet>,
    security_groups: Slot<SecurityGroup>,
    classic_lbs: Slot<ListedLb>,
    v2_lbs: Slot<ListedLb>,
    /// Phase 1's tagging query (`locate::capa_tagged`), for the CAPA key it holds: the load
    /// balancer and target group cleaners read the one answer, the instance and group cleaners
    /// their gate.
    capa_tagged: Slot<CapaTagged>,
    /// Listings described (not served from the view): what the tests count.
    described: AtomicUsize,
}

impl PassView {
    /// How many listings were described through this view.
    pub fn described(&self) -> usize {
        self.described.load(Ordering::Relaxed)
    }

    /// A cleaner of `(service, kind)` sent deletes: its listings may have changed.
    pub async fn forget(&self, service: &str, kind: &str) {
        match (service, kind) {
            NAT_GATEWAYS => *self.nat_gateways.lock().await = None,
            VPC_ENDPOINTS => *self.vpc_endpoints.lock().await = None,
            SUBNETS => *self.subnets.lock().await = None,
            SECURITY_GROUPS => {
                *self.security_groups.lock().await = None;
                *self.capa_tagged.lock().await = None;
            }
            INSTANCES => *self.capa_tagged.lock().await = None,
            LOAD_BALANCERS => {
                *self.classic_lbs.lock().await = None;
                *self.v2_lbs.lock().await = None;
                *self.capa_tagged.lock().await = None;
            }
            TARGET_GROUPS => *self.capa_tagged.lock().await = None,
            _ => {}
        }
    }

    /// The NAT gateways of `vpcs`, every state and owner.
    pub async fn nat_gateways(
        &self,
        c: &AwsClients,
        vpcs: &[String],
    ) -> Result<Arc<Vec<NatGateway>>, CleanError> {
        self.get(&self.nat_gateways, vpcs, || async {
            let out = call("ec2.DescribeNatGateways", || {
                c.ec2.describe_nat_gateways().filter(in_vpcs(vpcs)).send()
            })
            .await
            .map_err(CleanError::discover("nat-gateway", "DescribeNatGateways"))?;
            Ok(out.nat_gateways().to_vec())
        })
        .await
    }

    /// The VPC endpoints of `vpcs`, every state and owner.
    pub async fn vpc_endpoints(
        &self,
        c: &AwsClients,
        vpcs: &[String],
    ) -> Result<Arc<Vec<VpcEndpoint>>, CleanError> {
        self.get(&self.vpc_endpoints, vpcs, || async {
            let out = call("ec2.DescribeVpcEndpoints", || {
                c.ec2.describe_vpc_endpoints().filters(in_vpcs(vpcs)).send()
            })
            .await
            .map_err(CleanError::discover("vpc-endpoint", "DescribeVpcEndpoints"))?;
            Ok(out.vpc_endpoints().to_vec())
        })
        .await
    }

    /// The subnets of `vpcs`, every owner.
    pub async fn subnets(
        &self,
        c: &AwsClients,
        vpcs: &[String],
    ) -> Result<Arc<Vec<Subnet>>, CleanError> {
        self.get(&self.subnets, vpcs, || async {
            let out = call("ec2.DescribeSubnets", || {
                c.ec2.describe_subnets().filters(in_vpcs(vpcs)).send()
            })
            .await
            .map_err(CleanError::discover("subnet", "DescribeSubnets"))?;
            Ok(out.subnets().to_vec())
        })
        .await
    }

    /// The security groups of `vpcs` (all pages, rules and tags included), every owner.
    pub async fn security_groups(
        &self,
        c: &AwsClients,
        vpcs: &[String],
    ) -> Result<Arc<Vec<SecurityGroup>>, CleanError> {
        self.get(&self.security_groups, vpcs, || {
            describe::security_groups(c, vec![in_vpcs(vpcs)])
        })
        .await
    }

    /// The region's classic load balancers (name, VPC, DNS name), all pages.
    pub async fn classic_lbs(&self, c: &AwsClients) -> Result<Arc<Vec<ListedLb>>, CleanError> {
        self.get(&self.classic_lbs, &[], || describe::classic_listing(c))
            .await
    }

    /// The region's v2 load balancers (ARN, VPC, DNS name), all pages.
    pub async fn v2_lbs(&self, c: &AwsClients) -> Result<Arc<Vec<ListedLb>>, CleanError> {
        self.get(&self.v2_lbs, &[], || describe::v2_listing(c))
            .await
    }

    /// What CAPA tagged `capa_key=owned` of phase 1's kinds (one tagging query, see
    /// `locate::capa_tagged`); a failure is reported as `kind`'s, the cleaner asking.
    pub async fn capa_tagged(
        &self,
        c: &AwsClients,
        capa_key: &str,
        kind: &'static str,
    ) -> Result<Arc<Vec<CapaTagged>>, CleanError> {
        self.get(&self.capa_tagged, &[capa_key.to_string()], || {
            capa_tagged::query(c, capa_key, kind)
        })
        .await
    }

    /// The region's load balancers of both APIs (classic, v2) as far as this pass has listed them
    /// and no load balancer delete went out since; `None` for an API not at hand. For a step that
    /// reads a few of them and describes the rest by name itself.
    pub async fn held_lbs(&self) -> (Option<Arc<Vec<ListedLb>>>, Option<Arc<Vec<ListedLb>>>) {
        let classic = self
            .classic_lbs
            .lock()
            .await
            .as_ref()
            .map(|(_, l)| l.clone());
        let v2 = self.v2_lbs.lock().await.as_ref().map(|(_, l)| l.clone());
        (classic, v2)
    }

    /// The load balancers of both APIs whose VPC is one of `vpcs`: (classic name or v2 ARN, VPC).
    pub async fn load_balancers_in(
        &self,
        c: &AwsClients,
        vpcs: &[String],
    ) -> Result<Vec<(String, String)>, CleanError> {
        let (v2, classic) = (self.v2_lbs(c).await?, self.classic_lbs(c).await?);
        Ok(v2
            .iter()
            .chain(classic.iter())
            .filter_map(|l| {
                let vpc = l.vpc.as_ref().filter(|v| vpcs.contains(v))?;
                Some((l.id.clone(), vpc.clone()))
            })
            .collect())
    }

    /// `slot`'s listing for `vpcs`, described by `fetch` unless it holds one for them.
    async fn get<T, F, Fut>(
        &self,
        slot: &Slot<T>,
        vpcs: &[String],
        fetch: F,
    ) -> Result<Arc<Vec<T>>, CleanError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<T>, CleanError>>,
    {
        let mut held = slot.lock().await;
        if let Some((of, listed)) = held.as_ref()
            && of == vpcs
        {
            return Ok(listed.clone());
        }
        self.described.fetch_add(1, Ordering::Relaxed);
        let listed = Arc::new(fetch().await?);
        *held = Some((vpcs.to_vec(), listed.clone()));
        Ok(listed)
    }
}

fn in_vpcs(vpcs: &[String]) -> aws_sdk_ec2::types::Filter {
    tags::ec2_filter("vpc-id", vpcs)
}

/// True when `tags` carry exactly `key`=`value`: what the server's `tag:<key>` filter with the
/// one value matches.
pub fn tagged(tags: &[aws_sdk_ec2::types::Tag], key: &str, value: &str) -> bool {
    tags::ec2_pairs(tags).any(|(k, v)| k == key && v == value)
}
