//! A pass report as the lines `gc plan` and `sweeper teardown` print: each phase's plan (with the
//! proof of each resource where there is one), then, for `teardown`, one line per pass. Pure.

use crate::external::core::cluster::ClusterNames;
use std::collections::BTreeMap;
use sweeper_aws::locate::tags::{capa_key, cloud_key};
use sweeper_aws::model::{AuditAction, Phase, ResourceRef};
use sweeper_aws::phases::PassReport;

/// The tags that prove resources the cluster's, by ARN and by AWS id (from the region's scan).
#[derive(Debug, Default)]
pub struct Proofs {
    pub by_id: BTreeMap<String, String>,
}

/// The plan: the rules, then each phase's resources with the proof the scan found for each one,
/// or, for what the tagging listing does not return, the rule its phase found it by.
pub fn plan(out: &mut String, names: &ClusterNames, report: &PassReport, proofs: &Proofs) {
    out.push_str(&format!(
        "no live object here has these names. If another management cluster owns the cluster \
         (clusterctl move), stop: mark it not ours (--not-ours, sweeper.dev/scan-not-ours).\n\
         CAPA's own resources (phases 1 and 3): tag {}=owned\n\
         external resources (phase 2): tag {}=owned, and the cleaners' rules (docs/capa.md)\n\
         plan:\n",
        capa_key(&names.capi),
        cloud_key(&names.tag),
    ));
    phases(out, report, |phase, r| {
        Some(match proofs.by_id.get(&r.id) {
            Some(p) => p.clone(),
            None => match phase {
                Phase::CapaOwned | Phase::Network => format!(
                    "{}=owned, read by phase {}'s discovery",
                    capa_key(&names.capi),
                    phase.number()
                ),
                Phase::Tagged => format!(
                    "the {} cleaner's rule (found by its own discovery, not the tagging listing)",
                    r.kind
                ),
            },
        })
    });
}

/// One pass that deletes: counts per phase, what is left, the audit record.
pub fn pass(out: &mut String, n: u32, report: &PassReport, record: Option<&str>) {
    let deleted: Vec<String> = report
        .phases
        .iter()
        .filter(|p| !p.deleted.is_empty())
        .map(|p| format!("phase {}: {}", p.phase.number(), p.deleted.len()))
        .collect();
    let remaining: usize = report.phases.iter().map(|p| p.remaining.len()).sum();
    out.push_str(&format!(
        "pass {n}: deleted {}{}\n",
        if deleted.is_empty() {
            "nothing".to_string()
        } else {
            deleted.join(", ")
        },
        if remaining > 0 {
            format!(", {remaining} left for the next pass")
        } else {
            String::new()
        }
    ));
    for p in &report.phases {
        for r in &p.deleted {
            out.push_str(&format!("  deleted {} {} {}\n", r.service, r.kind, r.id));
        }
        for (r, key) in &p.untagged {
            out.push_str(&format!(
                "  untagged {} {}: removed {key}\n",
                r.service, r.id
            ));
        }
        for (r, why) in &p.remaining {
            out.push_str(&format!(
                "  left {} {} {}: {why}\n",
                r.service, r.kind, r.id
            ));
        }
        for e in &p.errors {
            out.push_str(&format!("  error: {e}\n"));
        }
        for note in &p.notes {
            out.push_str(&format!("  note: {note}\n"));
        }
    }
    if let Some(r) = record {
        out.push_str(&format!("  {r}\n"));
    }
}

