use crate::fixtures::*;
use sweeper_aws::phases::PassRequest;
use sweeper_aws::sdk::elbv2::types::LoadBalancerTypeEnum;

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn phase1_terminates_capa_instances_and_the_api_server_lb() {
    // Phase 1's load balancers and target groups from one tagging query of CAPA's key.
    phase1_case("p1", false).await;
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn phase1_with_alternative_discovery_finds_the_same_by_the_regions_listings() {
    phase1_case("pa", true).await;
}

/// `prefix`: two characters, so that CAPA's target group name for the prefix-sharing cluster
/// (`apiserver-target-<cluster>-b`) stays within ELB's 32.
async fn phase1_case(prefix: &str, alternative_discovery: bool) {
    let (c, _rec) = env().await;
    let n = cluster(prefix);
    let req = PassRequest {
        alternative_discovery,
        ..PassRequest::new(&n)
    };
    let other = format!("{n}-b");
    let (v, subnets) = byo_network(&c).await;

    let mine = instance(&c, &subnets[0], &[capa(&n)]).await;
    let api_lb = format!("{n}-apiserver");
    classic_lb(&c, &api_lb, &subnets[0], &[capa(&n)]).await;
    let api_v2 = v2_lb(
        &c,
        &format!("{n}-api2"),
        LoadBalancerTypeEnum::Network,
        &subnets,
        &[capa(&n)],
    )
    .await;

    // CAPA's API-server target group behind its NLB (CAPA names it `apiserver-target-<hash>` and
    // tags it with its own key only), and a prefix-sharing cluster's: only ours goes.
    let tcp = || sweeper_aws::sdk::elbv2::types::ProtocolEnum::Tcp;
    let api_tg = format!("apiserver-target-{n}");
    let api_tg = fallible::target_group(&c, &api_tg, &v, tcp(), &[capa(&n)]).await;
    let api_tg = api_tg.expect("CreateTargetGroup");
    let held = fallible::listener(&c, &api_v2, &api_tg, tcp()).await;
    held.expect("CreateListener");
    let other_tg = format!("apiserver-target-{other}");
    let other_tg = fallible::target_group(&c, &other_tg, &v, tcp(), &[capa(&other)]).await;
    let other_tg = other_tg.expect("CreateTargetGroup");

    let other_inst = instance(&c, &subnets[0], &[capa(&other)]).await;
    let untagged = instance(&c, &subnets[0], &[]).await;
    let other_lb = format!("{other}-apiserver");
    classic_lb(&c, &other_lb, &subnets[0], &[capa(&other)]).await;
    let vol = volume(&c, &[capa(&n), cloud(&n, "owned")]).await;

    let reports = until_done(&c, &req, 20).await;
    let p1_deleted: Vec<_> = reports
        .iter()
        .flat_map(|r| r.phases[0].deleted.iter().map(|d| d.id.clone()))
        .collect();
    assert!(p1_deleted.contains(&api_lb), "{p1_deleted:?}");

    assert_eq!(instance_state(&c, &mine).await, "terminated");
    assert!(!classic_exists(&c, &api_lb).await);
    assert!(!v2_exists(&c, &api_v2).await);
    assert!(
        p1_deleted.contains(&api_tg),
        "CAPA's API-server target group, in phase 1: {p1_deleted:?}"
    );
    assert!(!tg_exists(&c, &api_tg).await);
    assert!(tg_exists(&c, &other_tg).await, "another cluster's group");

    assert_ne!(instance_state(&c, &other_inst).await, "terminated");
    assert_ne!(instance_state(&c, &untagged).await, "terminated");
    assert!(classic_exists(&c, &other_lb).await);
    assert!(
        volume_exists(&c, &vol).await,
        "EBS volumes are not a cleaner kind"
    );
    assert!(
        vpc_exists(&c, &v).await,
        "a bring-your-own VPC is never touched"
    );
    for s in &subnets {
        assert!(subnet_exists(&c, s).await);
    }
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn phase2_waits_while_phase1_has_work() {
    let (c, _rec) = env().await;
    let n = cluster("p1w");
    let (v, subnets) = byo_network(&c).await;
    instance(&c, &subnets[0], &[capa(&n)]).await;
    let ext = sg(&c, &v, &format!("{n}-ext"), &[cloud(&n, "owned")]).await;
    let first = sweeper_aws::phases::teardown_pass(&c, &PassRequest::new(&n)).await;
    // TerminateInstances answers `shutting-down`: the instance is reported waiting, and phase 2
    // (and 3) must not start in the same pass.
    let p1 = &first.phases[0];
    assert_eq!(p1.remaining.len(), 1, "{first:#?}");
    assert!(
        p1.remaining[0].1.message.contains("terminating"),
        "{first:#?}"
    );
    assert!(!first.done);
    assert!(
        !first.phases[1].started && !first.phases[2].started,
        "{first:#?}"
    );
    assert!(sg_exists(&c, &ext).await);
    until_done(&c, &PassRequest::new(&n), 20).await;
    assert!(!sg_exists(&c, &ext).await);
}
