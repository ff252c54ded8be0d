//! Cross-references between security groups: a group referenced by a rule of another group cannot
//! be deleted (DependencyViolation), so before deleting group X we revoke, in every other group of
//! the account that names X (its VPC's, and any other VPC's: a peered VPC's group may name it),
//! the ingress and egress rules whose UserIdGroupPairs name X. Which pairs go is
//! `policy::security_groups::referencing_rule`; the revokes name exactly those pairs, so every
//! other rule of the holding group stays. Planned from the Describes of locating; `revoke`
//! carries the plan out and proves each rule gone; each rule revoked is returned for the audit
//! record (`AuditAction::Revoked`), saying what putting it back takes.

use crate::model::{AuditAction, Audited, ResourceRef};
use crate::policy::security_groups::referencing_rule;
use aws_sdk_ec2::types::{IpPermission, SecurityGroup, UserIdGroupPair};
use std::collections::{HashMap, HashSet};

/// Rules to revoke in `group_id` because they reference a group about to be deleted, with each
/// permission's readable form (`ingress_rules[i]` is `ingress[i]`'s) for the audit record.
#[derive(Clone, Debug, PartialEq)]
pub struct SgRevoke {
    pub group_id: String,
    pub ingress: Vec<IpPermission>,
    pub egress: Vec<IpPermission>,
    pub ingress_rules: Vec<String>,
    pub egress_rules: Vec<String>,
}

/// One rule as the audit record and `gc plan` say it: enough to authorize it again.
fn describe(direction: &str, p: &IpPermission, pair: &UserIdGroupPair) -> String {
    let proto = match p.ip_protocol() {
        Some("-1") | None => "all".to_string(),
        Some(x) => x.to_string(),
    };
    let ports = match (p.from_port(), p.to_port()) {
        (Some(f), Some(t)) if f == t => format!(" port {f}"),
        (Some(f), Some(t)) if f >= 0 => format!(" ports {f}-{t}"),
        _ => String::new(),
    };
    let way = if direction == "ingress" { "from" } else { "to" };
    let mut out = format!(
        "{direction} {proto}{ports} {way} {}",
        pair.group_id().unwrap_or_default()
    );
    if let Some(a) = pair.user_id() {
        out.push_str(&format!(" (account {a})"));
    }
    if let Some(d) = pair.description().filter(|d| !d.is_empty()) {
        out.push_str(&format!(" description {d:?}"));
    }
    out
}

