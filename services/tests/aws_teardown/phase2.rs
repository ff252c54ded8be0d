use crate::fixtures::*;
use sweeper_aws::phases::{GcTask, PassRequest, teardown_pass};
use sweeper_aws::sdk::elbv2::types::LoadBalancerTypeEnum;

/// Everything the cloud provider would tag for `n` in `v`, plus survivors. Returns
/// (classic name, alb, nlb, tg, sg, survivors sg ids, volume).
struct World {
    classic: String,
    alb: String,
    nlb: String,
    tg: String,
    sg: String,
    keep_sgs: Vec<String>,
    /// CAPA's own group (tagged by both): never phase 2's; phase 1 deletes it.
    capa_sg: String,
    keep_classic: String,
    keep_tg: String,
    vol: String,
    eni: String,
    keep_eni: String,
    vpc: String,
    subnets: Vec<String>,
}

async fn world(c: &sweeper_aws::phases::AwsClients, n: &str) -> World {
    let other = format!("{n}-b");
    let (v, subnets) = byo_network(c).await;
    let owned = [cloud(n, "owned")];
    let classic = format!("{n}-clb");
    classic_lb(c, &classic, &subnets[0], &owned).await;
    let alb = v2_lb(
        c,
        &format!("{n}-alb"),
        LoadBalancerTypeEnum::Application,
        &subnets,
        &owned,
    )
    .await;
    let nlb = v2_lb(
        c,
        &format!("{n}-nlb"),
        LoadBalancerTypeEnum::Network,
        &subnets,
        &owned,
    )
    .await;
    let tg = tg(c, &format!("{n}-tg"), &v, &owned).await;
    listener(c, &alb, &tg).await;
    let sg = sg(c, &v, &format!("{n}-sg"), &owned).await;
    let keep_sgs = vec![
        crate::fixtures::sg(c, &v, &format!("{n}-shared"), &[cloud(n, "shared")]).await,
        crate::fixtures::sg(c, &v, &format!("{n}-other"), &[cloud(&other, "owned")]).await,
        crate::fixtures::sg(c, &v, &format!("{n}-untagged"), &[]).await,
        crate::fixtures::sg(
            c,
            &v,
            &format!("{n}-eks"),
            &[cloud(n, "owned"), ("aws:eks:cluster-name".into(), n.into())],
        )
        .await,
    ];
    let capa_sg =
        crate::fixtures::sg(c, &v, &format!("{n}-capa"), &[cloud(n, "owned"), capa(n)]).await;
    let keep_classic = format!("{other}-clb");
    classic_lb(c, &keep_classic, &subnets[0], &[cloud(&other, "owned")]).await;
    let keep_tg = crate::fixtures::tg(c, &format!("{n}-tgs"), &v, &[cloud(n, "shared")]).await;
    let vol = volume(c, &owned).await;
    // A detached interface in the cluster's group goes; one in an untagged group stays.
    let eni = eni(c, &subnets[0], &sg).await;
    let keep_eni = crate::fixtures::eni(c, &subnets[0], &keep_sgs[2]).await;
    World {
        eni,
        keep_eni,
        classic,
        alb,
        nlb,
        tg,
        sg,
        keep_sgs,
        capa_sg,
        keep_classic,
        keep_tg,
        vol,
        vpc: v,
        subnets,
    }
}

async fn assert_survivors(c: &sweeper_aws::phases::AwsClients, w: &World) {
    for s in &w.keep_sgs {
        assert!(sg_exists(c, s).await, "{s} must survive");
    }
    assert!(classic_exists(c, &w.keep_classic).await);
    assert!(tg_exists(c, &w.keep_tg).await);
    assert!(volume_exists(c, &w.vol).await);
    assert!(eni_exists(c, &w.keep_eni).await);
    assert!(vpc_exists(c, &w.vpc).await);
    for s in &w.subnets {
        assert!(subnet_exists(c, s).await);
    }
}

