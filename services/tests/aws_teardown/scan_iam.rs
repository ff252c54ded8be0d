//! IAM in the leak scan (issue #54) on LocalStack: in a fresh account, Karpenter's instance
//! profiles of a deleted cluster (one tagged for us-east-1, one for eu-west-1), of a live cluster
//! whose name extends the deleted one's, and an IRSA OIDC provider. One listing of the account
//! serves both regions; the deleted cluster's profile is a candidate in the region its tags name
//! only, the live cluster's never (and is not even read), the OIDC provider is reported without
//! proof and never a candidate. A teardown by the name then removes the profile it was claimed
//! for and keeps the twin and the live cluster's.

use crate::eks::eks;
use crate::fixtures::*;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use sweeper_aws::phases::{AwsClients, PassRequest};
use sweeper_aws::scan::iam::account_iam;
use sweeper_aws::scan::{ScanInput, scan_region};
use sweeper_aws::testing::leaks::{karpenter_profile, node_role};
use sweeper_aws::testing::localstack::sdk_as;

fn fresh_account() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!(
        "{}",
        200_000_000_000 + (nanos / 1000 + 31) % 700_000_000_000
    )
}

async fn clients_in(account: &str, region: &str) -> AwsClients {
    let mut c = localstack::retrying_clients(&sdk_as(&sdk().await, region, account));
    c.eks = eks(Vec::new());
    c
}

use sweeper_aws::testing::localstack;

async fn profile_exists(c: &AwsClients, name: &str) -> bool {
    c.iam
        .get_instance_profile()
        .instance_profile_name(name)
        .send()
        .await
        .is_ok()
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn karpenters_profiles_of_a_deleted_cluster_are_candidates_where_their_tags_say() {
    let account = fresh_account();
    let (us, eu) = (
        clients_in(&account, "us-east-1").await,
        clients_in(&account, "eu-west-1").await,
    );
    let p = cluster("scaniam");
    let (dead, live) = (p.clone(), format!("{p}-live"));
    let role = format!("{p}-node");
    node_role(&us, &role).await;
    let here = karpenter_profile(&us, &dead, "1", "us-east-1", &role).await;
    let twin = karpenter_profile(&us, &dead, "2", "eu-west-1", &role).await;
    let lives = karpenter_profile(&us, &live, "1", "us-east-1", &role).await;
    us.iam
        .create_open_id_connect_provider()
        .url(format!(
            "https://oidc.eks.us-east-1.amazonaws.com/id/{}",
            p.to_uppercase()
        ))
        .client_id_list("sts.amazonaws.com")
        .thumbprint_list("9e99a48a9960b14926bb7f3b02e22da2b0ab7280")
        .send()
        .await
        .expect("CreateOpenIDConnectProvider");

    let live_names: BTreeSet<String> = [live.clone()].into();
    let iam = account_iam(&us, &live_names)
        .await
        .expect("the account's IAM");
    assert_eq!(
        iam.calls.get("iam.ListInstanceProfiles"),
        Some(&1),
        "{:?}",
        iam.calls
    );
    assert_eq!(
        iam.calls.get("iam.GetInstanceProfile"),
        Some(&2),
        "only the deleted cluster's two profiles are read, never the live one's: {:?}",
        iam.calls
    );
    let input = ScanInput {
        live: live_names,
        iam: [(account.clone(), Arc::new(iam))].into(),
        ..Default::default()
    };
    let s_us = scan_region(&us, &account, "us-east-1", &input)
        .await
        .expect("scan");
    let s_eu = scan_region(&eu, &account, "eu-west-1", &input)
        .await
        .expect("scan");
    let profiles = |s: &sweeper_aws::scan::RegionScan, cluster: &str| -> Vec<String> {
        s.candidates
            .iter()
            .filter(|c| c.cluster == cluster)
            .flat_map(|c| &c.resources)
            .filter(|r| r.kind == "iam:instance-profile")
            .map(|r| r.arn.rsplit('/').next().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(
        profiles(&s_us, &dead),
        std::slice::from_ref(&here),
        "{s_us:#?}"
    );
    assert_eq!(
        profiles(&s_eu, &dead),
        std::slice::from_ref(&twin),
        "{s_eu:#?}"
    );
    for s in [&s_us, &s_eu] {
        assert!(!s.candidates.iter().any(|c| c.cluster == live), "{s:#?}");
    }
    let r = s_us
        .candidates
        .iter()
        .flat_map(|c| &c.resources)
        .find(|r| r.kind == "iam:instance-profile");
    let by = &r.expect("the profile").deleted_by;
    assert_eq!(by.step, "instance-profile");
    assert!(
        s_us.unproven
            .iter()
            .any(|u| u.kind == "iam:oidc-provider" && u.arn.contains(&p.to_uppercase())),
        "the OIDC provider is reported without proof: {:?}",
        s_us.unproven
    );
    assert!(
        !s_us
            .candidates
            .iter()
            .flat_map(|c| &c.resources)
            .any(|r| r.kind == "iam:oidc-provider"),
        "never a candidate"
    );

    // A teardown by the name, in us-east-1: the profile claimed there, nothing else. A pass that
    // deleted something is not `done` (the next one proves nothing is left): passes until done.
    let reports = until_done(&us, &PassRequest::new(&dead), 5).await;
    let deleted: Vec<&str> = reports
        .iter()
        .flat_map(|r| &r.phases)
        .flat_map(|p| &p.deleted)
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(
        deleted.len(),
        1,
        "only the profile claimed here: {deleted:?}"
    );
    assert!(
        !profile_exists(&us, &here).await,
        "the deleted cluster's profile"
    );
    assert!(profile_exists(&us, &twin).await, "another region's twin");
    assert!(profile_exists(&us, &lives).await, "the live cluster's");
}
