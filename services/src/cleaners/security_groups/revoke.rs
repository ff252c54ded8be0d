//! Carrying out the revokes `refs::plan` planned for one group about to be deleted, and proving
//! them. AWS answers a revoke that matches no rule with success and the permissions it did not
//! know in `UnknownIpPermissions`; moto (LocalStack) answers `InvalidPermission.NotFound` when a
//! pair's description differs. Neither says the rule is gone, so after the calls every holder is
//! described again (one Describe for all of them) and a rule counts as revoked only when that
//! Describe no longer shows it. A rule the answer did not know, or the Describe still shows, is
//! an error of the pass ([`Outcome::Failed`]) and is not audited as revoked; the group is not
//! deleted while it is named.

use super::refs::{SgRevoke, revoked};
use crate::cleaners::{CleanError, Outcome};
use crate::errors::{ApiFailure, ErrorClass, call};
use crate::locate::{describe, tags};
use crate::model::{Audited, AwsClients, Failure, FailureKind};
use aws_sdk_ec2::types::{IpPermission, SecurityGroup};

/// Which list of a group a rule is in.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    Ingress,
    Egress,
}

impl Way {
    fn op(self) -> &'static str {
        match self {
            Way::Ingress => "RevokeSecurityGroupIngress",
            Way::Egress => "RevokeSecurityGroupEgress",
        }
    }

    fn of(self, g: &SecurityGroup) -> &[IpPermission] {
        match self {
            Way::Ingress => g.ip_permissions(),
            Way::Egress => g.ip_permissions_egress(),
        }
    }
}

/// One planned rule after its call: what to check in the holder's new Describe.
struct Sent<'a> {
    holder: &'a str,
    way: Way,
    perm: &'a IpPermission,
    rule: &'a str,
    /// The call answered success for it (else NotFound: if gone, this pass did not revoke it).
    by_call: bool,
}

/// A planned rule that is not proven gone, and why.
struct NotProven {
    holder: String,
    op: &'static str,
    rule: String,
    why: &'static str,
}

/// Revokes the rules `revokes` plans in other groups because they name `target`, appending
/// each rule proven revoked to `done` (for the audit, whatever happens next). `Ok(None)` when
/// every rule is proven gone; `Ok(Some(Remaining))` when a transient error outlived the retries;
/// `Ok(Some(Failed))` when a rule is not proven gone; `Err` for a refused call. A rule or group
/// already gone (NotFound, then not shown) counts as revoked and is not recorded.
pub async fn revoke(
    c: &AwsClients,
    target: &str,
    revokes: &[SgRevoke],
    done: &mut Vec<Audited>,
) -> Result<Option<Outcome>, CleanError> {
    let mut sent = Vec::new();
    let mut unproven = Vec::new();
    let mut stop = None;
    'holders: for r in revokes {
        for (way, perms, rules) in [
            (Way::Ingress, &r.ingress, &r.ingress_rules),
            (Way::Egress, &r.egress, &r.egress_rules),
        ] {
            if perms.is_empty() {
                continue;
            }
            let res = send(c, &r.group_id, way, perms).await;
            let unknown = match res {
                Ok(unknown) => unknown,
                Err(f) if f.class == ErrorClass::NotFound => {
                    tracing::info!(holder = %r.group_id, %target, error = %f, "revoke answered NotFound; checking the group");
                    sent.extend(each(&r.group_id, way, perms, rules, false));
                    continue;
                }
                Err(f) => {
                    stop = Some(failed(f, target, &r.group_id, way.op()));
                    break 'holders;
                }
            };
            // AWS lists what it did not know; an answer listing something no planned rule
            // matches leaves every rule of the call unproven.
            let unknown_of = |p: &IpPermission| unknown.iter().any(|u| same_rule(u, p, target));
            let matched = perms.iter().any(&unknown_of);
            for s in each(&r.group_id, way, perms, rules, true) {
                let not_known = if matched {
                    unknown_of(s.perm)
                } else {
                    !unknown.is_empty()
                };
                if not_known {
                    unproven.push(NotProven::of(&s, "AWS answered it in UnknownIpPermissions"));
                } else {
                    sent.push(s);
                }
            }
        }
    }
    if !sent.is_empty() {
        let now = match holders_now(c, &sent).await {
            Ok(now) => now,
            // The revokes' answers stand unproven: nothing is audited, the pass fails.
            Err(e) => return stop.map_or(Err(e), |s| s.map(Some)),
        };
        for s in sent {
            let shown = now
                .iter()
                .filter(|g| g.group_id() == Some(s.holder))
                .any(|g| s.way.of(g).iter().any(|p| same_rule(p, s.perm, target)));
            if shown {
                unproven.push(NotProven::of(&s, "still shown after the revoke"));
            } else if s.by_call {
                done.push(revoked(s.holder, target, s.rule));
            }
        }
    }
    if let Some(s) = stop {
        return s.map(Some);
    }
    Ok((!unproven.is_empty()).then(|| Outcome::Failed(not_revoked(target, &unproven))))
}

