use crate::fixtures::*;
use sweeper_aws::phases::{Failure, FailureKind, PassRequest, teardown_pass};
use sweeper_aws::sdk::elbv2::types::LoadBalancerTypeEnum;

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn injected_throttling_is_retried_and_the_pass_completes() {
    let (c, rec) = env().await;
    let n = cluster("thr");
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
    let s = sg(&c, &v, &format!("{n}-sg"), &owned).await;
    rec.clear();
    rec.throttle_first("ResourceGroupsTaggingAPI.GetResources", 1);
    rec.throttle_first("ElasticLoadBalancingv2.DeleteLoadBalancer", 2);
    rec.throttle_first("EC2.DeleteSecurityGroup", 3);
    let report = teardown_pass(&c, &PassRequest::new(&n)).await;
    assert!(report.phases.iter().all(|p| p.is_clear()), "{report:#?}");
    assert!(!v2_exists(&c, &lb).await);
    assert!(!sg_exists(&c, &s).await);
    let calls = rec.calls();
    let count = |op: &str| calls.iter().filter(|c| *c == op).count();
    assert_eq!(
        count("ElasticLoadBalancingv2.DeleteLoadBalancer"),
        3,
        "{calls:?}"
    );
    assert_eq!(count("EC2.DeleteSecurityGroup"), 4, "{calls:?}");
    assert!(
        count("ResourceGroupsTaggingAPI.GetResources") >= 2,
        "{calls:?}"
    );
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn throttling_beyond_the_retries_leaves_the_resource_remaining() {
    let (c, rec) = env().await;
    let n = cluster("thr2");
    let (v, _subnets) = byo_network(&c).await;
    let s = sg(&c, &v, &format!("{n}-sg"), &[cloud(&n, "owned")]).await;
    rec.throttle_first("EC2.DeleteSecurityGroup", 10);
    let report = teardown_pass(&c, &PassRequest::new(&n)).await;
    assert!(!report.done);
    let p2 = &report.phases[1];
    assert_eq!(p2.remaining.len(), 1, "{p2:#?}");
    // Left remaining as throttled, by kind; the text still names AWS's code.
    assert_eq!(p2.remaining[0].1.kind, FailureKind::Throttled, "{p2:#?}");
    assert!(
        p2.remaining[0].1.message.contains("RequestLimitExceeded"),
        "{p2:#?}"
    );
    assert!(!report.phases[2].started);
    assert!(sg_exists(&c, &s).await);
    rec.throttle_first("EC2.DeleteSecurityGroup", 0);
    until_done(&c, &PassRequest::new(&n), 5).await;
    assert!(!sg_exists(&c, &s).await);
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn dry_run_plans_every_phase_and_deletes_nothing() {
    let (c, rec) = env().await;
    let n = cluster("dry");
    let v = vpc(&c, &[capa(&n)]).await;
    let sn = fallible::subnet(&c, &v, "10.0.1.0/24", AZ, &[capa(&n)])
        .await
        .unwrap();
    let sn2 = fallible::subnet(&c, &v, "10.0.2.0/24", "us-east-1b", &[capa(&n)])
        .await
        .unwrap();
    let inst = instance(&c, &sn, &[capa(&n)]).await;
    let owned = [cloud(&n, "owned")];
    let lb = v2_lb(
        &c,
        &format!("{n}-alb"),
        LoadBalancerTypeEnum::Application,
        &[sn.clone(), sn2],
        &owned,
    )
    .await;
    let t = tg(&c, &format!("{n}-tg"), &v, &owned).await;
    let s = sg(&c, &v, &format!("{n}-sg"), &owned).await;
    rec.clear();
    let req = PassRequest {
        dry_run: true,
        ..PassRequest::new(&n)
    };
    let report = teardown_pass(&c, &req).await;
    assert!(!report.done);
    let planned = |p: usize| {
        report.phases[p]
            .planned
            .iter()
            .map(|r| r.id.clone())
            .collect::<Vec<_>>()
    };
    assert!(planned(0).contains(&inst), "{report:#?}");
    assert!(planned(1).iter().any(|id| id == &lb), "{report:#?}");
    assert!(planned(1).iter().any(|id| id == &t), "{report:#?}");
    assert!(planned(1).iter().any(|id| id.ends_with(&s)), "{report:#?}");
    assert!(
        planned(2).contains(&v) && planned(2).contains(&sn),
        "{report:#?}"
    );
    assert!(
        report.phases[2].blockers.is_empty(),
        "what phases 1 and 2 would delete blocks nothing: {report:#?}"
    );
    assert!(report.phases.iter().all(|p| p.deleted.is_empty()));
    let calls = rec.calls();
    let mutating = [
        "Delete",
        "Terminate",
        "Revoke",
        "Release",
        "Detach",
        "Disassociate",
    ];
    assert!(
        !calls.iter().any(|c| mutating
            .iter()
            .any(|m| c.split('.').nth(1).is_some_and(|op| op.starts_with(m)))),
        "{calls:?}"
    );
    assert_ne!(instance_state(&c, &inst).await, "terminated");
    assert!(v2_exists(&c, &lb).await && tg_exists(&c, &t).await && sg_exists(&c, &s).await);
    assert!(vpc_exists(&c, &v).await && subnet_exists(&c, &sn).await);
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn production_clients_finish_a_cluster() {
    let sdk = sdk().await;
    let (setup, _rec) = env().await;
    let n = cluster("prod");
    let (v, _subnets) = byo_network(&setup).await;
    let s = sg(&setup, &v, &format!("{n}-sg"), &[cloud(&n, "owned")]).await;
    let c = sweeper_aws::phases::AwsClients::new(&sdk);
    let reports = until_done(&c, &PassRequest::new(&n), 5).await;
    assert_eq!(
        reports.len(),
        2,
        "one pass deletes, the next verifies: {reports:#?}"
    );
    assert!(!sg_exists(&c, &s).await);
    assert!(vpc_exists(&c, &v).await);
}

/// Leader election's AWS fence: with the gate closed no operation is sent, so nothing is deleted;
/// opened, the same pass deletes.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn a_closed_leader_gate_sends_no_aws_call() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use sweeper_aws::fence::AwsFence;
    use sweeper_aws::phases::AwsClients;

    let (c, _rec) = env().await;
    let n = cluster("gate");
    let (v, _subnets) = byo_network(&c).await;
    let s = sg(&c, &v, &format!("{n}-sg"), &[cloud(&n, "owned")]).await;

    let open = Arc::new(AtomicBool::new(false));
    let flag = open.clone();
    let gated = AwsClients::fenced(
        &sdk().await,
        AwsFence(Arc::new(move || flag.load(Ordering::SeqCst))),
    );
    let report = teardown_pass(&gated, &PassRequest::new(&n)).await;
    assert!(!report.done, "a fenced pass cannot finish: {report:#?}");
    let errors: Vec<&Failure> = report.phases.iter().flat_map(|p| &p.errors).collect();
    // Recognised by kind, and said to the user as before.
    assert!(
        errors
            .iter()
            .any(|e| e.kind == FailureKind::LeaderLost && e.message.contains("leader lease")),
        "the refusal is reported: {errors:?}"
    );
    assert!(sg_exists(&c, &s).await, "nothing deleted while fenced");

    open.store(true, Ordering::SeqCst);
    let report = teardown_pass(&gated, &PassRequest::new(&n)).await;
    assert!(
        report.phases.iter().all(|p| p.errors.is_empty()),
        "{report:#?}"
    );
    assert!(!sg_exists(&c, &s).await, "deleted once the gate opens");
}