/// Each phase's plan: what it would delete (with `proof`'s line under each resource it has one
/// for), what blocks the network (kept), errors, and what was ignored as outside the session.
/// Pure.
pub fn phases(
    out: &mut String,
    report: &PassReport,
    proof: impl Fn(Phase, &ResourceRef) -> Option<String>,
) {
    for p in &report.phases {
        out.push_str(&format!(
            "phase {}: {} resource(s)\n",
            p.phase,
            p.planned.len()
        ));
        for r in &p.planned {
            out.push_str(&format!("  {} {} {}\n", r.service, r.kind, r.id));
            if let Some(why) = proof(p.phase, r) {
                out.push_str(&format!("    proof: {why}\n"));
            }
        }
        for (r, action) in &p.planned_changes {
            match action {
                AuditAction::Untagged { key } => out.push_str(&format!(
                    "  untag, not delete: {} {}: remove {key}=shared\n",
                    r.service, r.id
                )),
                AuditAction::Revoked { rule } => out.push_str(&format!(
                    "  revoke, not delete: in {} {} {}: {rule}\n",
                    r.service, r.kind, r.id
                )),
                AuditAction::Deleted => {}
            }
        }
        for (r, vpc) in &p.blockers {
            out.push_str(&format!(
                "  blocked by {} {} {} (not the cluster's; kept, and {vpc} with it until it is gone)\n",
                r.service, r.kind, r.id
            ));
        }
        for (r, why) in &p.kept {
            out.push_str(&format!(
                "  reported, not deleted: {} {} {}: {why}\n",
                r.service, r.kind, r.id
            ));
        }
        for e in &p.errors {
            out.push_str(&format!("  error: {e}\n"));
        }
        for f in &p.foreign {
            out.push_str(&format!("  ignored (outside the cluster's session): {f}\n"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweeper_aws::phases::{PhaseReport, ResourceRef};

    fn sg(id: &str) -> ResourceRef {
        ResourceRef {
            service: "ec2".into(),
            kind: "security-group".into(),
            id: id.into(),
        }
    }

    #[test]
    fn every_planned_resource_carries_its_proof() {
        let names = ClusterNames {
            capi: "c1".into(),
            tag: "ns_c1".into(),
        };
        let mut p1 = PhaseReport::started(Phase::CapaOwned);
        p1.planned.push(sg("sg-capa"));
        let mut p2 = PhaseReport::started(Phase::Tagged);
        p2.planned.push(sg("sg-2"));
        p2.planned.push(ResourceRef {
            service: "logs".into(),
            kind: "log-group".into(),
            id: "/aws/eks/ns_c1/cluster".into(),
        });
        let proofs = Proofs {
            by_id: BTreeMap::from([(
                "sg-2".to_string(),
                "kubernetes.io/cluster/ns_c1=owned (cluster tag owned (phase 2))".to_string(),
            )]),
        };
        let mut out = String::new();
        plan(
            &mut out,
            &names,
            &PassReport {
                done: false,
                phases: vec![p1, p2],
            },
            &proofs,
        );
        let body = out.split("plan:\n").nth(1).unwrap();
        assert_eq!(
            body,
            "phase 1: 1 resource(s)\n  ec2 security-group sg-capa\n    proof: sigs.k8s.io/cluster-api-provider-aws/cluster/c1=owned, read by phase 1's discovery\n\
             phase 2: 2 resource(s)\n  ec2 security-group sg-2\n    proof: kubernetes.io/cluster/ns_c1=owned (cluster tag owned (phase 2))\n  \
             logs log-group /aws/eks/ns_c1/cluster\n    proof: the log-group cleaner's rule (found by its own discovery, not the tagging listing)\n"
        );
        assert!(out.contains("tag kubernetes.io/cluster/ns_c1=owned"));
    }

    #[test]
    fn an_untag_is_planned_as_an_untag_never_as_a_delete() {
        let subnet = ResourceRef {
            service: "ec2".into(),
            kind: "shared-tag".into(),
            id: "subnet-1".into(),
        };
        let mut p3 = PhaseReport::started(Phase::Network);
        p3.planned_changes.push((
            subnet,
            AuditAction::Untagged {
                key: "kubernetes.io/cluster/c1".into(),
            },
        ));
        let mut out = String::new();
        phases(
            &mut out,
            &PassReport {
                done: false,
                phases: vec![p3],
            },
            |_, _| None,
        );
        assert_eq!(
            out,
            "phase 3: 0 resource(s)\n  untag, not delete: ec2 subnet-1: remove kubernetes.io/cluster/c1=shared\n"
        );
    }
}
