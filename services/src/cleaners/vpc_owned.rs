//! What phase 3's "owned in the VPC" kinds share (VPC endpoints, NAT gateways, Elastic IPs,
//! internet gateways, route tables, subnets): CAPA creates them in the VPC it manages and tags
//! them with its ownership tag. Each is a plain [`super::Cleaner`] that starts its `discover`
//! with [`InVpcs::of`] (nothing looked for, no call, unless the cluster has a CAPA-managed VPC)
//! and sends [`InVpcs::owned`] as its Describe's filters. Helpers rather than a second trait with
//! a blanket `Cleaner` impl: one trait per idea, and the three lines each kind repeats are worth
//! its being read alone. Whose these resources are, and when one waits, is `policy::network`'s;
//! this module only sends its ownership rule as the server's filter.

use super::{CleanCtx, CleanError, Outcome};
use crate::locate::tags;
use aws_sdk_ec2::types::Filter;

/// Where a phase-3 kind looks: the cluster's CAPA-managed VPCs (never empty) and CAPA's
/// ownership tag for the cluster.
pub struct InVpcs<'a> {
    pub ec2: &'a aws_sdk_ec2::Client,
    pub vpcs: &'a [String],
    capa_key: String,
}

impl<'a> InVpcs<'a> {
    /// Where to look in this pass; `None` when the cluster has no CAPA-managed VPC
    /// (bring-your-own, or already gone): then nothing of the network is ours, and nothing is
    /// asked.
    pub fn of(ctx: &CleanCtx<'a>) -> Option<Self> {
        if ctx.vpc_ids.is_empty() {
            return None;
        }
        Some(InVpcs {
            ec2: &ctx.clients.ec2,
            vpcs: ctx.vpc_ids,
            capa_key: ctx.capa_key(),
        })
    }

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

    /// What [`InVpcs::capa_owned`] asks the server, asked of a resource the pass's shared
    /// listing of the VPCs holds (`locate::view`): CAPA's tag for the cluster, exactly `owned`.
    pub fn is_capas(&self, tags: &[aws_sdk_ec2::types::Tag]) -> bool {
        tags::is_owned(tags::ec2_pairs(tags), &self.capa_key)
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
        left @ (Outcome::Remaining(_) | Outcome::Requested(_) | Outcome::Failed(_)) => {
            Ok(Some(left))
        }
        Outcome::Deleted
        | Outcome::DeletedWith(_)
        | Outcome::Untagged(_)
        | Outcome::Also(..)
        | Outcome::Gone => Ok(None),
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