/// The holders of `sent` as they are now, in the order they were sent (a filter rather than
/// GroupIds: a holder deleted meanwhile is simply absent).
async fn holders_now(c: &AwsClients, sent: &[Sent<'_>]) -> Result<Vec<SecurityGroup>, CleanError> {
    let mut holders: Vec<String> = Vec::new();
    for s in sent {
        if !holders.iter().any(|h| h == s.holder) {
            holders.push(s.holder.to_string());
        }
    }
    let mut out = Vec::new();
    for chunk in holders.chunks(super::FILTER_CHUNK) {
        out.extend(describe::security_groups(c, vec![tags::ec2_filter("group-id", chunk)]).await?);
    }
    Ok(out)
}

/// One revoke call; `Ok` with the permissions AWS did not know.
async fn send(
    c: &AwsClients,
    holder: &str,
    way: Way,
    perms: &[IpPermission],
) -> Result<Vec<IpPermission>, ApiFailure> {
    let perms = Some(perms.to_vec());
    match way {
        Way::Ingress => call("ec2.RevokeSecurityGroupIngress", || {
            c.ec2
                .revoke_security_group_ingress()
                .group_id(holder)
                .set_ip_permissions(perms.clone())
                .send()
        })
        .await
        .map(|o| o.unknown_ip_permissions().to_vec()),
        Way::Egress => call("ec2.RevokeSecurityGroupEgress", || {
            c.ec2
                .revoke_security_group_egress()
                .group_id(holder)
                .set_ip_permissions(perms.clone())
                .send()
        })
        .await
        .map(|o| o.unknown_ip_permissions().to_vec()),
    }
}

fn each<'a>(
    holder: &'a str,
    way: Way,
    perms: &'a [IpPermission],
    rules: &'a [String],
    by_call: bool,
) -> impl Iterator<Item = Sent<'a>> {
    perms.iter().zip(rules).map(move |(perm, rule)| Sent {
        holder,
        way,
        perm,
        rule,
        by_call,
    })
}

/// True when `shown` (a permission as AWS describes or echoes it) is `planned`'s rule: same
/// protocol and ports, and a pair naming `target` in the account `planned` names (any, when it
/// names none). The description does not matter: AWS keys a rule without it.
fn same_rule(shown: &IpPermission, planned: &IpPermission, target: &str) -> bool {
    let proto = |p: &IpPermission| p.ip_protocol().map(str::to_string);
    proto(shown) == proto(planned)
        && shown.from_port() == planned.from_port()
        && shown.to_port() == planned.to_port()
        && planned.user_id_group_pairs().iter().any(|want| {
            shown.user_id_group_pairs().iter().any(|u| {
                u.group_id() == Some(target)
                    && (want.user_id().is_none()
                        || u.user_id().is_none()
                        || u.user_id() == want.user_id())
            })
        })
}

impl NotProven {
    fn of(s: &Sent<'_>, why: &'static str) -> Self {
        NotProven {
            holder: s.holder.to_string(),
            op: s.way.op(),
            rule: s.rule.to_string(),
            why,
        }
    }
}

/// The pass's error for `target`: each rule naming it that is not proven revoked.
fn not_revoked(target: &str, unproven: &[NotProven]) -> Failure {
    let rules: Vec<String> = unproven
        .iter()
        .map(|u| format!("{} in {} ({}: {})", u.rule, u.holder, u.op, u.why))
        .collect();
    Failure {
        op: unproven.first().map(|u| u.op),
        ..Failure::new(
            FailureKind::Other,
            format!(
                "security-group {target}: not deleted, rules naming it are not proven revoked: {}",
                rules.join("; ")
            ),
        )
    }
}

/// A revoke call's failure: transient leaves the group remaining, anything else names it.
fn failed(
    f: ApiFailure,
    target: &str,
    holder: &str,
    op: &'static str,
) -> Result<Outcome, CleanError> {
    match f.class {
        ErrorClass::Transient => Ok(Outcome::Remaining(Failure {
            op: Some(op),
            ..Failure::new(
                f.kind,
                format!("{op} in {holder} (rule referencing it): {f}"),
            )
        })),
        _ => Err(CleanError::Api {
            kind: "security-group",
            id: target.to_string(),
            op,
            source: f,
        }),
    }
}

#[cfg(test)]
#[path = "revoke_tests.rs"]
mod tests;
