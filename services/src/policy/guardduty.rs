//! Phase 3 (issue #44): what GuardDuty Runtime Monitoring puts into every VPC when its automated
//! agent configuration is on, an interface endpoint for `com.amazonaws.<region>.guardduty-data`
//! tagged `GuardDutyManaged=true` and the security group `GuardDutyManagedSecurityGroup-<vpc-id>`
//! its interfaces use. Neither carries CAPA's tag, so a CAPA-managed VPC that has them could not
//! be deleted: they held phase 3 as blockers. CAPA neither deletes nor skips them.
//!
//! The rule: in one of the cluster's **CAPA-managed** VPCs only, exactly these two are deleted,
//! the endpoint before the subnets its interfaces live in and the group after it, both before the
//! VPC. Everything must match: the endpoint's service name for the session's region, its tag, its
//! VPC; the group's exact name for its own VPC. In any other VPC (bring-your-own, another
//! cluster's) they are never touched, nor any look-alike (another service's endpoint with the
//! tag, the tag missing, a group named for another VPC).

use super::{Candidate, Verdict, tags};

/// The tag GuardDuty puts on the endpoint it manages.
pub const MANAGED_TAG: (&str, &str) = ("GuardDutyManaged", "true");

/// GuardDuty's endpoint service in `region`.
pub fn service_name(region: &str) -> String {
    format!("com.amazonaws.{region}.guardduty-data")
}

/// The name GuardDuty gives the group of `vpc`.
pub fn group_name(vpc: &str) -> String {
    format!("GuardDutyManagedSecurityGroup-{vpc}")
}

fn in_capa_vpc<'a>(vpc: Option<&'a str>, capa_vpcs: &[String]) -> Option<&'a str> {
    vpc.filter(|v| capa_vpcs.iter().any(|c| c == v))
}

/// A VPC endpoint (`c`: its tags and VPC), of service `service` (as AWS names it), in `region`.
pub fn endpoint(
    c: &Candidate<'_>,
    service: Option<&str>,
    region: &str,
    capa_vpcs: &[String],
) -> Verdict {
    if in_capa_vpc(c.vpc, capa_vpcs).is_none() {
        return Verdict::foreign("not in the cluster's CAPA-managed VPC: never touched");
    }
    if service != Some(service_name(region).as_str()) {
        return Verdict::foreign("not GuardDuty's endpoint service in the session's region");
    }
    if !tags::has(c.tags.iter().copied(), MANAGED_TAG.0, MANAGED_TAG.1) {
        return Verdict::foreign(
            "GuardDuty's service without the GuardDutyManaged tag: someone's own",
        );
    }
    Verdict::Delete
}

/// A security group named `name` in `vpc`.
pub fn group(name: Option<&str>, vpc: Option<&str>, capa_vpcs: &[String]) -> Verdict {
    let Some(vpc) = in_capa_vpc(vpc, capa_vpcs) else {
        return Verdict::foreign("not in the cluster's CAPA-managed VPC: never touched");
    };
    if name != Some(group_name(vpc).as_str()) {
        return Verdict::foreign("not GuardDuty's group for this VPC");
    }
    Verdict::Delete
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    #[test]
    fn only_guarddutys_own_endpoint_and_group_in_a_capa_managed_vpc() {
        let capa = ["vpc-capa".to_string()];
        let gd = service_name("eu-west-1");
        let tagged = [MANAGED_TAG];
        let e = |t: &[(&str, &str)], vpc, svc: &str| {
            endpoint(&Candidate { tags: t, vpc }, Some(svc), "eu-west-1", &capa)
        };
        table::check(&[
            (
                e(&tagged, Some("vpc-capa"), &gd),
                Delete,
                "GuardDuty's endpoint",
            ),
            (
                e(&tagged, Some("vpc-byo"), &gd),
                Foreign,
                "in a bring-your-own VPC",
            ),
            (e(&tagged, None, &gd), Foreign, "no VPC known"),
            (e(&[], Some("vpc-capa"), &gd), Foreign, "the tag missing"),
            (
                e(&[("GuardDutyManaged", "false")], Some("vpc-capa"), &gd),
                Foreign,
                "the tag says false",
            ),
            (
                e(&tagged, Some("vpc-capa"), "com.amazonaws.eu-west-1.s3"),
                Foreign,
                "another service, tagged",
            ),
            (
                e(
                    &tagged,
                    Some("vpc-capa"),
                    "com.amazonaws.us-east-1.guardduty-data",
                ),
                Foreign,
                "another region's service name",
            ),
            (
                e(
                    &tagged,
                    Some("vpc-capa"),
                    "com.amazonaws.eu-west-1.guardduty-data-fips",
                ),
                Foreign,
                "a name that extends it",
            ),
            (
                group(
                    Some("GuardDutyManagedSecurityGroup-vpc-capa"),
                    Some("vpc-capa"),
                    &capa,
                ),
                Delete,
                "GuardDuty's group",
            ),
            (
                group(
                    Some("GuardDutyManagedSecurityGroup-vpc-other"),
                    Some("vpc-capa"),
                    &capa,
                ),
                Foreign,
                "named for another VPC",
            ),
            (
                group(
                    Some("GuardDutyManagedSecurityGroup-vpc-byo"),
                    Some("vpc-byo"),
                    &capa,
                ),
                Foreign,
                "in a bring-your-own VPC",
            ),
            (
                group(Some("app"), Some("vpc-capa"), &capa),
                Foreign,
                "another group",
            ),
        ]);
    }
}
