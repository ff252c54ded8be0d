//! external-dns records (issue #34): only those external-dns owns that point at a load balancer
//! of the cluster are found; they are reported by default, and deleted with their TXT record,
//! before their load balancer, only under the owner id the cluster names.

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
/// first is reported, with its zone, name and owner id, in a dry run and in a real pass; without
/// the owner-id annotation the pass deletes no record and the report does not hold the teardown.
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

/// A hosted zone (new, named for the test) with `changes` created; its id.
async fn zone_with(plain: &AwsClients, n: &str, domain: &str, changes: Vec<Change>) -> String {
    let zone = plain
        .route53
        .create_hosted_zone()
        .name(domain)
        .caller_reference(n)
        .send()
        .await
        .unwrap()
        .hosted_zone()
        .unwrap()
        .id()
        .trim_start_matches("/hostedzone/")
        .to_string();
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
    zone
}

/// With the cluster's owner id named: its pair (alias + `a-` TXT) goes in one change batch,
/// before its load balancer, in the pass that deletes the load balancer. A `default`-owned
/// pair and another owner's pair at the same load balancer, and a pair of the cluster's owner
/// pointing at another load balancer, all stay; so does that other load balancer. A dry run
/// first plans the pair and changes nothing.
#[tokio::test]
#[ignore = "needs LocalStack with route53: make env-up"]
async fn the_clusters_owner_id_deletes_its_pair_before_its_load_balancer_and_nothing_else() {
    let (c, rec) = env().await;
    let plain = retrying_clients().await;
    let n = cluster("dnsdel");
    let short = &n[n.len() - 6..];
    let owner = format!("owner-{short}");
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
    let describe = |arn: String| {
        let plain = &plain;
        async move {
            plain
                .elbv2
                .describe_load_balancers()
                .load_balancer_arns(arn)
                .send()
                .await
                .map(|o| {
                    o.load_balancers()
                        .first()
                        .and_then(|l| l.dns_name())
                        .map(str::to_string)
                })
                .unwrap_or(None)
        }
    };
    let ours_dns = describe(ours.clone()).await.unwrap();
    let others_dns = describe(others.clone()).await.unwrap();
    let domain = format!("{n}.example.com");
    let zone = zone_with(
        &plain,
        &n,
        &domain,
        vec![
            // The cluster's: deleted.
            alias(&format!("www.{domain}."), &ours_dns),
            record(&format!("a-www.{domain}."), RrType::Txt, &txt(&owner)),
            // The shared default owner: stays.
            record(&format!("dflt.{domain}."), RrType::Cname, &ours_dns),
            record(
                &format!("cname-dflt.{domain}."),
                RrType::Txt,
                &txt("default"),
            ),
            // Another cluster's owner id: stays.
            record(&format!("theirs.{domain}."), RrType::Cname, &ours_dns),
            record(
                &format!("cname-theirs.{domain}."),
                RrType::Txt,
                &txt("another-cluster"),
            ),
            // The cluster's owner id, pointing at a load balancer not deleted: stays.
            record(&format!("far.{domain}."), RrType::Cname, &others_dns),
            record(&format!("cname-far.{domain}."), RrType::Txt, &txt(&owner)),
        ],
    )
    .await;
    let before = names_in(&plain, &zone).await;
    let req = PassRequest {
        external_dns_owner: Some(owner.clone()),
        ..PassRequest::new(&n)
    };

    let plan = phase2_pass(
        &c,
        &PassRequest {
            dry_run: true,
            ..req.clone()
        },
    )
    .await;
    assert!(
        plan.planned
            .iter()
            .any(|r| r.kind == "dns-record" && r.id == format!("{zone}/www.{domain}. A")),
        "{plan:#?}"
    );
    assert_eq!(
        names_in(&plain, &zone).await,
        before,
        "a dry run changes nothing"
    );

    let p = phase2_pass(&c, &req).await;
    assert!(p.errors.is_empty(), "{p:#?}");
    let deleted: Vec<_> = p
        .deleted
        .iter()
        .map(|r| (r.kind.as_str(), r.id.as_str()))
        .collect();
    let www = format!("{zone}/www.{domain}. A");
    assert!(
        deleted.contains(&("dns-record", www.as_str())),
        "{deleted:?}"
    );
    assert!(
        deleted.contains(&("load-balancer", ours.as_str())),
        "{deleted:?}"
    );
    assert_eq!(
        deleted.iter().filter(|(k, _)| *k == "dns-record").count(),
        1,
        "{deleted:?}"
    );
    let audit = p
        .audit
        .iter()
        .find(|a| a.resource.id == www)
        .expect("audited");
    assert!(
        audit.detail.contains(&zone) && audit.detail.contains(&format!("TXT a-www.{domain}.")),
        "{audit:?}"
    );
    let kept: Vec<&str> = p
        .kept
        .iter()
        .filter(|(r, _)| r.kind == "dns-record")
        .map(|(r, _)| r.id.as_str())
        .collect();
    assert_eq!(
        kept.len(),
        2,
        "default's and another cluster's, reported: {p:#?}"
    );

    let after = names_in(&plain, &zone).await;
    let mut gone: Vec<&String> = before.iter().filter(|r| !after.contains(r)).collect();
    gone.sort();
    assert_eq!(
        gone,
        [&format!("a-www.{domain}. TXT"), &format!("www.{domain}. A")],
        "exactly the cluster's pair is deleted: {after:?}"
    );
    assert!(
        describe(ours).await.is_none(),
        "its load balancer is deleted"
    );
    assert!(
        describe(others).await.is_some(),
        "the other load balancer stays"
    );

    // One change batch, before the load balancer's delete.
    let calls = rec.calls();
    let at = |op: &str| calls.iter().position(|c| c.ends_with(op));
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.ends_with(".ChangeResourceRecordSets"))
            .count(),
        1,
        "{calls:?}"
    );
    assert!(
        at(".ChangeResourceRecordSets") < at("v2.DeleteLoadBalancer"),
        "records before their load balancer: {calls:?}"
    );
}
