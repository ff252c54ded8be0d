//! **Why was this AWS resource deleted, or kept?** The answer lives here. Locating and the
//! cleaners gather facts (tags, VPC, attachments, the creator's marks, what AWS says of its
//! state); a pure `decide` per kind turns them into a [`Verdict`]; the cleaner then only carries
//! it out (describe, delete, wait). Each rule is table-tested here, without mocks.
//!
//! Which *cluster* is torn down at all (the opt-out annotation, the task selection, identities)
//! is the controller's question (`src/external/`), not this module's; which *cleaners* run is
//! `phases::registry`'s. This module decides about one resource at a time.
//!
//! | kind (task) | phase | deleted when | kept / blocked / foreign when | rule |
//! |---|---|---|---|---|
//! | every phase-2 kind | 2 | `kubernetes.io/cluster/N=owned`, or the LB controller's `elbv2.k8s.aws/cluster=N` / the VPC CNI's `cluster.k8s.amazonaws.com/name=N` in one of the cluster's VPCs | CAPA-owned: kept (phase 1 or 3's); `shared`, another cluster's, a controller's tag outside the cluster's VPCs: foreign | [`Ownership::decide`] |
//! | load balancers (`load-balancer`), target groups (`target-group`), launch templates (`launch-template`), detached network interfaces the VPC CNI tagged | 2 | the phase-2 rule | the phase-2 rule | [`Ownership::decide`] |
//! | detached network interfaces (with `security-group`) | 2 | detached (`available`), and in a security group phase 2 deletes or the VPC CNI's that the phase-2 rule confirmed | attached: never touched, it goes with its owner; anything else: not asked for | [`network_interfaces::asked_for`] (the Describe's filters) |
//! | target groups | 2 | the phase-2 rule | still attached to a load balancer that exists: blocked | [`target_groups::decide`] |
//! | security groups (`security-group`) | 2 | the phase-2 rule | EKS's cluster group (`aws:eks:cluster-name`): kept, EKS deletes it | [`security_groups::decide`] |
//! | EKS's cluster security group (`eks-security-group`) | 2 | EKS cluster, `aws:eks:cluster-name=<eksName>`, in the cluster's VPCs, no interface uses it, EKS says the cluster is gone | any check fails or errs: kept | [`security_groups::eks_candidate`] (the tags and VPC), [`security_groups::eks_group`] (EKS, then the interfaces) |
//! | a rule of a group sweeper keeps that names a group it deletes (with `security-group`, `eks-security-group`, and phase 1's): **revoked, that rule alone** | 1, 2 | the group it names is deleted in this pass, the rule is in another group of the account (its VPC or any other), the pair names no other account | a rule naming a group that stays: never touched; a group's rule naming itself: goes with it; another account's group: foreign | [`security_groups::referencing_rule`] |
//! | CAPA's load balancers and security groups | 1 | `sigs.k8s.io/cluster-api-provider-aws/cluster/N=owned` | a VPC's `default` group: kept; anything else: foreign | [`capa::decide`], [`security_groups::decide_capa`] |
//! | instances | 1 | CAPA's tag (the describe's filter) | `shutting-down`: blocked until terminated | [`instances::by_state`] |
//! | instances (`instance`) | 2 | the phase-2 rule | a member of an Auto Scaling group or EKS node group: kept, its group owns it; `shutting-down`: blocked | [`instances::decide`], [`instances::by_state`] |
//! | Karpenter's IAM instance profiles (`instance-profile`) | 2 | named `<cluster>_<hash>`, `kubernetes.io/cluster/N=owned`, `karpenter.k8s.aws/ec2nodeclass`, the session's region tag, the cluster's path or `/` | another region's twin, any other look-alike: foreign; a live instance runs with it: blocked | [`instance_profiles::decide`], [`instance_profiles::by_user`] |
//! | EBS volumes (`ebs-volume`, opt-in) | 2 | the CSI driver's `CSIVolumeName` and the cluster named in `KubernetesCluster` or `ebs.csi.aws.com/cluster-name`, `available` (the describe filters on it) | CAPA-owned: kept; no driver mark or another cluster: foreign | [`ebs::volume`] |
//! | EBS snapshots (`ebs-snapshot`, opt-in) | 2 | `kubernetes.io/cluster/N=owned` and the driver's `CSIVolumeSnapshotName` | CAPA-owned: kept; sweeper's own snapshots (neither tag): foreign | [`ebs::snapshot`] |
//! | external-dns's Route53 records (`dns-record`) | 2 | an `A`/`AAAA` alias or `CNAME` to one of phase 2's load balancers, with external-dns's TXT companion; the cluster names that owner id (never `default`), the load balancers go in this pass, no set identifier, the TXT sets hold only that owner's values, an older-format TXT set only with every record at its name | any of those fails: kept, reported (`gc plan`, audit, `ExternalDnsRecordsLeft`); anything else is not looked at | [`dns_records::fates`], [`dns_records::Allowed`] |
//! | EKS's control-plane log group (`eks-log-group`, opt-in) | 2 | EKS cluster, named exactly `/aws/eks/<eksName>/cluster`, no retention policy, no deletion protection, EKS says the cluster is gone | a prefix match, another cluster's, retention or protection set: foreign; EKS still reports the cluster, or cannot be asked: blocked | [`log_groups::decide`], [`log_groups::by_eks`] |
//! | EKS's IRSA OIDC provider (`oidc-provider`) | 2 | EKS cluster with an issuer CAPA recorded, the provider's URL is that issuer, `kubernetes.io/cluster/<eksName>=owned`, no live EKS cluster reports the issuer | no recorded issuer: not looked at; another issuer's, untagged, `shared`: foreign; a live cluster reports it, EKS cannot be asked, the issuer is another region's: blocked | [`oidc_providers::decide`], [`oidc_providers::by_use`] |
//! | CAPA's EventBridgeInstanceState queue `<N>-queue` and rule `<N>-ec2-rule` (`instance-state-queue`), untagged | 2 | both exist under the cluster's names, the rule's only target is that queue, the queue's policy is only CAPA's statement `CAPAEvents_<rule>_<queue>` naming the rule | anything else (a policy without CAPA's statement or with another, a rule targeting another queue or more, one alone): both kept, reported | [`instance_state::decide`] |
//! | CAPA's bootstrap data (`bootstrap-data`): Secrets Manager secrets `aws.cluster.x-k8s.io/<uuid>-<n>`, SSM parameters `/cluster.x-k8s.io/<uuid>/<n>` | 2 | exactly that name shape for its store and `sigs.k8s.io/cluster-api-provider-aws/cluster/N=owned` | CAPA's key on another name shape or not `owned`, `kubernetes.io/cluster/N=owned` without CAPA's key: kept, reported; another cluster's (`c10` for `c1` too), untagged: foreign | [`bootstrap_data::decide`] |
//! | CAPA's bootstrap data in S3 (`bootstrap-data-s3`): objects `control-plane/<machine>`, `node/<machine>`, `machine-pool/<pool>/<sha256>` in the bucket `spec.s3Bucket` names, and that bucket: **reported, never deleted** | 2 | never: CAPA writes the objects untagged and keyed by machine name only, and tags any bucket it is given (created or not) | an object in CAPA's layout, the bucket whatever its tags: kept, reported; any other key, any bucket the object does not name: not looked at | [`bootstrap_s3::decide_object`], [`bootstrap_s3::decide_bucket`] |
//! | phase 3's network: VPC endpoints, NAT gateways, Elastic IPs, internet gateways, route tables, subnets | 3 | in one of the cluster's CAPA-managed VPCs (CAPA-tagged), CAPA's tag (the server's filter); Elastic IPs: CAPA's tag or held by the VPC's CAPA-tagged NAT gateways | a NAT gateway or endpoint `deleting`, an Elastic IP still associated (unless only with deleted NAT gateways, whose stale association is removed first): blocked; one already deleted (endpoints: rejected, failed, expired too): no longer a target; the VPC's main route table: kept, it goes with the VPC; a bring-your-own VPC's: never asked for | [`capa::decide`] (as the filter), [`network::nat_gateway`], [`network::vpc_endpoint`], [`network::elastic_ip`], [`network::route_table`] |
//! | a bring-your-own network's `shared` tag (`shared-tag`): **untagged, never deleted** | 3 | a VPC, subnet or route table in the cluster's bring-your-own VPC (`spec.network.vpc.id`, not CAPA-tagged) with `kubernetes.io/cluster/N=shared`: only that key is removed | another cluster's key, `owned`, CAPA-owned, another VPC: kept | [`shared_tags::decide`] |
//! | GuardDuty's managed VPC endpoint and security group | 3 | in one of the cluster's CAPA-managed VPCs: the interface endpoint of `com.amazonaws.<region>.guardduty-data` tagged `GuardDutyManaged=true` (before the subnets), the group `GuardDutyManagedSecurityGroup-<vpc-id>` of that VPC (after the endpoint) | in any other VPC, or any look-alike (another service, tag missing, another VPC's name): never touched; while present in a CAPA VPC they are not blockers | [`guardduty::endpoint`], [`guardduty::group`] |
//! | the VPC (phase 3's gate) | 3 | CAPA-tagged, and nothing in it blocks | another's load balancer, live instance, live NAT gateway, detached interface (not a NAT gateway's), security group (not `default`), live endpoint or subnet in it: the whole phase waits, reporting them as blockers | [`network::blocks_vpc`] |
//!
//! Every kind sweeper deletes is in this table. Where a rule is sent as the server's filter
//! (phase 1's instances and phase 3's kinds take CAPA's tag from it, detached interfaces their
//! selection), the filter is built from this module's keys and values and not checked again
//! after the call.

