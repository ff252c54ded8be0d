//! The scan's table: the notice first, then one block per orphan candidate (its resources, each
//! with its proof), the names held back and why, and what the report does not cover. Pure.

use crate::external::commands::scan::LeakReport;
use sweeper_aws::scan::OrphanCandidate;
use sweeper_aws::scan::deleted_by::{DeletedBy, TeardownClass};
use sweeper_aws::scan::join::HeldBack;
use sweeper_aws::scan::prices::{CostTotal, MonthlyCost};

fn held(why: &HeldBack) -> String {
    match why {
        HeldBack::LiveObject => "a live AWSCluster/AWSManagedControlPlane has the name".into(),
        HeldBack::LiveEks => "a live EKS cluster has the name".into(),
        HeldBack::NotOurs => "marked not ours".into(),
        HeldBack::SharesWithLive(n) => {
            format!("its resources are also tagged for {n} (live or not ours)")
        }
    }
}

fn cost(c: &MonthlyCost) -> String {
    match c {
        MonthlyCost::Free => "$0".into(),
        MonthlyCost::Dollars(d) => format!("${d:.2}"),
        MonthlyCost::Unknown(why) => format!("unknown ({why})"),
    }
}

/// Which teardown step deletes a resource, as its line ends; what it waits for, or why no
/// teardown deletes it.
fn step(by: &DeletedBy) -> String {
    let head = match by.class {
        TeardownClass::Default => format!("deleted by {} (default)", by.step),
        TeardownClass::OptIn => format!("deleted by {} (opt-in: --gc-task {})", by.step, by.step),
        TeardownClass::ReportOnly => format!("reported by {}, never deleted", by.step),
        TeardownClass::NotDeleted => "NOT deleted by a teardown, needs a person".into(),
    };
    match &by.why {
        Some(why) => format!("{head}: {why}"),
        None => head,
    }
}

/// A candidate's cost by what recovers it: what a teardown recovers (by default, each opt-in
/// task) and what needs a person (report-only, kinds no teardown deletes, what its rules keep).
fn recovery(c: &OrphanCandidate) -> String {
    let r = &c.recovery;
    let mut out = format!(
        "  teardown recovers {}; needs a person {}\n",
        r.teardown_recovers.describe(),
        r.needs_person.describe()
    );
    out.push_str(&format!(
        "  a default teardown recovers {}\n",
        r.default_teardown.describe()
    ));
    for (task, total) in &r.opt_in {
        out.push_str(&format!(
            "  left for opt-in {task} (--gc-task {task}): {}\n",
            total.describe()
        ));
    }
    for (what, total) in [
        ("report-only (never deleted)", &r.report_only),
        (
            "not deleted by a teardown (each resource says why)",
            &r.not_deleted,
        ),
    ] {
        if *total != CostTotal::default() {
            out.push_str(&format!("  left, {what}: {}\n", total.describe()));
        }
    }
    out
}

/// The report as a table: what was scanned, the candidates, the names held back, what has no
/// proof, and what the report does not cover.
pub fn table(r: &LeakReport) -> String {
    let mut out = scanned(r);
    let candidates: Vec<_> = r.regions.iter().flat_map(|s| &s.candidates).collect();
    if candidates.is_empty() {
        out.push_str("no orphan candidates\n");
    } else {
        out.push_str(&candidate_rows(&candidates));
        for c in &candidates {
            out.push_str(&candidate_block(c));
        }
        out.push_str(&format!(
            "\ntotal: {} candidate(s), {} (teardown recovers {}; needs a person {})\n",
            candidates.len(),
            r.total.describe(),
            r.teardown_recovers.describe(),
            r.needs_person.describe()
        ));
    }
    out.push_str(&not_candidates(r));
    if !r.errors.is_empty() {
        out.push_str("\nnot covered by this report:\n");
        for e in &r.errors {
            out.push_str(&format!("  {e}\n"));
        }
    }
    out
}

/// The notice, the prices' source, and each account and region scanned with its calls.
fn scanned(r: &LeakReport) -> String {
    let mut out = format!(
        "{}\nprices: {} as of {}\n",
        r.notice, r.prices_source, r.prices_as_of
    );
    let scanned: Vec<String> = r
        .regions
        .iter()
        .map(|s| {
            format!(
                "{} {} ({} calls)",
                s.account,
                s.region,
                s.calls.values().sum::<usize>()
            )
        })
        .collect();
    out.push_str(&format!(
        "scanned: {}\n\n",
        if scanned.is_empty() {
            "nothing".to_string()
        } else {
            scanned.join(", ")
        }
    ));
    out
}

/// One row per candidate.
fn candidate_rows(candidates: &[&OrphanCandidate]) -> String {
    let mut out = format!(
        "{:<24} {:<13} {:<15} {:>9} {:<21} COST\n",
        "ORPHAN CANDIDATE", "ACCOUNT", "REGION", "RESOURCES", "OLDEST"
    );
    for c in candidates {
        out.push_str(&format!(
            "{:<24} {:<13} {:<15} {:>9} {:<21} {}\n",
            c.cluster,
            c.account,
            c.region,
            c.resources.len(),
            c.oldest.as_deref().unwrap_or("unknown"),
            c.cost.describe()
        ));
    }
    out
}