async fn check_external(alternative: bool) {
    let (c, rec) = env().await;
    let n = cluster(if alternative { "p2alt" } else { "p2" });
    let w = world(&c, &n).await;
    let req = PassRequest {
        alternative_discovery: alternative,
        ..PassRequest::new(&n)
    };
    until_done(&c, &req, 20).await;
    assert!(!classic_exists(&c, &w.classic).await);
    assert!(!v2_exists(&c, &w.alb).await);
    assert!(!v2_exists(&c, &w.nlb).await);
    assert!(!tg_exists(&c, &w.tg).await);
    assert!(!sg_exists(&c, &w.sg).await);
    assert!(!eni_exists(&c, &w.eni).await);
    assert!(!sg_exists(&c, &w.capa_sg).await, "CAPA's group: phase 1's");
    assert_survivors(&c, &w).await;
    let calls = rec.calls();
    // The target group is deleted only after the load balancer that used it.
    let lb = first(&calls, "ElasticLoadBalancingv2.DeleteLoadBalancer");
    assert!(
        lb < first(&calls, "ElasticLoadBalancingv2.DeleteTargetGroup"),
        "{calls:?}"
    );
    assert_eq!(
        calls
            .iter()
            .any(|c| c == "ResourceGroupsTaggingAPI.GetResources"),
        !alternative,
        "{calls:?}"
    );
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn phase2_deletes_owned_external_resources_and_keeps_the_rest() {
    check_external(false).await;
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn phase2_alternative_discovery_without_the_tagging_api() {
    check_external(true).await;
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn phase2_opted_out_keeps_external_resources() {
    let (c, _rec) = env().await;
    let n = cluster("p2off");
    let w = world(&c, &n).await;
    let inst = instance(&c, &w.subnets[0], &[capa(&n)]).await;
    let req = PassRequest {
        external_gc: false,
        ..PassRequest::new(&n)
    };
    until_done(&c, &req, 20).await;
    assert_eq!(
        instance_state(&c, &inst).await,
        "terminated",
        "phase 1 still runs"
    );
    assert!(classic_exists(&c, &w.classic).await);
    assert!(v2_exists(&c, &w.alb).await);
    assert!(tg_exists(&c, &w.tg).await);
    assert!(sg_exists(&c, &w.sg).await);
    assert!(eni_exists(&c, &w.eni).await);
    assert!(
        !sg_exists(&c, &w.capa_sg).await,
        "phase 1 still deletes CAPA's own group"
    );
    assert_survivors(&c, &w).await;
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn task_selection_limits_phase2() {
    let (c, _rec) = env().await;
    let n = cluster("p2sel");
    let (v, subnets) = byo_network(&c).await;
    let owned = [cloud(&n, "owned")];
    let lb = v2_lb(
        &c,
        &format!("{n}-alb"),
        LoadBalancerTypeEnum::Application,
        &subnets,
        &owned,
    )
    .await;
    let t = tg(&c, &format!("{n}-tg"), &v, &owned).await;
    let used = tg(&c, &format!("{n}-used"), &v, &owned).await;
    listener(&c, &lb, &used).await;
    let s = sg(&c, &v, &format!("{n}-sg"), &owned).await;
    let req = PassRequest {
        tasks: Some(vec!["target-group".parse::<GcTask>().unwrap()]),
        ..PassRequest::new(&n)
    };
    let report = teardown_pass(&c, &req).await;
    let p2 = &report.phases[1];
    let deleted: Vec<String> = p2.deleted.iter().map(|r| r.id.clone()).collect();
    assert_eq!(deleted, vec![t.clone()], "{p2:#?}");
    // Still attached to a live load balancer that this selection does not delete: in use.
    assert_eq!(p2.remaining.len(), 1, "{p2:#?}");
    assert_eq!(p2.remaining[0].0.id, used);
    assert!(p2.remaining[0].1.message.contains("in use"), "{p2:#?}");
    assert!(!report.done && !report.phases[2].started);
    assert!(!tg_exists(&c, &t).await);
    assert!(tg_exists(&c, &used).await);
    assert!(v2_exists(&c, &lb).await);
    assert!(sg_exists(&c, &s).await);
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn security_group_cross_references_are_revoked_before_delete() {
    let (c, rec) = env().await;
    let n = cluster("p2ref");
    let (v, _subnets) = byo_network(&c).await;
    let target = sg(&c, &v, &format!("{n}-sg"), &[cloud(&n, "owned")]).await;
    let holder = sg(&c, &v, &format!("{n}-holder"), &[]).await;
    let pair = sweeper_aws::sdk::ec2::types::UserIdGroupPair::builder()
        .group_id(&target)
        .build();
    let perm = sweeper_aws::sdk::ec2::types::IpPermission::builder()
        .ip_protocol("tcp")
        .from_port(443)
        .to_port(443)
        .user_id_group_pairs(pair)
        .build();
    c.ec2
        .authorize_security_group_ingress()
        .group_id(&holder)
        .ip_permissions(perm.clone())
        .send()
        .await
        .unwrap();
    c.ec2
        .authorize_security_group_egress()
        .group_id(&holder)
        .ip_permissions(perm)
        .send()
        .await
        .unwrap();
    until_done(&c, &PassRequest::new(&n), 10).await;
    assert!(!sg_exists(&c, &target).await);
    assert!(
        sg_exists(&c, &holder).await,
        "the referencing group survives, minus its rules"
    );
    let calls = rec.calls();
    let del = first(&calls, "EC2.DeleteSecurityGroup");
    assert!(
        first(&calls, "EC2.RevokeSecurityGroupIngress") < del,
        "{calls:?}"
    );
    assert!(
        first(&calls, "EC2.RevokeSecurityGroupEgress") < del,
        "{calls:?}"
    );
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn paginates_over_160_security_groups() {
    use futures::StreamExt;
    let (c, rec) = env().await;
    let n = cluster("p2pg");
    let (v, _subnets) = byo_network(&c).await;
    let owned = [cloud(&n, "owned")];
    // Concurrent creates through clients with the SDK's retries: LocalStack sometimes answers
    // concurrent writes with a 500 InternalError.
    let setup = retrying_clients().await;
    let ids: Vec<String> = futures::stream::iter(0..160)
        .map(|i| {
            let (c, v, n, owned) = (&setup, &v, &n, &owned);
            async move { sg(c, v, &format!("{n}-{i}"), owned).await }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let keep = sg(&c, &v, &format!("{n}-shared"), &[cloud(&n, "shared")]).await;
    let found = sweeper_aws::locate::tagging::resources_with_tag(
        &c.tagging,
        &format!("kubernetes.io/cluster/{n}"),
        &["owned"],
        None,
    )
    .await
    .unwrap();
    let mut seen: Vec<String> = found
        .resources
        .iter()
        .map(|r| r.arn.resource_id().to_string())
        .collect();
    seen.sort();
    seen.dedup();
    eprintln!(
        "tagging: {} resources ({} unique) in {} pages",
        found.resources.len(),
        seen.len(),
        found.pages
    );
    rec.clear();
    let reports = until_done(&c, &PassRequest::new(&n), 10).await;
    // Pages of the service's largest size: phase 1's query of CAPA's key (one page, nothing
    // found), then the first discovery reads the cluster tag's 160 in two, one per controller tag.
    let calls = rec.calls();
    let discovery = &calls[..first(&calls, "EC2.DeleteSecurityGroup")];
    let pages = discovery
        .iter()
        .filter(|c| *c == "ResourceGroupsTaggingAPI.GetResources")
        .count();
    assert_eq!(pages, 5, "{discovery:?}");
    let deleted: usize = reports.iter().map(|r| r.phases[1].deleted.len()).sum();
    assert_eq!(deleted, 160);
    for id in ids.iter().step_by(20) {
        assert!(!sg_exists(&c, id).await);
    }
    assert!(sg_exists(&c, &keep).await);
    // A later pass finds nothing and stays done.
    assert!(teardown_pass(&c, &PassRequest::new(&n)).await.done);
}
