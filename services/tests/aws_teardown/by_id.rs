//! Describes by ARN or name (`discovery::by_id`): what the controller-tag confirmation uses for
//! load balancers and target groups. One of them deleted since discovery named it must not make
//! the others disappear, nor fail the confirmation.

use crate::fixtures::*;
use sweeper_aws::locate::by_id;
use sweeper_aws::sdk::elbv2::types::LoadBalancerTypeEnum;

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn a_resource_gone_since_discovery_leaves_the_others_described() {
    let (c, rec) = env().await;
    let n = cluster("byid");
    let short = &n[n.len() - 6..];
    let (v, subnets) = byo_network(&c).await;
    let app = LoadBalancerTypeEnum::Application;
    let alb = v2_lb(&c, &format!("{short}-alb"), app.clone(), &subnets, &[]).await;
    let gone_alb = v2_lb(&c, &format!("{short}-gone"), app, &subnets, &[]).await;
    let classic = format!("{short}-clb");
    classic_lb(&c, &classic, &subnets[0], &[]).await;
    let tg = tg(&c, &format!("{short}-tg"), &v, &[]).await;
    let gone_tg = crate::fixtures::tg(&c, &format!("{short}-gtg"), &v, &[]).await;

    // All there: one call per API, nothing else.
    rec.clear();
    let mut lbs = by_id::load_balancers(
        &c,
        std::slice::from_ref(&alb),
        std::slice::from_ref(&classic),
    )
    .await
    .unwrap();
    lbs.sort();
    let mut want = vec![
        (alb.clone(), Some(v.clone())),
        (classic.clone(), Some(v.clone())),
    ];
    want.sort();
    assert_eq!(lbs, want);
    assert_eq!(
        rec.calls(),
        [
            "ElasticLoadBalancingv2.DescribeLoadBalancers",
            "ElasticLoadBalancing.DescribeLoadBalancers"
        ]
    );

    c.elbv2
        .delete_load_balancer()
        .load_balancer_arn(&gone_alb)
        .send()
        .await
        .unwrap();
    c.elbv2
        .delete_target_group()
        .target_group_arn(&gone_tg)
        .send()
        .await
        .unwrap();
    let lbs = by_id::load_balancers(&c, &[alb.clone(), gone_alb.clone()], &[])
        .await
        .unwrap();
    assert_eq!(
        lbs,
        [(alb.clone(), Some(v.clone()))],
        "the gone one is simply absent"
    );
    let tgs = by_id::target_groups(&c, &[gone_tg.clone(), tg.clone()])
        .await
        .unwrap();
    assert_eq!(
        tgs.iter().map(|t| t.arn.as_str()).collect::<Vec<_>>(),
        [tg.as_str()]
    );
    assert_eq!(tgs[0].vpc.as_deref(), Some(v.as_str()));
}