pub mod bootstrap_data;
pub mod bootstrap_s3;
pub mod capa;
pub mod dns_records;
pub mod ebs;
pub mod guardduty;
pub mod instance_profiles;
pub mod instance_state;
pub mod instances;
pub mod log_groups;
pub mod network;
pub mod network_interfaces;
pub mod oidc_providers;
pub mod ownership;
pub mod security_groups;
pub mod shared_tags;
pub mod tags;
pub mod target_groups;

pub use ownership::Ownership;

use std::borrow::Cow;

/// Why a resource is not deleted now: shown in reports and logs.
pub type Reason = Cow<'static, str>;

/// What happens to one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The cluster's, and this step deletes it.
    Delete,
    /// Used by the cluster but not its own (a bring-your-own network's `shared` tag): the
    /// cluster's tag is removed, the resource stays ([`shared_tags::decide`]).
    Untag,
    /// The cluster's or looks like it, but this step leaves it: another phase or AWS itself
    /// deletes it, or sweeper only reports it.
    Keep(Reason),
    /// The cluster's, deleted once what holds it is gone: reported remaining, no delete call.
    Blocked(Reason),
    /// Not the cluster's: never touched.
    Foreign(Reason),
}

impl Verdict {
    pub fn keep(why: impl Into<Reason>) -> Self {
        Verdict::Keep(why.into())
    }
    pub fn blocked(why: impl Into<Reason>) -> Self {
        Verdict::Blocked(why.into())
    }
    pub fn foreign(why: impl Into<Reason>) -> Self {
        Verdict::Foreign(why.into())
    }

