//! The leak scan (issue #45) on LocalStack: two fresh accounts, two regions, three orphaned
//! clusters (one EKS-shaped) beside live clusters whose names share their prefixes. The scan
//! reports exactly the orphans, with their counts and a cost that adds up from the price table;
//! a live cluster's resources never appear. Then a dry-run teardown of one orphan deletes
//! nothing, and a real one deletes exactly its resources and keeps the look-alikes.

use crate::eks::eks;
use crate::fixtures::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{SystemTime, UNIX_EPOCH};
use sweeper_aws::phases::{AwsClients, PassRequest, teardown_pass};
use sweeper_aws::scan::prices::region_prices;
use sweeper_aws::scan::{RegionScan, ScanInput, scan_region};
use sweeper_aws::testing::Recorder;
use sweeper_aws::testing::localstack::sdk_as;

/// A 12-digit LocalStack account no earlier run used (an access key id of 12 digits is the
/// account there), so the scan of it can be asserted exactly.
fn fresh_account(salt: u64) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!(
        "{}",
        200_000_000_000 + (nanos / 1000 + salt * 7919) % 700_000_000_000
    )
}

/// Recorded clients in `account` and `region`, with an EKS whose ListClusters names `live_eks`.
async fn clients_in(account: &str, region: &str, live_eks: &[&str]) -> (AwsClients, Recorder) {
    let sdk = sdk_as(&sdk().await, region, account);
    let rec = Recorder::new();
    let mut c = rec.clients(&sdk);
    c.eks = eks(live_eks
        .iter()
        .map(|n| (n.to_string(), String::new()))
        .collect());
    (c, rec)
}

