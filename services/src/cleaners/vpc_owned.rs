//! The skeleton of phase 3's "owned in the VPC" kinds (VPC endpoints, NAT gateways, Elastic IPs,
//! internet gateways, route tables, subnets): CAPA creates them in the VPC it manages and tags them with
//! its ownership tag. Such a kind says only how to describe its resources in those VPCs and how
//! to delete one ([`VpcOwned`]); everything else a [`Cleaner`] says is the same for all of them
//! and written once here: EC2, nothing looked for (no call) unless the cluster has a CAPA-managed
//! VPC, and the phase-3 registry line is all that registers it. Whose these resources are, and
//! when one waits, is `policy::network`'s; this module only sends its ownership rule as the
//! server's filter.

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target};
use crate::discovery::tags;
use async_trait::async_trait;
use aws_sdk_ec2::types::Filter;
use std::fmt;

/// Where a [`VpcOwned`] kind looks: the cluster's CAPA-managed VPCs (never empty) and CAPA's
/// ownership tag for the cluster.
pub struct InVpcs<'a> {
    pub ec2: &'a aws_sdk_ec2::Client,
    pub vpcs: &'a [String],
    capa_key: String,
}

impl InVpcs<'_> {
    /// The two filters every such Describe sends: in the VPCs (under the kind's filter name:
    /// `vpc-id`, or internet gateways' `attachment.vpc-id`) and CAPA-owned. Ownership is the
    /// server's filter; a resource of the VPC without CAPA's tag is someone else's and is never
    /// asked for.
    pub fn owned(&self, vpc_filter: &str) -> Vec<Filter> {
        vec![tags::ec2_filter(vpc_filter, self.vpcs), self.capa_owned()]
    }

    /// CAPA's ownership filter alone (Elastic IPs carry no VPC).
    pub fn capa_owned(&self) -> Filter {
        tags::ec2_tag_filter(&self.capa_key, tags::OWNED)
    }
}

/// A phase-3 kind CAPA owns in its VPC: its describe, its delete, and where it runs.
#[async_trait]
pub trait VpcOwned: Send + Sync {
    /// What the delete needs beyond the id (see [`Target`]).
    type Detail: Clone + fmt::Debug + Send + Sync;
    /// The kind in reports: `subnet`, `route-table`, ...
    const KIND: &'static str;
    /// Its place in phase 3 (see [`Cleaner::order`]).
    const ORDER: u32;
    /// Deletion only requested, finished later (see [`Cleaner::gates_later`]).
    const GATES_LATER: bool = false;

    /// The kind's resources in `at`'s VPCs carrying CAPA's ownership tag, as targets (with the
    /// tags the call read). Only called when the cluster has a CAPA-managed VPC.
    async fn describe(&self, at: &InVpcs<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError>;

    /// Deletes one target (detaching or disassociating first where the kind needs it), settled
    /// as [`super::settle`] does.
    async fn remove(
        &self,
        ec2: &aws_sdk_ec2::Client,
        t: &Target<Self::Detail>,
    ) -> Result<Outcome, CleanError>;
}

#[async_trait]
impl<K: VpcOwned> Cleaner for K {
    type Detail = K::Detail;

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        K::KIND
    }
    fn order(&self) -> u32 {
        K::ORDER
    }
    fn gates_later(&self) -> bool {
        K::GATES_LATER
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<K::Detail>>, CleanError> {
        // No CAPA-managed VPC (bring-your-own, or already gone): nothing of the network is ours.
        if ctx.vpc_ids.is_empty() {
            return Ok(Vec::new());
        }
        let at = InVpcs {
            ec2: &ctx.clients.ec2,
            vpcs: ctx.vpc_ids,
            capa_key: ctx.capa_key(),
        };
        self.describe(&at).await
    }

    async fn delete(
        &self,
        ctx: &CleanCtx<'_>,
        t: &Target<K::Detail>,
    ) -> Result<Outcome, CleanError> {
        self.remove(&ctx.clients.ec2, t).await
    }
}

/// For a call that must go through before the delete (a detach, a disassociation): `Some` with
/// the outcome to report instead of deleting when it is left remaining; `None` to go on (done,
/// or already gone).
pub(crate) fn before_delete<T>(
    res: Result<T, crate::errors::ApiFailure>,
    kind: &'static str,
    id: &str,
    op: &'static str,
) -> Result<Option<Outcome>, CleanError> {
    match super::settle(res, kind, id, op)? {
        left @ Outcome::Remaining(_) => Ok(Some(left)),
        Outcome::Deleted | Outcome::DeletedWith(_) | Outcome::Gone => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::{ApiFailure, ErrorClass};

    fn failed(class: ErrorClass, code: &str) -> Result<(), ApiFailure> {
        Err(ApiFailure {
            class,
            code: Some(code.into()),
            message: "mocked".into(),
            kind: crate::errors::kind_of(Some(code), None),
        })
    }

    #[test]
    fn a_step_before_the_delete_goes_on_when_done_or_gone_waits_when_refused_for_now() {
        let step = |r| before_delete(r, "subnet", "subnet-1", "DisassociateX");
        assert_eq!(step(Ok(())).unwrap(), None);
        assert_eq!(
            step(failed(ErrorClass::NotFound, "X.NotFound")).unwrap(),
            None
        );
        assert!(matches!(
            step(failed(ErrorClass::Transient, "DependencyViolation")).unwrap(),
            Some(Outcome::Remaining(_))
        ));
        let err = step(failed(ErrorClass::Fatal, "UnauthorizedOperation")).unwrap_err();
        assert!(err.to_string().contains("subnet subnet-1"), "{err}");
    }
}
