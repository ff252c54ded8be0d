use super::*;
use std::collections::BTreeSet;
use sweeper_aws::scan::join::HeldBack;
use sweeper_aws::scan::prices::CostTotal;
use sweeper_aws::scan::{HeldName, OrphanCandidate, RegionScan};

fn candidate(cluster: &str, kinds: &[(&str, usize)], dollars: f64) -> OrphanCandidate {
    OrphanCandidate {
        cluster: cluster.into(),
        account: String::new(),
        region: String::new(),
        resources_by_kind: kinds.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
        oldest: None,
        cost: CostTotal {
            dollars_per_month: dollars,
            unknown: 0,
        },
        recovery: Default::default(),
        also_named: BTreeSet::new(),
        resources: Vec::new(),
    }
}

fn region(account: &str, region: &str, candidates: Vec<OrphanCandidate>) -> RegionScan {
    RegionScan {
        account: account.into(),
        region: region.into(),
        candidates,
        held: vec![HeldName {
            cluster: "theirs".into(),
            why: HeldBack::NotOurs,
            resources: 7,
        }],
        malformed: Vec::new(),
        unproven: Vec::new(),
        calls: BTreeMap::new(),
    }
}

fn report(regions: Vec<RegionScan>) -> LeakReport {
    LeakReport {
        notice: "",
        prices_as_of: "",
        prices_source: "",
        regions,
        not_ours: BTreeSet::new(),
        errors: Vec::new(),
        total: CostTotal::default(),
        teardown_recovers: CostTotal::default(),
        needs_person: CostTotal::default(),
    }
}

type Want<'a> = (
    &'a [(&'a str, &'a str, &'a str, i64)],
    &'a [(&'a str, &'a str, f64)],
);

#[test]
fn gauges_sum_candidates_per_account_region_and_kind() {
    const A: &str = "111111111111";
    const B: &str = "222222222222";
    let cases: Vec<(&str, LeakReport, Want)> = vec![
        ("nothing scanned: no series", report(vec![]), (&[], &[])),
        (
            "a clean region: a zero cost, no resource series; held names never count",
            report(vec![region(A, "eu-west-1", vec![])]),
            (&[], &[(A, "eu-west-1", 0.0)]),
        ),
        (
            "two names in one region add up by kind",
            report(vec![region(
                A,
                "eu-west-1",
                vec![
                    candidate(
                        "old-1",
                        &[("ec2:volume", 2), ("ec2:security-group", 1)],
                        8.0,
                    ),
                    candidate("old-2", &[("ec2:volume", 3)], 12.5),
                ],
            )]),
            (
                &[
                    (A, "eu-west-1", "ec2:security-group", 1),
                    (A, "eu-west-1", "ec2:volume", 5),
                ],
                &[(A, "eu-west-1", 20.5)],
            ),
        ),
        (
            "accounts and regions stay apart",
            report(vec![
                region(
                    A,
                    "us-east-1",
                    vec![candidate("x", &[("ec2:volume", 1)], 4.0)],
                ),
                region(
                    B,
                    "us-east-1",
                    vec![candidate("x", &[("ec2:volume", 2)], 8.0)],
                ),
            ]),
            (
                &[
                    (A, "us-east-1", "ec2:volume", 1),
                    (B, "us-east-1", "ec2:volume", 2),
                ],
                &[(A, "us-east-1", 4.0), (B, "us-east-1", 8.0)],
            ),
        ),
    ];
    for (what, report, (resources, cost)) in cases {
        let want = OrphanGauges {
            resources: resources
                .iter()
                .map(|(a, r, k, n)| ((a.to_string(), r.to_string(), k.to_string()), *n))
                .collect(),
            cost: cost
                .iter()
                .map(|(a, r, d)| ((a.to_string(), r.to_string()), *d))
                .collect(),
        };
        assert_eq!(gauges(&report), want, "{what}");
    }
}

fn exposed(m: &ScanMetrics) -> String {
    let mut registry = Registry::with_prefix("sweeper");
    m.register(&mut registry);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    out
}

#[test]
fn a_label_set_the_next_scan_lacks_is_removed_not_left_stale() {
    let m = ScanMetrics::default();
    let a = "111111111111";
    m.apply(&gauges(&report(vec![
        region(
            a,
            "eu-west-1",
            vec![candidate("old", &[("ec2:volume", 2)], 8.0)],
        ),
        region(
            a,
            "us-east-1",
            vec![candidate("old", &[("ec2:volume", 1)], 4.0)],
        ),
    ])));
    let text = exposed(&m);
    assert!(
        text.contains(
            "sweeper_orphan_resources{account=\"111111111111\",region=\"us-east-1\",kind=\"ec2:volume\"} 1"
        ) && text.contains(
            "sweeper_orphan_cost_dollars_per_month{account=\"111111111111\",region=\"eu-west-1\"} 8.0"
        ),
        "{text}"
    );
    // The eu-west-1 orphans were torn down; us-east-1 is no longer reached.
    m.apply(&gauges(&report(vec![region(a, "eu-west-1", vec![])])));
    let text = exposed(&m);
    assert!(!text.contains("us-east-1"), "{text}");
    assert!(!text.contains("sweeper_orphan_resources{"), "{text}");
    assert!(
        text.contains(
            "sweeper_orphan_cost_dollars_per_month{account=\"111111111111\",region=\"eu-west-1\"} 0.0"
        ),
        "{text}"
    );
}

#[test]
fn the_scan_health_is_exported_before_any_scan() {
    let text = exposed(&ScanMetrics::default());
    // The labelled orphan families are registered too, but the text encoding shows a family only
    // once it has a series (tests/helm.rs reads them from the registry).
    for family in [
        "sweeper_scan_last_success_timestamp_seconds 0",
        "sweeper_scan_errors_total 0",
        "sweeper_scan_uncovered_parts 0",
    ] {
        assert!(text.contains(family), "{family}: {text}");
    }
}