/// The permissions of `perms` (of group `holder`) whose pairs name `target` and are to be
/// revoked by the rule, each narrowed to those pairs, with their readable forms.
fn referencing(
    direction: &str,
    holder: &str,
    perms: &[IpPermission],
    target: &str,
    account: Option<&str>,
) -> (Vec<IpPermission>, Vec<String>) {
    let mut out = (Vec::new(), Vec::new());
    for p in perms {
        let named: Vec<&UserIdGroupPair> = p
            .user_id_group_pairs()
            .iter()
            .filter(|u| u.group_id() == Some(target))
            .filter(|u| referencing_rule(holder, target, true, u.user_id(), account).is_delete())
            .collect();
        if named.is_empty() {
            continue;
        }
        // The revoke names the pair as the group describes it (group, account, description)
        // and nothing else of the permission (no CIDR), so nothing else of the group is
        // revoked. AWS matches without the description; moto (LocalStack) only with it, and
        // either way `revoke` proves the rule gone by describing the group again.
        let pairs = named
            .iter()
            .map(|u| {
                UserIdGroupPair::builder()
                    .group_id(target)
                    .set_user_id(u.user_id().map(str::to_string))
                    .set_description(u.description().map(str::to_string))
                    .build()
            })
            .collect();
        out.0.push(
            IpPermission::builder()
                .set_ip_protocol(p.ip_protocol().map(str::to_string))
                .set_from_port(p.from_port())
                .set_to_port(p.to_port())
                .set_user_id_group_pairs(Some(pairs))
                .build(),
        );
        out.1.push(
            named
                .iter()
                .map(|u| describe(direction, p, u))
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    out
}

/// For each group in `targets`, the revokes needed in the OTHER groups of `all` (the session's
/// `account` when known). Self-references are left alone: they go with the group.
pub fn plan(
    targets: &HashSet<String>,
    all: &[SecurityGroup],
    account: Option<&str>,
) -> HashMap<String, Vec<SgRevoke>> {
    let mut out: HashMap<String, Vec<SgRevoke>> = HashMap::new();
    let mut seen = HashSet::new();
    for g in all {
        let Some(gid) = g.group_id() else { continue };
        // `all` may list a group twice (its VPC's and the account-wide lookup).
        if !seen.insert(gid) {
            continue;
        }
        for t in targets {
            if t == gid {
                continue;
            }
            let (ingress, ingress_rules) =
                referencing("ingress", gid, g.ip_permissions(), t, account);
            let (egress, egress_rules) =
                referencing("egress", gid, g.ip_permissions_egress(), t, account);
            if !ingress.is_empty() || !egress.is_empty() {
                out.entry(t.clone()).or_default().push(SgRevoke {
                    group_id: gid.to_string(),
                    ingress,
                    egress,
                    ingress_rules,
                    egress_rules,
                });
            }
        }
    }
    out
}

/// The audit entry of one rule revoked in `holder` because it named `target`.
pub fn revoked(holder: &str, target: &str, rule: &str) -> Audited {
    Audited {
        resource: ResourceRef {
            service: "ec2".into(),
            kind: "security-group".into(),
            id: holder.to_string(),
        },
        action: AuditAction::Revoked {
            rule: rule.to_string(),
        },
        detail: format!(
            "revoked before deleting {target}, which it named; the group and its other rules are kept"
        ),
        tags: None,
    }
}

/// What revoking `revokes` changes (for a dry run's plan).
pub fn planned(target: &str, revokes: &[SgRevoke]) -> Vec<Audited> {
    revokes
        .iter()
        .flat_map(|r| {
            r.ingress_rules
                .iter()
                .chain(&r.egress_rules)
                .map(|rule| revoked(&r.group_id, target, rule))
        })
        .collect()
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
        let plan = plan(&targets, &[a, b, x], None);
        let revokes = &plan["sg-x"];
        assert_eq!(revokes.len(), 2);
        assert_eq!(revokes[0].group_id, "sg-a");
        assert_eq!(revokes[0].ingress, vec![pair_perm("sg-x")]);
        assert!(revokes[0].egress.is_empty());
        assert_eq!(revokes[1].group_id, "sg-b");
        assert_eq!(revokes[1].egress, vec![pair_perm("sg-x")]);
        assert_eq!(revokes[1].egress_rules, ["egress tcp port 443 to sg-x"]);
    }

    #[test]
    fn a_revoke_names_the_pair_alone_and_the_audit_says_how_to_put_it_back() {
        // One permission of the bastion group: a CIDR, our group and a group that stays.
        let perm = IpPermission::builder()
            .ip_protocol("tcp")
            .from_port(22)
            .to_port(22)
            .ip_ranges(
                aws_sdk_ec2::types::IpRange::builder()
                    .cidr_ip("10.0.0.0/8")
                    .build(),
            )
            .user_id_group_pairs(
                UserIdGroupPair::builder()
                    .group_id("sg-x")
                    .user_id("111")
                    .description("ssh from nodes")
                    .build(),
            )
            .user_id_group_pairs(UserIdGroupPair::builder().group_id("sg-keep").build())
            .build();
        let bastion = SecurityGroup::builder()
            .group_id("sg-bastion")
            .ip_permissions(perm)
            .build();
        let targets = HashSet::from(["sg-x".to_string()]);
        let planned_revokes = plan(&targets, &[bastion.clone(), bastion], Some("111"));
        let r = &planned_revokes["sg-x"];
        assert_eq!(r.len(), 1, "a group listed twice is planned once");
        let sent = &r[0].ingress[0];
        assert!(sent.ip_ranges().is_empty(), "the CIDR rule stays");
        assert_eq!(
            sent.user_id_group_pairs().len(),
            1,
            "the other group's rule stays"
        );
        assert_eq!(sent.user_id_group_pairs()[0].group_id(), Some("sg-x"));
        assert_eq!(
            r[0].ingress_rules,
            [r#"ingress tcp port 22 from sg-x (account 111) description "ssh from nodes""#]
        );
        let a = &planned("sg-x", r)[0];
        assert_eq!(a.resource.id, "sg-bastion");
        assert!(matches!(&a.action, AuditAction::Revoked { rule } if rule.contains("port 22")));
        // A pair naming another account's group of that id is not ours to revoke.
        let foreign = SecurityGroup::builder()
            .group_id("sg-peer")
            .ip_permissions(
                IpPermission::builder()
                    .ip_protocol("-1")
                    .user_id_group_pairs(
                        UserIdGroupPair::builder()
                            .group_id("sg-x")
                            .user_id("222")
                            .build(),
                    )
                    .build(),
            )
            .build();
        assert!(plan(&targets, &[foreign], Some("111")).is_empty());
    }
}
