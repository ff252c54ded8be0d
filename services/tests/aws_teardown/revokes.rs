//! Rules of other groups naming a group sweeper deletes, described as people write them (with a
//! description), in the group's VPC and in another VPC, ingress and egress: every one is revoked
//! and audited as revoked, every other rule of the holders is kept. LocalStack's moto revokes a
//! pair only when the revoke names its description too (AWS does not), so a revoke without it
//! would revoke nothing there; the pass proves each rule gone by describing the holders again.

use crate::fixtures::*;
use sweeper_aws::model::AuditAction;
use sweeper_aws::phases::{AwsClients, PassRequest, phase2_pass};
use sweeper_aws::sdk::ec2::types::{IpPermission, IpRange, SecurityGroup, UserIdGroupPair};

/// A rule on `port` (all traffic when `None`) naming `group`, with `description`.
fn naming(group: &str, port: Option<i32>, description: &str) -> IpPermission {
    let pair = UserIdGroupPair::builder()
        .group_id(group)
        .description(description)
        .build();
    let b = match port {
        Some(p) => IpPermission::builder()
            .ip_protocol("tcp")
            .from_port(p)
            .to_port(p),
        None => IpPermission::builder().ip_protocol("-1"),
    };
    b.user_id_group_pairs(pair).build()
}

async fn ingress(c: &AwsClients, holder: &str, p: IpPermission) {
    c.ec2
        .authorize_security_group_ingress()
        .group_id(holder)
        .ip_permissions(p)
        .send()
        .await
        .unwrap_or_else(|e| panic!("authorize ingress in {holder}: {e:?}"));
}

async fn egress(c: &AwsClients, holder: &str, p: IpPermission) {
    c.ec2
        .authorize_security_group_egress()
        .group_id(holder)
        .ip_permissions(p)
        .send()
        .await
        .unwrap_or_else(|e| panic!("authorize egress in {holder}: {e:?}"));
}

async fn group(c: &AwsClients, id: &str) -> SecurityGroup {
    let out = c.ec2.describe_security_groups().group_ids(id).send().await;
    out.unwrap().security_groups()[0].clone()
}

/// (group named, description) of each pair of `perms`, and each CIDR.
fn rules(perms: &[IpPermission]) -> Vec<String> {
    let mut out: Vec<String> = perms
        .iter()
        .flat_map(|p| {
            let pairs = p.user_id_group_pairs().iter().map(|u| {
                format!(
                    "{} {:?}",
                    u.group_id().unwrap_or_default(),
                    u.description().unwrap_or_default()
                )
            });
            let cidrs = p
                .ip_ranges()
                .iter()
                .map(|r| r.cidr_ip().unwrap_or_default().to_string());
            pairs.chain(cidrs).collect::<Vec<_>>()
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn described_rules_naming_a_deleted_group_are_revoked_in_every_vpc_and_the_rest_kept() {
    let (c, _rec) = env().await;
    let n = cluster("sgdesc");
    let (v, _subnets) = byo_network(&c).await;
    let (far_vpc, _) = byo_network(&c).await;
    let owned = sg(&c, &v, &format!("{n}-owned"), &[cloud(&n, "owned")]).await;
    let stays = sg(&c, &v, &format!("{n}-stays"), &[]).await;
    let near = sg(&c, &v, &format!("{n}-near"), &[]).await;
    let far = sg(&c, &far_vpc, &format!("{n}-far"), &[]).await;
    // Rules naming the cluster's group, in its VPC and in another one, both ways.
    ingress(&c, &near, naming(&owned, Some(443), "from the lb")).await;
    egress(&c, &near, naming(&owned, None, "to the lb")).await;
    ingress(&c, &far, naming(&owned, Some(8080), "peered")).await;
    egress(&c, &far, naming(&owned, Some(443), "peered out")).await;
    // What must stay: rules naming a group that stays, and a CIDR on the same port.
    ingress(&c, &near, naming(&stays, Some(443), "from stays")).await;
    egress(&c, &far, naming(&stays, Some(443), "to stays")).await;
    let cidr = IpPermission::builder()
        .ip_protocol("tcp")
        .from_port(443)
        .to_port(443)
        .ip_ranges(IpRange::builder().cidr_ip("10.0.0.0/8").build())
        .build();
    ingress(&c, &far, cidr).await;
    let before = (group(&c, &near).await, group(&c, &far).await);
    let kept = |g: &SecurityGroup, ingress: bool| {
        let perms = if ingress {
            g.ip_permissions()
        } else {
            g.ip_permissions_egress()
        };
        rules(perms)
            .into_iter()
            .filter(|r| !r.starts_with(&owned))
            .collect::<Vec<_>>()
    };
    let req = PassRequest {
        vpc_ids: vec![v.clone()],
        ..PassRequest::new(&n)
    };
    let p2 = phase2_pass(&c, &req).await;
    assert!(p2.is_clear(), "{p2:#?}");
    assert!(
        !sg_exists(&c, &owned).await,
        "the cluster's group is deleted"
    );
    for g in [&near, &far, &stays] {
        assert!(sg_exists(&c, g).await, "{g} must survive");
    }
    let after = (group(&c, &near).await, group(&c, &far).await);
    for (b, a) in [(&before.0, &after.0), (&before.1, &after.1)] {
        let id = a.group_id().unwrap_or_default();
        for way in [true, false] {
            let now = rules(if way {
                a.ip_permissions()
            } else {
                a.ip_permissions_egress()
            });
            assert!(
                !now.iter().any(|r| r.starts_with(&owned)),
                "{id}: every rule naming {owned} is revoked: {now:?}"
            );
            assert_eq!(now, kept(b, way), "{id}: every other rule is kept");
        }
    }
    assert!(rules(after.0.ip_permissions()).contains(&format!("{stays} \"from stays\"")));
    assert!(rules(after.1.ip_permissions()).contains(&"10.0.0.0/8".to_string()));
    let mut revoked: Vec<(String, String)> = p2
        .audit
        .iter()
        .filter_map(|a| match &a.action {
            AuditAction::Revoked { rule } => Some((a.resource.id.clone(), rule.clone())),
            _ => None,
        })
        .collect();
    revoked.sort();
    assert_eq!(
        revoked.len(),
        4,
        "each rule audited as revoked: {revoked:?}"
    );
    for (holder, description) in [
        (&near, "from the lb"),
        (&near, "to the lb"),
        (&far, "peered"),
        (&far, "peered out"),
    ] {
        let want = format!("description {description:?}");
        assert!(
            revoked
                .iter()
                .any(|(h, r)| h == holder && r.ends_with(&want)),
            "{holder}: {want} in {revoked:?}"
        );
    }
}
