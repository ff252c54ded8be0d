//! Phase 2's security groups planned from what discovery already described: the confirmation of
//! the LB controller's group lists every group of the cluster's VPC, and the cleaner plans its
//! revokes from that list instead of describing the VPC again. What it must not touch, and the
//! rules naming its groups, are checked in the world afterwards. Without such a description, the
//! cluster's VPC is described once, at the cleaner's turn.

use crate::fixtures::*;
use sweeper_aws::phases::{AwsClients, PassRequest, phase2_pass};
use sweeper_aws::sdk::ec2::types::{IpPermission, UserIdGroupPair};

fn lbc(n: &str) -> Vec<(String, String)> {
    vec![("elbv2.k8s.aws/cluster".into(), n.into())]
}

fn naming(target: &str) -> IpPermission {
    IpPermission::builder()
        .ip_protocol("tcp")
        .from_port(443)
        .to_port(443)
        .user_id_group_pairs(UserIdGroupPair::builder().group_id(target).build())
        .build()
}

/// Gives `holder` an ingress rule naming each of `targets`.
async fn allow_from(c: &AwsClients, holder: &str, targets: &[&str]) {
    for t in targets {
        c.ec2
            .authorize_security_group_ingress()
            .group_id(holder)
            .ip_permissions(naming(t))
            .send()
            .await
            .unwrap_or_else(|e| panic!("authorize {t} in {holder}: {e}"));
    }
}

/// The groups `holder`'s ingress rules name.
async fn named_by(c: &AwsClients, holder: &str) -> Vec<String> {
    let out = c
        .ec2
        .describe_security_groups()
        .group_ids(holder)
        .send()
        .await
        .unwrap();
    out.security_groups()
        .iter()
        .flat_map(|g| g.ip_permissions())
        .flat_map(|p| p.user_id_group_pairs())
        .filter_map(|u| u.group_id().map(str::to_string))
        .collect()
}

/// The account-wide Describes of the groups naming the ones to delete (ingress, egress), made
/// once per pass that deletes groups, whatever the VPCs' Describes were.
const NAMING: usize = 2;

/// The Describe of a deleted group's holders after their revokes, proving the rules gone: one
/// per group whose deletion revoked rules.
const PROOF: usize = 1;