fn names(s: &RegionScan) -> BTreeSet<&str> {
    s.candidates.iter().map(|c| c.cluster.as_str()).collect()
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn the_scan_reports_exactly_the_orphans_and_a_teardown_takes_exactly_one() {
    let p = cluster("scan");
    let (a, b) = (fresh_account(1), fresh_account(2));
    let (o1, o1_live) = (format!("{p}-o1"), format!("{p}-o1-live"));
    let (o2, o2_live) = (format!("{p}-o2"), format!("{p}-o2-b"));
    let (e3, e3_eks, eks_live) = (
        format!("{p}-e3"),
        format!("ns_{p}-e3"),
        format!("{p}-e3-eks"),
    );
    let gone_shared = format!("{p}-s4");

    // Account A, us-east-1: orphan o1 (a classic load balancer, a security group), live o1-live.
    let (a1, a1_rec) = clients_in(&a, "us-east-1", &[]).await;
    let net = network_in(&a1, "us-east-1a").await;
    classic_lb(&a1, &format!("{p}-o1"), &net.subnet, &[cloud(&o1, "owned")]).await;
    let o1_sg = sg(&a1, &net.vpc, &format!("{o1}-sg"), &[cloud(&o1, "owned")]).await;
    let live_sg = sg(
        &a1,
        &net.vpc,
        &format!("{o1_live}-sg"),
        &[cloud(&o1_live, "owned")],
    )
    .await;
    let shared_sg = sg(
        &a1,
        &net.vpc,
        &format!("{gone_shared}-sg"),
        &[cloud(&gone_shared, "shared")],
    )
    .await;

    // Account A, eu-west-1: orphan o2 (an EBS CSI volume), live o2-b (a volume too).
    let (a2, _a2_rec) = clients_in(&a, "eu-west-1", &[]).await;
    let csi = |c: &str| {
        vec![
            ("CSIVolumeName".to_string(), "pvc-1".to_string()),
            ("KubernetesCluster".to_string(), c.to_string()),
        ]
    };
    let o2_vol = fallible::volume(&a2, "eu-west-1a", &csi(&o2))
        .await
        .unwrap();
    fallible::volume(&a2, "eu-west-1a", &csi(&o2_live))
        .await
        .unwrap();

    // Account B, us-east-1: EKS-shaped orphan e3 (CAPA's name on the network, the EKS name on
    // the cloud provider's group) and a live EKS cluster that only EKS knows.
    let (b1, _b1_rec) = clients_in(&b, "us-east-1", &[&eks_live]).await;
    let bnet = network_in(&b1, "us-east-1a").await;
    tag(&b1, &bnet.vpc, &capa(&e3).0, "owned").await;
    sg(
        &b1,
        &bnet.vpc,
        &format!("{e3}-sg"),
        &[cloud(&e3_eks, "owned"), capa(&e3)],
    )
    .await;
    sg(
        &b1,
        &bnet.vpc,
        &format!("{eks_live}-sg"),
        &[cloud(&eks_live, "owned")],
    )
    .await;
    // Account B, eu-west-1: nothing tagged.
    let (b2, _b2_rec) = clients_in(&b, "eu-west-1", &[]).await;

    let input = ScanInput {
        live: [o1_live.clone(), o2_live.clone()].into(),
        ..Default::default()
    };
    let scan = |c: AwsClients, account: String, region: &'static str| {
        let input = input.clone();
        async move { scan_region(&c, &account, region, &input).await.unwrap() }
    };
    let sa1 = scan(a1.clone(), a.clone(), "us-east-1").await;
    let sa2 = scan(a2.clone(), a.clone(), "eu-west-1").await;
    let sb1 = scan(b1.clone(), b.clone(), "us-east-1").await;
    let sb2 = scan(b2.clone(), b.clone(), "eu-west-1").await;

    assert_eq!(names(&sa1), [o1.as_str()].into(), "{sa1:#?}");
    assert_eq!(names(&sa2), [o2.as_str()].into(), "{sa2:#?}");
    assert_eq!(
        names(&sb1),
        [e3.as_str(), e3_eks.as_str()].into(),
        "{sb1:#?}"
    );
    assert!(sb2.candidates.is_empty() && sb2.held.is_empty(), "{sb2:#?}");
    // A live cluster's resources never appear among the candidates'.
    for s in [&sa1, &sa2, &sb1] {
        for c in &s.candidates {
            for r in &c.resources {
                assert!(!r.arn.contains(&live_sg), "a live cluster's group: {r:?}");
                assert!(
                    r.proofs
                        .iter()
                        .all(|p| p.tag.ends_with("=owned")
                            || !p.tag.contains("kubernetes.io/cluster/")),
                    "{r:?}"
                );
            }
        }
    }
    let held: BTreeMap<&str, usize> = sa1
        .held
        .iter()
        .map(|h| (h.cluster.as_str(), h.resources))
        .collect();
    assert_eq!(
        held,
        BTreeMap::from([(o1_live.as_str(), 1)]),
        "shared claims nothing"
    );
    assert!(
        sb1.held.iter().any(|h| h.cluster == eks_live),
        "a live EKS cluster's name is held"
    );
    assert!(
        !sa1.candidates.iter().any(|c| c.cluster == gone_shared),
        "{shared_sg}: shared"
    );

    // Counts and costs, from the price table.
    let c1 = &sa1.candidates[0];
    assert_eq!(
        c1.resources_by_kind,
        BTreeMap::from([
            ("ec2:security-group".to_string(), 1),
            ("elasticloadbalancing:loadbalancer".to_string(), 1)
        ]),
        "{c1:#?}"
    );
    let us = region_prices("us-east-1").unwrap();
    let want = us.classic_lb_hour.unwrap() * 730.0;
    assert!(
        (c1.cost.dollars_per_month - want).abs() < 1e-6 && c1.cost.unknown == 0,
        "{:?}",
        c1.cost
    );
    let c2 = &sa2.candidates[0];
    assert_eq!(
        c2.resources_by_kind,
        BTreeMap::from([("ec2:volume".to_string(), 1)])
    );
    let vol = &c2.resources[0];
    assert!(vol.arn.ends_with(&o2_vol));
    let ty = vol
        .sizing
        .volume_type
        .clone()
        .expect("the volume was described");
    let eu = region_prices("eu-west-1").unwrap();
    let gb = eu
        .ebs_gb_month
        .iter()
        .find(|(t, _)| *t == ty)
        .map(|(_, p)| *p)
        .unwrap();
    assert!(
        (c2.cost.dollars_per_month - gb * 1.0).abs() < 1e-6,
        "{:?}",
        c2.cost
    );
    assert!(c2.oldest.is_some(), "a volume's creation time is given");
    let e = sb1.candidates.iter().find(|c| c.cluster == e3).unwrap();
    assert_eq!(
        e.also_named,
        [e3_eks.clone()].into(),
        "the EKS pair is named together"
    );
    // Per (account, region): pages, the EKS listing, the candidates' volumes; nothing per name.
    assert_eq!(sa2.calls.get("ec2.DescribeVolumes"), Some(&1));
    assert_eq!(
        sa1.calls.keys().copied().collect::<Vec<_>>(),
        ["eks.ListClusters", "tagging.GetResources"]
    );
    sweeper_aws::testing::iam::assert_in_policy(&a1_rec.calls());

    // A dry-run teardown of o1 deletes nothing; a real one deletes exactly o1's.
    let dry = PassRequest {
        dry_run: true,
        ..PassRequest::new(&o1)
    };
    let r = teardown_pass(&a1, &dry).await;
    assert!(r.phases.iter().any(|p| !p.planned.is_empty()), "{r:#?}");
    assert!(names(&scan(a1.clone(), a.clone(), "us-east-1").await).contains(o1.as_str()));
    until_done(&a1, &PassRequest::new(&o1), 10).await;
    let after = scan(a1.clone(), a.clone(), "us-east-1").await;
    assert!(after.candidates.is_empty(), "o1 is gone: {after:#?}");
    assert!(
        after.held.iter().any(|h| h.cluster == o1_live),
        "its look-alike stays: {after:#?}"
    );
    let groups = a1
        .ec2
        .describe_security_groups()
        .group_ids(&live_sg)
        .send()
        .await
        .unwrap();
    assert_eq!(groups.security_groups().len(), 1, "o1-live's group is kept");
    let gone = a1
        .ec2
        .describe_security_groups()
        .group_ids(&o1_sg)
        .send()
        .await;
    assert!(
        gone.is_err() || gone.unwrap().security_groups().is_empty(),
        "o1's group is deleted"
    );
}
