//! The exact AWS calls of the `dns-record` task, on aws-smithy-mocks clients: the one change
//! batch it makes for the cluster's owner id, and every case where it must make none.

use super::*;
use crate::cleaners::load_balancers::LoadBalancers;
use crate::cleaners::test_ctx as ctx;
use crate::locate::inventory::Inventory;
use crate::locate::tagging::TaggedResource;
use crate::mocked::{self, CLOUD_KEY, Rule, assert_calls, code, mock};
use crate::model::PhaseReport;
use crate::phases::runner::run_cleaner;
use aws_sdk_elasticloadbalancingv2 as elbv2;
use aws_sdk_route53 as r53;
use r53::operation::change_resource_record_sets::{
    ChangeResourceRecordSetsError, ChangeResourceRecordSetsOutput,
};
use r53::operation::list_hosted_zones::ListHostedZonesOutput;
use r53::operation::list_resource_record_sets::ListResourceRecordSetsOutput;
use r53::types::{
    AliasTarget, ChangeAction, ChangeInfo, ChangeStatus, HostedZone, ResourceRecord, RrType,
};

const LB_ARN: &str = "arn:aws:elasticloadbalancing:us-east-1:0:loadbalancer/net/k8s-web/1";
const LB_DNS: &str = "k8s-web-1.elb.us-east-1.amazonaws.com";
const ZONE: &str = "Z0001";

fn txt(owner: &str) -> String {
    format!(
        "\"heritage=external-dns,external-dns/owner={owner},external-dns/resource=service/default/web\""
    )
}

fn plain(name: &str, ty: RrType, value: &str) -> ResourceRecordSet {
    ResourceRecordSet::builder()
        .name(name)
        .r#type(ty)
        .ttl(300)
        .resource_records(ResourceRecord::builder().value(value).build().unwrap())
        .build()
        .unwrap()
}