fn describes(calls: &[String]) -> usize {
    calls
        .iter()
        .filter(|c| *c == "EC2.DescribeSecurityGroups")
        .count()
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn security_groups_are_planned_from_the_confirmations_description() {
    let (c, rec) = env().await;
    let n = cluster("sgplan");
    let (v, _subnets) = byo_network(&c).await;
    let (elsewhere, _) = byo_network(&c).await;
    let controllers = sg(&c, &v, &format!("{n}-lbc"), &lbc(&n)).await;
    let owned = sg(&c, &v, &format!("{n}-owned"), &[cloud(&n, "owned")]).await;
    // Not the cluster's, in the same VPC: each names the cluster's groups.
    let holder = sg(&c, &v, &format!("{n}-holder"), &[]).await;
    let shared = sg(&c, &v, &format!("{n}-shared"), &[cloud(&n, "shared")]).await;
    let other = format!("{n}-b");
    let theirs = sg(&c, &v, &format!("{other}-sg"), &[cloud(&other, "owned")]).await;
    allow_from(&c, &holder, &[&controllers, &owned, &theirs]).await;
    allow_from(&c, &shared, &[&owned]).await;
    // The same controller tag in another VPC: a twin cluster's.
    let twin = sg(&c, &elsewhere, &format!("{n}-twin"), &lbc(&n)).await;
    let req = PassRequest {
        vpc_ids: vec![v.clone()],
        ..PassRequest::new(&n)
    };
    rec.clear();
    let p2 = phase2_pass(&c, &req).await;
    assert!(p2.is_clear(), "{p2:#?}");
    // The confirmation's Describe of the VPC is the only one of the VPC; the other two ask who
    // in the account names the groups (ingress, egress), which no VPC's Describe can say.
    assert_eq!(
        describes(&rec.calls()),
        1 + NAMING + 2 * PROOF,
        "the confirmation's Describe of the VPC is the only one: {:?}",
        rec.calls()
    );
    assert!(!sg_exists(&c, &controllers).await, "the controller's group");
    assert!(!sg_exists(&c, &owned).await, "the cluster's group");
    for (keep, what) in [
        (&holder, "an untagged group"),
        (&shared, "a shared group"),
        (&theirs, "another cluster's group"),
        (&twin, "the twin's group in another VPC"),
    ] {
        assert!(sg_exists(&c, keep).await, "{what} must survive");
    }
    assert_eq!(
        named_by(&c, &holder).await,
        [theirs.as_str()],
        "rules naming the deleted groups are revoked, the rest kept"
    );
    assert!(named_by(&c, &shared).await.is_empty());
}

/// A group of the cluster outside the VPCs discovery described is still looked up, and the
/// rules naming it in its own VPC revoked, while the described VPC is not described again.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn a_cluster_group_outside_the_described_vpcs_is_looked_up() {
    let (c, rec) = env().await;
    let n = cluster("sgelse");
    let (v, _subnets) = byo_network(&c).await;
    let (elsewhere, _) = byo_network(&c).await;
    let controllers = sg(&c, &v, &format!("{n}-lbc"), &lbc(&n)).await;
    let far = sg(&c, &elsewhere, &format!("{n}-far"), &[cloud(&n, "owned")]).await;
    let holder = sg(&c, &elsewhere, &format!("{n}-holder"), &[]).await;
    let untagged = sg(&c, &elsewhere, &format!("{n}-untagged"), &[]).await;
    allow_from(&c, &holder, &[&far, &untagged]).await;
    let req = PassRequest {
        vpc_ids: vec![v.clone()],
        ..PassRequest::new(&n)
    };
    rec.clear();
    let p2 = phase2_pass(&c, &req).await;
    assert!(p2.is_clear(), "{p2:#?}");
    // The confirmation's, the lookup of the group elsewhere, and its VPC's groups.
    assert_eq!(
        describes(&rec.calls()),
        3 + NAMING + PROOF,
        "{:?}",
        rec.calls()
    );
    assert!(!sg_exists(&c, &controllers).await);
    assert!(!sg_exists(&c, &far).await);
    assert!(sg_exists(&c, &holder).await);
    assert!(sg_exists(&c, &untagged).await);
    assert_eq!(named_by(&c, &holder).await, [untagged.as_str()]);
}

/// Without a controller's group to confirm, the cluster's groups are looked for in its VPC
/// first: one Describe of that VPC finds them and the rules naming them. With no VPC known,
/// each is looked up by id, then its VPC described.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn the_cluster_groups_are_looked_for_in_its_vpc_first() {
    let (c, rec) = env().await;
    let n = cluster("sgvpc");
    let (v, _subnets) = byo_network(&c).await;
    let owned = sg(&c, &v, &format!("{n}-owned"), &[cloud(&n, "owned")]).await;
    let holder = sg(&c, &v, &format!("{n}-holder"), &[]).await;
    let other = format!("{n}-b");
    let theirs = sg(&c, &v, &format!("{other}-sg"), &[cloud(&other, "owned")]).await;
    allow_from(&c, &holder, &[&owned, &theirs]).await;
    let req = PassRequest {
        vpc_ids: vec![v.clone()],
        ..PassRequest::new(&n)
    };
    rec.clear();
    let p2 = phase2_pass(&c, &req).await;
    assert!(p2.is_clear(), "{p2:#?}");
    assert_eq!(
        describes(&rec.calls()),
        1 + NAMING + PROOF,
        "{:?}",
        rec.calls()
    );
    assert!(!sg_exists(&c, &owned).await);
    assert!(sg_exists(&c, &holder).await);
    assert!(sg_exists(&c, &theirs).await, "another cluster's group");
    assert_eq!(named_by(&c, &holder).await, [theirs.as_str()]);

    let unplaced = sg(&c, &v, &format!("{n}-unplaced"), &[cloud(&n, "owned")]).await;
    allow_from(&c, &holder, &[&unplaced]).await;
    rec.clear();
    let p2 = phase2_pass(&c, &PassRequest::new(&n)).await;
    assert!(p2.is_clear(), "{p2:#?}");
    assert_eq!(
        describes(&rec.calls()),
        2 + NAMING + PROOF,
        "{:?}",
        rec.calls()
    );
    assert!(!sg_exists(&c, &unplaced).await);
    assert_eq!(named_by(&c, &holder).await, [theirs.as_str()]);
}
