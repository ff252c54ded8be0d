//! external-dns records (issue #34): reported, never deleted (the delete is left to do), and
//! only those external-dns owns that point at a load balancer of the cluster.

use crate::fixtures::*;
use sweeper_aws::phases::{AwsClients, PassRequest, phase2_pass};
use sweeper_aws::sdk::elbv2::types::LoadBalancerTypeEnum;
use sweeper_aws::sdk::route53::types::{
    AliasTarget, Change, ChangeAction, ChangeBatch, ResourceRecord, ResourceRecordSet, RrType,
};

fn txt(owner: &str) -> String {
    format!(
        "\"heritage=external-dns,external-dns/owner={owner},external-dns/resource=service/default/web\""
    )
}

fn record(name: &str, ty: RrType, value: &str) -> Change {
    Change::builder()
        .action(ChangeAction::Create)
        .resource_record_set(
            ResourceRecordSet::builder()
                .name(name)
                .r#type(ty)
                .ttl(300)
                .resource_records(ResourceRecord::builder().value(value).build().unwrap())
                .build()
                .unwrap(),
        )
        .build()
        .unwrap()
}

fn alias(name: &str, target: &str) -> Change {
    Change::builder()
        .action(ChangeAction::Create)
        .resource_record_set(
            ResourceRecordSet::builder()
                .name(name)
                .r#type(RrType::A)
                .alias_target(
                    AliasTarget::builder()
                        .hosted_zone_id("Z35SXDOTRQ7X7K")
                        .dns_name(format!("dualstack.{target}."))
                        .evaluate_target_health(true)
                        .build()
                        .unwrap(),
                )
                .build()
                .unwrap(),
        )
        .build()
        .unwrap()
}

async fn names_in(c: &AwsClients, zone: &str) -> Vec<String> {
    c.route53
        .list_resource_record_sets()
        .hosted_zone_id(zone)
        .send()
        .await
        .unwrap()
        .resource_record_sets()
        .iter()
        .map(|r| format!("{} {}", r.name(), r.r#type().as_str()))
        .collect()
}

/// The cluster's load balancer has an external-dns alias (TXT companion in the newer `a-`
/// format) and a hand-made CNAME; another load balancer has an external-dns CNAME. Only the
/// first is reported, with its zone, name and owner id, in a dry run and in a real pass; the
/// pass deletes no record and the report does not hold the teardown.
#[tokio::test]
#[ignore = "needs LocalStack with route53: make env-up"]
async fn external_dns_records_of_the_clusters_load_balancers_are_reported_not_deleted() {
    let (c, _rec) = env().await;
    let plain = retrying_clients().await;
    let n = cluster("dns");
    let short = &n[n.len() - 6..];
    let (_vpc, subnets) = byo_network(&plain).await;
    let ours = v2_lb(
        &plain,
        &format!("k8s-{short}"),
        LoadBalancerTypeEnum::Network,
        &subnets,
        &[cloud(&n, "owned")],
    )
    .await;
    let others = v2_lb(
        &plain,
        &format!("other-{short}"),
        LoadBalancerTypeEnum::Network,
        &subnets,
        &[],
    )
    .await;
    let dns_of = |arn: String| {
        let plain = &plain;
        async move {
            plain
                .elbv2
                .describe_load_balancers()
                .load_balancer_arns(arn)
                .send()
                .await
                .unwrap()
                .load_balancers()[0]
                .dns_name()
                .unwrap()
                .to_string()
        }
    };
    let (ours_dns, others_dns) = (dns_of(ours).await, dns_of(others).await);
    let domain = format!("{n}.example.com");
    let zone = plain
        .route53
        .create_hosted_zone()
        .name(&domain)
        .caller_reference(&n)
        .send()
        .await
        .unwrap()
        .hosted_zone()
        .unwrap()
        .id()
        .trim_start_matches("/hostedzone/")
        .to_string();
    let changes = vec![
        alias(&format!("www.{domain}."), &ours_dns),
        record(&format!("a-www.{domain}."), RrType::Txt, &txt("c1")),
        record(&format!("hand.{domain}."), RrType::Cname, &ours_dns),
        record(&format!("api.{domain}."), RrType::Cname, &others_dns),
        record(&format!("api.{domain}."), RrType::Txt, &txt("c1")),
    ];
    plain
        .route53
        .change_resource_record_sets()
        .hosted_zone_id(&zone)
        .change_batch(
            ChangeBatch::builder()
                .set_changes(Some(changes))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let before = names_in(&plain, &zone).await;

    for dry_run in [true, false] {
        let req = PassRequest {
            dry_run,
            ..PassRequest::new(&n)
        };
        let p = phase2_pass(&c, &req).await;
        let kept: Vec<_> = p
            .kept
            .iter()
            .filter(|(r, _)| r.kind == "dns-record")
            .collect();
        assert_eq!(kept.len(), 1, "dry run {dry_run}: {p:#?}");
        let (r, why) = kept[0];
        assert_eq!(r.id, format!("{zone}/www.{domain}. A"));
        assert!(
            why.contains(&zone) && why.contains("owner id \"c1\"") && why.contains(&domain),
            "{why}"
        );
    }
    assert_eq!(
        names_in(&plain, &zone).await,
        before,
        "no record is deleted"
    );
}
