//! The exact calls of a revoke and what each answer proves.

use super::*;
use crate::mocked::{self, assert_calls, code, filter_is, mock};
use crate::model::AuditAction;
use aws_sdk_ec2::Client;
use aws_sdk_ec2::operation::describe_security_groups::DescribeSecurityGroupsOutput;
use aws_sdk_ec2::operation::revoke_security_group_egress::RevokeSecurityGroupEgressOutput;
use aws_sdk_ec2::operation::revoke_security_group_ingress::{
    RevokeSecurityGroupIngressError, RevokeSecurityGroupIngressOutput,
};
use aws_sdk_ec2::types::UserIdGroupPair;
use aws_smithy_mocks::Rule;

/// A rule naming sg-x as the holder describes it: account and description included.
fn perm() -> IpPermission {
    IpPermission::builder()
        .ip_protocol("tcp")
        .from_port(443)
        .to_port(443)
        .user_id_group_pairs(
            UserIdGroupPair::builder()
                .group_id("sg-x")
                .user_id("111")
                .description("from nodes")
                .build(),
        )
        .build()
}

fn both(holder: &str) -> SgRevoke {
    SgRevoke {
        group_id: holder.into(),
        ingress: vec![perm()],
        egress: vec![perm()],
        ingress_rules: vec!["ingress from sg-x".into()],
        egress_rules: vec!["egress to sg-x".into()],
    }
}

/// The holders' Describe after the revokes, showing `ingress` / `egress` rules still there.
fn described(holders: &'static [&'static str], ingress: bool, egress: bool) -> Rule {
    mock!(Client::describe_security_groups)
        .match_requests(move |r| filter_is(r.filters(), "group-id", holders))
        .then_output(move || {
            let mut g = SecurityGroup::builder().group_id(holders[0]);
            if ingress {
                g = g.ip_permissions(perm());
            }
            if egress {
                g = g.ip_permissions_egress(perm());
            }
            DescribeSecurityGroupsOutput::builder()
                .security_groups(g.build())
                .build()
        })
}

fn egress_ok() -> Rule {
    mock!(Client::revoke_security_group_egress)
        .match_requests(|r| r.group_id() == Some("sg-a") && r.ip_permissions() == [perm()])
        .then_output(|| {
            RevokeSecurityGroupEgressOutput::builder()
                .r#return(true)
                .build()
        })
}

fn audited(done: &[Audited]) -> Vec<(&str, &AuditAction)> {
    done.iter()
        .map(|a| (a.resource.id.as_str(), &a.action))
        .collect()
}

fn egress_revoked() -> AuditAction {
    AuditAction::Revoked {
        rule: "egress to sg-x".into(),
    }
}

#[tokio::test]
async fn each_pair_is_named_as_described_and_proven_gone_by_a_describe() {
    let ingress = mock!(Client::revoke_security_group_ingress)
        .match_requests(|r| {
            let pair = &r.ip_permissions()[0].user_id_group_pairs()[0];
            r.group_id() == Some("sg-a")
                && (pair.group_id(), pair.user_id(), pair.description())
                    == (Some("sg-x"), Some("111"), Some("from nodes"))
        })
        .then_output(|| {
            RevokeSecurityGroupIngressOutput::builder()
                .r#return(true)
                .build()
        });
    let (egress, after) = (egress_ok(), described(&["sg-a"], false, false));
    let c = mocked::in_order(&[&ingress, &egress, &after]);
    let mut done = Vec::new();
    let out = revoke(&c, "sg-x", &[both("sg-a")], &mut done).await;
    assert_eq!(out.unwrap(), None);
    assert_calls(&after, 1, "one Describe of the holders");
    assert_eq!(audited(&done).len(), 2, "both rules proven revoked");
}