    pub fn is_delete(&self) -> bool {
        matches!(self, Verdict::Delete)
    }
}

/// What EKS says of the cluster a resource was made for (`DescribeCluster`), for the rules that
/// wait until EKS reports it gone.
#[derive(Clone, Copy, Debug)]
pub enum Eks<'a> {
    /// DescribeCluster: ResourceNotFound.
    Gone,
    /// A cluster of that name exists, in `status` (a deleting cluster still exists).
    Live { name: &'a str, status: &'a str },
    /// EKS could not be asked (the failure, as it reads).
    Unknown(&'a str),
}

/// The facts most rules read about one resource: its tags (key, value) and the VPC it lives in,
/// when it lives in one and locating knows it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    pub tags: &'a [(&'a str, &'a str)],
    pub vpc: Option<&'a str>,
}

impl<'a> Candidate<'a> {
    /// A resource known by its tags alone.
    pub fn tagged(tags: &'a [(&'a str, &'a str)]) -> Self {
        Candidate { tags, vpc: None }
    }
}

#[cfg(test)]
pub(crate) mod table {
    //! The policy tables' one check: every row's verdict is the one wanted, and every verdict
    //! but Delete says why.
    use super::Verdict;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Want {
        Delete,
        Untag,
        Keep,
        Blocked,
        Foreign,
    }

    pub fn check(rows: &[(Verdict, Want, &str)]) {
        for (got, want, row) in rows {
            let (kind, why) = match got {
                Verdict::Delete => (Want::Delete, None),
                Verdict::Untag => (Want::Untag, None),
                Verdict::Keep(r) => (Want::Keep, Some(r)),
                Verdict::Blocked(r) => (Want::Blocked, Some(r)),
                Verdict::Foreign(r) => (Want::Foreign, Some(r)),
            };
            assert_eq!(kind, *want, "{row}: got {got:?}");
            assert!(why.is_none_or(|r| !r.is_empty()), "{row}: no reason given");
        }
    }
}
