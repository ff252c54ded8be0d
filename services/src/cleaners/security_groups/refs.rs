//! Cross-references between security groups: a group referenced by a rule of another group cannot
//! be deleted (DependencyViolation), so before deleting group X we revoke, in every other group of
//! the VPC, the ingress and egress rules whose UserIdGroupPairs name X. Planned from one bulk
//! Describe at discovery; the revokes name exactly the pair that references X.

use crate::cleaners::{CleanError, Outcome};
use crate::errors::{ApiFailure, ErrorClass, call};
use crate::model::AwsClients;
use aws_sdk_ec2::types::{IpPermission, SecurityGroup, UserIdGroupPair};
use std::collections::{HashMap, HashSet};

/// Rules to revoke in `group_id` because they reference a group about to be deleted.
#[derive(Clone, Debug, PartialEq)]
pub struct SgRevoke {
    pub group_id: String,
    pub ingress: Vec<IpPermission>,
    pub egress: Vec<IpPermission>,
}

/// The permissions of `perms` that reference `target`, each narrowed to that one pair.
fn referencing(perms: &[IpPermission], target: &str) -> Vec<IpPermission> {
    perms
        .iter()
        .filter_map(|p| {
            let pairs: Vec<UserIdGroupPair> = p
                .user_id_group_pairs()
                .iter()
                .filter(|u| u.group_id() == Some(target))
                .map(|u| {
                    UserIdGroupPair::builder()
                        .group_id(target)
                        .set_user_id(u.user_id().map(str::to_string))
                        .build()
                })
                .collect();
            if pairs.is_empty() {
                return None;
            }
            Some(
                IpPermission::builder()
                    .set_ip_protocol(p.ip_protocol().map(str::to_string))
                    .set_from_port(p.from_port())
                    .set_to_port(p.to_port())
                    .set_user_id_group_pairs(Some(pairs))
                    .build(),
            )
        })
        .collect()
}

/// For each group in `targets`, the revokes needed in the OTHER groups of `all`. Self-references
/// are left alone: they go with the group.
pub fn plan(targets: &HashSet<String>, all: &[SecurityGroup]) -> HashMap<String, Vec<SgRevoke>> {
    let mut out: HashMap<String, Vec<SgRevoke>> = HashMap::new();
    for g in all {
        let Some(gid) = g.group_id() else { continue };
        for t in targets {
            if t == gid {
                continue;
            }
            let ingress = referencing(g.ip_permissions(), t);
            let egress = referencing(g.ip_permissions_egress(), t);
            if !ingress.is_empty() || !egress.is_empty() {
                out.entry(t.clone()).or_default().push(SgRevoke {
                    group_id: gid.to_string(),
                    ingress,
                    egress,
                });
            }
        }
    }
    out
}

/// Revokes the planned rules. `Ok(None)` when all are gone; `Ok(Some(Remaining))` when a
/// transient error outlived the retries; `Err` for anything else. A rule or group already gone
/// counts as revoked.
pub async fn revoke(
    c: &AwsClients,
    target: &str,
    revokes: &[SgRevoke],
) -> Result<Option<Outcome>, CleanError> {
    for r in revokes {
        if !r.ingress.is_empty() {
            let res = call("ec2.RevokeSecurityGroupIngress", || {
                c.ec2
                    .revoke_security_group_ingress()
                    .group_id(&r.group_id)
                    .set_ip_permissions(Some(r.ingress.clone()))
                    .send()
            })
            .await;
            if let Some(o) = check(res, target, &r.group_id, "RevokeSecurityGroupIngress")? {
                return Ok(Some(o));
            }
        }
        if !r.egress.is_empty() {
            let res = call("ec2.RevokeSecurityGroupEgress", || {
                c.ec2
                    .revoke_security_group_egress()
                    .group_id(&r.group_id)
                    .set_ip_permissions(Some(r.egress.clone()))
                    .send()
            })
            .await;
            if let Some(o) = check(res, target, &r.group_id, "RevokeSecurityGroupEgress")? {
                return Ok(Some(o));
            }
        }
    }
    Ok(None)
}