#[tokio::test]
async fn unknown_ip_permissions_is_an_error_and_that_rule_is_not_audited() {
    // AWS's answer to a revoke that matched nothing: success, with the permission echoed back.
    let ingress = mock!(Client::revoke_security_group_ingress).then_output(|| {
        RevokeSecurityGroupIngressOutput::builder()
            .r#return(true)
            .unknown_ip_permissions(perm())
            .build()
    });
    let (egress, after) = (egress_ok(), described(&["sg-a"], false, false));
    let c = mocked::in_order(&[&ingress, &egress, &after]);
    let mut done = Vec::new();
    let out = revoke(&c, "sg-x", &[both("sg-a")], &mut done).await;
    match out.unwrap() {
        Some(Outcome::Failed(why)) => {
            assert!(why.message.contains("UnknownIpPermissions"), "{why}");
            assert!(why.message.contains("ingress from sg-x in sg-a"), "{why}");
            assert_eq!(why.op, Some("RevokeSecurityGroupIngress"));
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(audited(&done), [("sg-a", &egress_revoked())]);
}

#[tokio::test]
async fn not_found_is_checked_and_a_rule_still_shown_is_an_error() {
    let ingress = mock!(Client::revoke_security_group_ingress).then_error(|| {
        RevokeSecurityGroupIngressError::generic(code("InvalidPermission.NotFound"))
    });
    // The egress revoke answered success, yet the rule is still there.
    let (egress, after) = (egress_ok(), described(&["sg-a"], true, true));
    let c = mocked::in_order(&[&ingress, &egress, &after]);
    let mut done = Vec::new();
    match revoke(&c, "sg-x", &[both("sg-a")], &mut done)
        .await
        .unwrap()
    {
        Some(Outcome::Failed(why)) => {
            assert!(why.message.contains("ingress from sg-x in sg-a"), "{why}");
            assert!(why.message.contains("egress to sg-x in sg-a"), "{why}");
            assert!(why.message.contains("still shown"), "{why}");
        }
        o => panic!("{o:?}"),
    }
    assert!(done.is_empty(), "nothing proven revoked: {done:?}");
}

#[tokio::test]
async fn a_rule_or_holder_already_gone_counts_as_revoked_but_is_not_recorded() {
    let ingress = mock!(Client::revoke_security_group_ingress)
        .then_error(|| RevokeSecurityGroupIngressError::generic(code("InvalidGroup.NotFound")));
    let (egress, after) = (egress_ok(), described(&["sg-a"], false, false));
    let c = mocked::in_order(&[&ingress, &egress, &after]);
    let mut done = Vec::new();
    let out = revoke(&c, "sg-x", &[both("sg-a")], &mut done).await;
    assert_eq!(out.unwrap(), None);
    assert_eq!(audited(&done), [("sg-a", &egress_revoked())]);
}

#[tokio::test]
async fn a_refused_revoke_stops_before_the_next_holder_and_names_the_group() {
    let denied = mock!(Client::revoke_security_group_ingress)
        .then_error(|| RevokeSecurityGroupIngressError::generic(code("UnauthorizedOperation")));
    // Nothing was sent that could be gone: no Describe, no call for sg-b or egress (asking would
    // panic the mock).
    let c = mocked::in_order(&[&denied]);
    let err = revoke(&c, "sg-x", &[both("sg-a"), both("sg-b")], &mut Vec::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("security-group sg-x"), "{err}");
}

#[test]
fn a_shown_rule_matches_by_protocol_ports_group_and_account_not_description() {
    let shown = |user: &str, port: i32| {
        IpPermission::builder()
            .ip_protocol("tcp")
            .from_port(port)
            .to_port(port)
            .user_id_group_pairs(
                UserIdGroupPair::builder()
                    .group_id("sg-x")
                    .user_id(user)
                    .build(),
            )
            .build()
    };
    assert!(same_rule(&shown("111", 443), &perm(), "sg-x"));
    assert!(
        !same_rule(&shown("222", 443), &perm(), "sg-x"),
        "another account's"
    );
    assert!(
        !same_rule(&shown("111", 22), &perm(), "sg-x"),
        "another port"
    );
    assert!(
        !same_rule(&shown("111", 443), &perm(), "sg-y"),
        "another group"
    );
}