/// One candidate's block: its kinds, what a teardown recovers, each resource with its proof.
fn candidate_block(c: &OrphanCandidate) -> String {
    let mut out = format!(
        "\n{} ({} {}){}\n",
        c.cluster,
        c.account,
        c.region,
        if c.also_named.is_empty() {
            String::new()
        } else {
            let also: Vec<_> = c.also_named.iter().map(String::as_str).collect();
            format!("; same resources also tagged for {}", also.join(", "))
        }
    );
    let kinds: Vec<String> = c
        .resources_by_kind
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    out.push_str(&format!("  by kind: {}\n", kinds.join(", ")));
    out.push_str(&recovery(c));
    for res in &c.resources {
        let proofs: Vec<String> = res
            .proofs
            .iter()
            .map(|p| format!("{} [{}]", p.tag, p.rule_label))
            .collect();
        out.push_str(&format!(
            "  {} {}/month <- {}; {}\n",
            res.arn,
            cost(&res.monthly),
            proofs.join("; "),
            step(&res.deleted_by)
        ));
    }
    out
}

/// The names held back (and why), what has no proof, and what was malformed: never candidates.
fn not_candidates(r: &LeakReport) -> String {
    let mut out = String::new();
    let held: Vec<String> = r
        .regions
        .iter()
        .flat_map(|s| {
            s.held.iter().map(move |h| {
                format!(
                    "  {} ({} {}, {} resource(s)): {}",
                    h.cluster,
                    s.account,
                    s.region,
                    h.resources,
                    held(&h.why)
                )
            })
        })
        .collect();
    if !held.is_empty() {
        out.push_str("\nnot candidates:\n");
        for h in held {
            out.push_str(&h);
            out.push('\n');
        }
    }
    for u in r.regions.iter().flat_map(|s| &s.unproven) {
        out.push_str(&format!(
            "no proof, never a candidate: {} ({})\n  {}\n",
            u.arn, u.kind, u.why
        ));
    }
    for m in r.regions.iter().flat_map(|s| &s.malformed) {
        out.push_str(&format!("ignored, never a candidate: {m}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};
    use sweeper_aws::scan::prices::Sizing;
    use sweeper_aws::scan::{CandidateResource, HeldName, Recovery, RegionScan};

    #[test]
    fn the_table_says_nothing_is_deleted_and_shows_each_proof_and_cost() {
        let report = LeakReport {
            notice: sweeper_aws::scan::NOTHING_DELETED,
            prices_as_of: "2025-01-15",
            prices_source: "src",
            regions: vec![RegionScan {
                account: "111111111111".into(),
                region: "us-east-1".into(),
                candidates: vec![OrphanCandidate {
                    cluster: "dead".into(),
                    account: "111111111111".into(),
                    region: "us-east-1".into(),
                    resources_by_kind: BTreeMap::from([("ec2:natgateway".into(), 1)]),
                    oldest: None,
                    cost: CostTotal {
                        dollars_per_month: 32.85,
                        unknown: 0,
                    },
                    recovery: Recovery {
                        default_teardown: CostTotal {
                            dollars_per_month: 32.85,
                            unknown: 0,
                        },
                        opt_in: BTreeMap::from([(
                            "ebs-volume".into(),
                            CostTotal {
                                dollars_per_month: 8.0,
                                unknown: 0,
                            },
                        )]),
                        ..Recovery::default()
                    },
                    also_named: BTreeSet::new(),
                    resources: vec![CandidateResource {
                        arn: "arn:aws:ec2:us-east-1:111111111111:natgateway/nat-1".into(),
                        kind: "ec2:natgateway".into(),
                        proofs: vec![sweeper_aws::scan::Proof {
                            tag: "sigs.k8s.io/cluster-api-provider-aws/cluster/dead=owned".into(),
                            rule: sweeper_aws::scan::claims::ClaimRule::Capa,
                            rule_label: "CAPA-owned (phases 1 and 3)",
                        }],
                        created: None,
                        sizing: Sizing::default(),
                        monthly: MonthlyCost::Dollars(32.85),
                        deleted_by: DeletedBy {
                            step: "phase 3".into(),
                            class: TeardownClass::Default,
                            why: None,
                        },
                    }],
                }],
                held: vec![HeldName {
                    cluster: "live".into(),
                    why: HeldBack::LiveObject,
                    resources: 2,
                }],
                malformed: vec![],
                unproven: Vec::new(),
                calls: BTreeMap::from([("tagging.GetResources", 1)]),
            }],
            not_ours: BTreeSet::new(),
            errors: vec!["identity x refused".into()],
            total: CostTotal {
                dollars_per_month: 32.85,
                unknown: 0,
            },
            teardown_recovers: CostTotal::default(),
            needs_person: CostTotal::default(),
        };
        let t = table(&report);
        assert!(t.starts_with("A scan deletes nothing."), "{t}");
        assert!(
            t.contains("scanned: 111111111111 us-east-1 (1 calls)"),
            "{t}"
        );
        assert!(
            t.contains("natgateway/nat-1 $32.85/month <- sigs.k8s.io/cluster-api-provider-aws/cluster/dead=owned [CAPA-owned (phases 1 and 3)]; deleted by phase 3 (default)"),
            "{t}"
        );
        assert!(
            t.contains("a default teardown recovers $32.85/month\n  left for opt-in ebs-volume (--gc-task ebs-volume): $8.00/month\n"),
            "{t}"
        );
        assert!(t.contains("total: 1 candidate(s), $32.85/month"), "{t}");
        assert!(
            t.contains("live (111111111111 us-east-1, 2 resource(s)): a live AWSCluster"),
            "{t}"
        );
        assert!(
            t.contains("not covered by this report:\n  identity x refused"),
            "{t}"
        );
    }
}