fn check<T>(
    res: Result<T, ApiFailure>,
    target: &str,
    holder: &str,
    op: &'static str,
) -> Result<Option<Outcome>, CleanError> {
    match res {
        Ok(_) => Ok(None),
        Err(f) => match f.class {
            ErrorClass::NotFound => Ok(None),
            ErrorClass::Transient => Ok(Some(Outcome::Remaining(crate::model::Failure {
                op: Some(op),
                ..crate::model::Failure::new(
                    f.kind,
                    format!("{op} in {holder} (rule referencing it): {f}"),
                )
            }))),
            ErrorClass::Fatal => Err(CleanError::Api {
                kind: "security-group",
                id: target.to_string(),
                op,
                source: f,
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair_perm(gid: &str) -> IpPermission {
        IpPermission::builder()
            .ip_protocol("tcp")
            .from_port(443)
            .to_port(443)
            .user_id_group_pairs(UserIdGroupPair::builder().group_id(gid).build())
            .build()
    }

    #[test]
    fn plans_ingress_and_egress_revokes_in_other_groups_only() {
        let a = SecurityGroup::builder()
            .group_id("sg-a")
            .ip_permissions(pair_perm("sg-x"))
            .ip_permissions(pair_perm("sg-other"))
            .build();
        let b = SecurityGroup::builder()
            .group_id("sg-b")
            .ip_permissions_egress(pair_perm("sg-x"))
            .build();
        let x = SecurityGroup::builder()
            .group_id("sg-x")
            .ip_permissions(pair_perm("sg-x"))
            .build();
        let targets = HashSet::from(["sg-x".to_string()]);
        let plan = plan(&targets, &[a, b, x]);
        let revokes = &plan["sg-x"];
        assert_eq!(revokes.len(), 2);
        assert_eq!(revokes[0].group_id, "sg-a");
        assert_eq!(revokes[0].ingress, vec![pair_perm("sg-x")]);
        assert!(revokes[0].egress.is_empty());
        assert_eq!(revokes[1].group_id, "sg-b");
        assert_eq!(revokes[1].egress, vec![pair_perm("sg-x")]);
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::mocked::{self, assert_calls, code, mock};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::revoke_security_group_egress::RevokeSecurityGroupEgressOutput;
    use aws_sdk_ec2::operation::revoke_security_group_ingress::RevokeSecurityGroupIngressError;

    fn perm() -> IpPermission {
        IpPermission::builder()
            .ip_protocol("tcp")
            .user_id_group_pairs(UserIdGroupPair::builder().group_id("sg-x").build())
            .build()
    }

    fn both(holder: &str) -> SgRevoke {
        SgRevoke {
            group_id: holder.into(),
            ingress: vec![perm()],
            egress: vec![perm()],
        }
    }

    #[tokio::test]
    async fn a_rule_or_holder_already_gone_counts_as_revoked() {
        let ingress = mock!(Client::revoke_security_group_ingress)
            .match_requests(|r| r.group_id() == Some("sg-a") && r.ip_permissions() == [perm()])
            .then_error(|| RevokeSecurityGroupIngressError::generic(code("InvalidGroup.NotFound")));
        let egress = mock!(Client::revoke_security_group_egress)
            .match_requests(|r| r.group_id() == Some("sg-a"))
            .then_output(|| RevokeSecurityGroupEgressOutput::builder().build());
        let c = mocked::in_order(&[&ingress, &egress]);
        assert_eq!(revoke(&c, "sg-x", &[both("sg-a")]).await.unwrap(), None);
        assert_calls(&egress, 1, "RevokeSecurityGroupEgress");
    }

    #[tokio::test]
    async fn a_refused_revoke_stops_before_the_next_holder_and_names_the_group() {
        let denied = mock!(Client::revoke_security_group_ingress)
            .then_error(|| RevokeSecurityGroupIngressError::generic(code("UnauthorizedOperation")));
        // No rule for sg-b or for egress: asking would panic the mock.
        let c = mocked::in_order(&[&denied]);
        let err = revoke(&c, "sg-x", &[both("sg-a"), both("sg-b")])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("security-group sg-x"), "{err}");
    }
}