fn alias(name: &str, target: &str) -> ResourceRecordSet {
    ResourceRecordSet::builder()
        .name(name)
        .r#type(RrType::A)
        .alias_target(
            AliasTarget::builder()
                .hosted_zone_id("Z26RNL4JYFTOTI")
                .dns_name(format!("dualstack.{target}."))
                .evaluate_target_health(true)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap()
}

/// The zone: the cluster's pair (`www`, owner c1), a `default`-owned pair, another cluster's
/// pair (owner c2), all at the cluster's load balancer, and a c1 pair pointing elsewhere.
fn zone_sets() -> Vec<ResourceRecordSet> {
    vec![
        alias("www.example.com.", LB_DNS),
        plain("a-www.example.com.", RrType::Txt, &txt("c1")),
        plain("api.example.com.", RrType::Cname, LB_DNS),
        plain("api.example.com.", RrType::Txt, &txt("default")),
        plain("web.example.com.", RrType::Cname, LB_DNS),
        plain("cname-web.example.com.", RrType::Txt, &txt("c2")),
        plain(
            "away.example.com.",
            RrType::Cname,
            "lb-of-another.elb.amazonaws.com",
        ),
        plain("cname-away.example.com.", RrType::Txt, &txt("c1")),
    ]
}

/// Phase 2's inventory: the cluster's one load balancer.
fn inventory() -> Inventory {
    let mut inv = Inventory::default();
    let tagged = TaggedResource {
        arn: LB_ARN.parse().unwrap(),
        tags: [(CLOUD_KEY.to_string(), "owned".to_string())].into(),
    };
    assert!(Cleaner::claim(&LoadBalancers::TAGGED, &tagged, &mut inv));
    inv
}

/// The three listing calls (sent: the zones, the load balancer's DNS name, the records).
fn listings() -> [Rule; 3] {
    let lb = mock!(elbv2::Client::describe_load_balancers)
        .match_requests(|r| r.load_balancer_arns() == [LB_ARN])
        .then_output(|| {
            elbv2::operation::describe_load_balancers::DescribeLoadBalancersOutput::builder()
                .load_balancers(
                    elbv2::types::LoadBalancer::builder()
                        .load_balancer_arn(LB_ARN)
                        .dns_name(LB_DNS)
                        .build(),
                )
                .build()
        });
    let zones = mock!(r53::Client::list_hosted_zones).then_output(|| {
        ListHostedZonesOutput::builder()
            .hosted_zones(
                HostedZone::builder()
                    .id(format!("/hostedzone/{ZONE}"))
                    .name("example.com.")
                    .caller_reference("x")
                    .build()
                    .unwrap(),
            )
            .marker("")
            .is_truncated(false)
            .max_items(100)
            .build()
            .unwrap()
    });
    let records = mock!(r53::Client::list_resource_record_sets)
        .match_requests(|r| r.hosted_zone_id() == Some(ZONE))
        .then_output(|| {
            ListResourceRecordSetsOutput::builder()
                .set_resource_record_sets(Some(zone_sets()))
                .is_truncated(false)
                .max_items(300)
                .build()
                .unwrap()
        });
    [lb, zones, records]
}

fn changed() -> ChangeResourceRecordSetsOutput {
    ChangeResourceRecordSetsOutput::builder()
        .change_info(
            ChangeInfo::builder()
                .id("C1")
                .status(ChangeStatus::Pending)
                .submitted_at(aws_smithy_types::DateTime::from_secs(0))
                .build()
                .unwrap(),
        )
        .build()
}

/// The one batch the rule allows: DELETE of exactly the cluster's record and its TXT, as listed.
fn the_clusters_pair_only(
    r: &r53::operation::change_resource_record_sets::ChangeResourceRecordSetsInput,
) -> bool {
    let sets = zone_sets();
    let changes = r.change_batch().map(|b| b.changes()).unwrap_or_default();
    r.hosted_zone_id() == Some(ZONE)
        && changes.len() == 2
        && changes.iter().all(|c| c.action() == &ChangeAction::Delete)
        && changes[0].resource_record_set() == Some(&sets[0])
        && changes[1].resource_record_set() == Some(&sets[1])
}

const ALL_TASKS: [GcTask; 2] = [TASK, load_balancers::TASK];

async fn pass(
    c: &crate::model::AwsClients,
    owner: Option<&str>,
    tasks: &[GcTask],
    dry_run: bool,
) -> PhaseReport {
    let inv = inventory();
    let cx = CleanCtx {
        tasks,
        external_dns_owner: owner,
        ..ctx(c, &inv)
    };
    run_cleaner(&DnsRecords, &cx, dry_run).await
}

fn ids(refs: &[crate::model::ResourceRef]) -> Vec<&str> {
    refs.iter().map(|r| r.id.as_str()).collect()
}

fn kept(p: &PhaseReport) -> Vec<&str> {
    p.kept.iter().map(|(r, _)| r.id.as_str()).collect()
}

#[tokio::test]
async fn the_named_owners_record_and_its_txt_go_in_one_change_batch_and_nothing_else() {
    let [lb, zones, records] = listings();
    let change = mock!(r53::Client::change_resource_record_sets)
        .match_requests(the_clusters_pair_only)
        .then_output(changed);
    let c = mocked::in_order(&[&zones, &lb, &records, &change]);
    let p = pass(&c, Some("c1"), &ALL_TASKS, false).await;
    assert_calls(&change, 1, "ChangeResourceRecordSets");
    assert_eq!(ids(&p.deleted), [format!("{ZONE}/www.example.com. A")]);
    assert_eq!(p.deleted[0].kind, "dns-record");
    let audit = &p.audit[0].detail;
    assert!(
        audit.contains("example.com.")
            && audit.contains("A www.example.com. + TXT a-www.example.com."),
        "{audit}"
    );
    // `default`'s and c2's stay, reported; the one pointing elsewhere is not even found.
    assert_eq!(
        kept(&p),
        [
            format!("{ZONE}/api.example.com. CNAME"),
            format!("{ZONE}/web.example.com. CNAME")
        ]
    );
    assert!(p.kept[0].1.contains("\"default\""), "{:?}", p.kept);
    assert!(p.errors.is_empty() && p.remaining.is_empty(), "{p:?}");
}

/// No change call in any of these: the mocks have no rule for one, so one would panic.
#[tokio::test]
async fn without_the_owner_id_or_the_load_balancers_going_nothing_is_changed() {
    for (owner, tasks) in [
        // No annotation: report only, as before.
        (None, &ALL_TASKS[..]),
        // Another cluster's owner id: none of these is its.
        (Some("c3"), &ALL_TASKS[..]),
        // Never `default`, even if it got this far.
        (Some("default"), &ALL_TASKS[..]),
        (Some("DEFAULT"), &ALL_TASKS[..]),
        // The load balancers are not deleted in this pass (task off): their records stay.
        (Some("c1"), &[TASK][..]),
    ] {
        let [lb, zones, records] = listings();
        let c = mocked::in_order(&[&zones, &lb, &records]);
        let p = pass(&c, owner, tasks, false).await;
        assert_calls(&records, 1, "ListResourceRecordSets");
        assert!(p.deleted.is_empty(), "{owner:?}: {p:?}");
        assert_eq!(kept(&p).len(), 3, "{owner:?}: {p:?}");
        assert!(p.errors.is_empty(), "{owner:?}: {p:?}");
    }
}

#[tokio::test]
async fn a_dry_run_plans_the_pair_and_changes_nothing() {
    let [lb, zones, records] = listings();
    let c = mocked::in_order(&[&zones, &lb, &records]);
    let p = pass(&c, Some("c1"), &ALL_TASKS, true).await;
    assert_eq!(ids(&p.planned), [format!("{ZONE}/www.example.com. A")]);
    assert!(p.deleted.is_empty());
    assert_eq!(kept(&p).len(), 2);
}

#[tokio::test]
async fn a_refused_batch_is_an_error_that_holds_the_load_balancers_and_is_retried() {
    let [lb, zones, records] = listings();
    let change = mock!(r53::Client::change_resource_record_sets)
        .match_requests(the_clusters_pair_only)
        .then_error(|| ChangeResourceRecordSetsError::generic(code("InvalidChangeBatch")));
    let c = mocked::in_order(&[&zones, &lb, &records, &change]);
    let p = pass(&c, Some("c1"), &ALL_TASKS, false).await;
    assert_calls(&change, 1, "ChangeResourceRecordSets");
    assert!(p.deleted.is_empty());
    assert_eq!(p.errors.len(), 1, "{p:?}");
    assert!(
        p.errors[0].message.contains("ChangeResourceRecordSets"),
        "{p:?}"
    );
    // The error gates the later cleaners (the load balancers) for this pass.
    assert!(DnsRecords.descriptor().gates_later);

    // The next pass lists again and deletes.
    let [lb, zones, records] = listings();
    let change = mock!(r53::Client::change_resource_record_sets)
        .match_requests(the_clusters_pair_only)
        .then_output(changed);
    let c = mocked::in_order(&[&zones, &lb, &records, &change]);
    let p = pass(&c, Some("c1"), &ALL_TASKS, false).await;
    assert_eq!(p.deleted.len(), 1, "{p:?}");
}

#[tokio::test]
async fn a_listing_failure_holds_the_pass_only_while_deleting_is_asked_for() {
    let lb = || {
        mock!(elbv2::Client::describe_load_balancers).then_error(|| {
            elbv2::operation::describe_load_balancers::DescribeLoadBalancersError::generic(code(
                "AccessDenied",
            ))
        })
    };
    let ([_, zones, _], rule) = (listings(), lb());
    let c = mocked::in_order(&[&zones, &rule]);
    let p = pass(&c, None, &ALL_TASKS, false).await;
    assert!(p.errors.is_empty() && p.kept.len() == 1, "reported: {p:?}");
    let ([_, zones, _], rule) = (listings(), lb());
    let c = mocked::in_order(&[&zones, &rule]);
    let p = pass(&c, Some("c1"), &ALL_TASKS, false).await;
    assert_eq!(p.errors.len(), 1, "held: {p:?}");
}

/// An account without a hosted zone: the zones are listed, and nothing else (the load balancers'
/// names are not read: the mocks have no rule for it, so a Describe would fail the pass).
#[tokio::test]
async fn without_a_hosted_zone_the_load_balancers_are_not_described() {
    let zones = mock!(r53::Client::list_hosted_zones).then_output(|| {
        ListHostedZonesOutput::builder()
            .set_hosted_zones(Some(Vec::new()))
            .marker("")
            .is_truncated(false)
            .max_items(100)
            .build()
            .unwrap()
    });
    let c = mocked::in_order(&[&zones]);
    let p = pass(&c, Some("c1"), &ALL_TASKS, false).await;
    assert_calls(&zones, 1, "ListHostedZones");
    assert!(
        p.errors.is_empty() && p.kept.is_empty() && p.deleted.is_empty(),
        "{p:?}"
    );
}

#[test]
fn pairs_are_batched_by_the_thousand_and_never_split() {
    let items: Vec<usize> = (0..700).collect();
    let b = batches(&items, |_| 2);
    assert_eq!(b.iter().map(Vec::len).collect::<Vec<_>>(), [500, 200]);
    let b = batches(&[0, 1], |i| if i == 0 { 999 } else { 2 });
    assert_eq!(b, [vec![0], vec![1]]);
}
