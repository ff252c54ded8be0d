//! Which step of a teardown deletes a scanned resource, so the report can say what a default
//! `sweeper teardown` recovers and what only an opt-in task (`--gc-task`) or nothing does. Pure.
//!
//! A claim is not a verdict ([`super::claims`]): the step named here is the one whose cleaner
//! looks for this kind with this proof; the cleaner's own rule still decides at teardown time
//! (a controller's tag counts only in the cluster's VPCs, CAPA's network only in a CAPA-managed
//! VPC). The task names are the cleaners' own constants, never re-spelled.

use super::claims::{Claim, ClaimRule};
use crate::cleaners::{
    bootstrap_data, dns_records, instance_profiles, instance_state, instances, launch_templates,
    load_balancers, log_groups, oidc_providers, security_groups, snapshots, target_groups, volumes,
};
use crate::model::GcTask;
use crate::phases::registry::OPT_IN;
use serde::Serialize;

/// Whether a teardown deletes it, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TeardownClass {
    /// A teardown with the default tasks deletes it.
    Default,
    /// Only a teardown that names its task (`--gc-task`, `sweeper.dev/gc-tasks`).
    OptIn,
    /// Its task reports it and never deletes it (CAPA's S3 bootstrap bucket).
    ReportOnly,
    /// No cleaner deletes this kind: the report is all sweeper does for it.
    NotDeleted,
}

/// The step that deletes one resource: its phase-2 task, or the phase (1: CAPA's own, 3: CAPA's
/// network), and whether a default teardown runs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeletedBy {
    /// The task name (`load-balancer`, `ebs-volume`), or `phase 1` / `phase 3` (no task: every
    /// teardown runs them), or `none`.
    pub step: String,
    pub class: TeardownClass,
}

impl DeletedBy {
    fn task(t: GcTask) -> Self {
        let class = if OPT_IN.contains(&t) {
            TeardownClass::OptIn
        } else if t == bootstrap_data::TASK_S3 {
            TeardownClass::ReportOnly
        } else {
            TeardownClass::Default
        };
        DeletedBy {
            step: t.name().to_string(),
            class,
        }
    }

    fn phase(n: u8) -> Self {
        DeletedBy {
            step: format!("phase {n}"),
            class: TeardownClass::Default,
        }
    }

    /// The task the user names to have it deleted, when only an opt-in does.
    pub fn opt_in(&self) -> Option<&str> {
        (self.class == TeardownClass::OptIn).then_some(self.step.as_str())
    }
}

/// CAPA's network kinds, deleted in phase 3 when CAPA's tag proves them its own.
const NETWORK: &[&str] = &[
    "ec2:vpc",
    "ec2:subnet",
    "ec2:route-table",
    "ec2:internet-gateway",
    "ec2:natgateway",
    "ec2:elastic-ip",
    "ec2:vpc-endpoint",
];

/// The step that deletes a resource of `kind` (the report's `service:type`) claimed by `claims`.
pub fn deleted_by(kind: &str, claims: &[Claim]) -> DeletedBy {
    let capa = claims.iter().any(|c| c.rule == ClaimRule::Capa);
    if capa {
        if NETWORK.contains(&kind) {
            return DeletedBy::phase(3);
        }
        if kind == "ec2:instance"
            || kind == "ec2:security-group"
            || kind.starts_with("elasticloadbalancing:loadbalancer")
        {
            return DeletedBy::phase(1);
        }
    }
    let task = match kind {
        "ec2:volume" => volumes::TASK,
        "ec2:snapshot" => snapshots::TASK,
        "logs:log-group" => log_groups::TASK,
        "ec2:instance" => instances::TASK,
        "ec2:launch-template" => launch_templates::TASK,
        // Detached interfaces go with the security-group task (they keep groups alive).
        "ec2:security-group" | "ec2:network-interface" => security_groups::TASK,
        "elasticloadbalancing:targetgroup" => target_groups::TASK,
        "iam:instance-profile" => instance_profiles::TASK,
        "iam:oidc-provider" => oidc_providers::TASK,
        "route53:hostedzone" => dns_records::TASK,
        "secretsmanager:secret" | "ssm:parameter" => bootstrap_data::TASK,
        "sqs:queue" | "events:rule" => instance_state::TASK,
        k if k.starts_with("elasticloadbalancing:loadbalancer") => load_balancers::TASK,
        k if k.starts_with("s3:") => bootstrap_data::TASK_S3,
        _ => {
            return DeletedBy {
                step: "none".into(),
                class: TeardownClass::NotDeleted,
            };
        }
    };
    DeletedBy::task(task)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(rule: ClaimRule) -> Vec<Claim> {
        vec![Claim {
            cluster: "c1".into(),
            tag: "t".into(),
            rule,
        }]
    }

    #[test]
    fn each_kind_is_marked_with_the_step_that_deletes_it_and_whether_by_default() {
        let (capa, cloud) = (claim(ClaimRule::Capa), claim(ClaimRule::Cloud));
        let cases: &[(&str, &[Claim], &str, TeardownClass)] = &[
            ("ec2:natgateway", &capa, "phase 3", TeardownClass::Default),
            ("ec2:vpc", &capa, "phase 3", TeardownClass::Default),
            (
                "ec2:security-group",
                &capa,
                "phase 1",
                TeardownClass::Default,
            ),
            (
                "elasticloadbalancing:loadbalancer",
                &capa,
                "phase 1",
                TeardownClass::Default,
            ),
            (
                "elasticloadbalancing:loadbalancer",
                &cloud,
                "load-balancer",
                TeardownClass::Default,
            ),
            (
                "ec2:security-group",
                &cloud,
                "security-group",
                TeardownClass::Default,
            ),
            ("ec2:volume", &cloud, "ebs-volume", TeardownClass::OptIn),
            ("ec2:snapshot", &cloud, "ebs-snapshot", TeardownClass::OptIn),
            (
                "logs:log-group",
                &cloud,
                "eks-log-group",
                TeardownClass::OptIn,
            ),
            (
                "s3:bucket",
                &capa,
                "bootstrap-data-s3",
                TeardownClass::ReportOnly,
            ),
            (
                "iam:instance-profile",
                &claim(ClaimRule::Karpenter),
                "instance-profile",
                TeardownClass::Default,
            ),
            // A cloud-tagged network kind is not CAPA's network: no cleaner takes it.
            ("ec2:vpc", &cloud, "none", TeardownClass::NotDeleted),
        ];
        for (kind, claims, step, class) in cases {
            let got = deleted_by(kind, claims);
            assert_eq!((got.step.as_str(), got.class), (*step, *class), "{kind}");
        }
        assert_eq!(
            deleted_by("ec2:volume", &cloud).opt_in(),
            Some("ebs-volume")
        );
        assert_eq!(deleted_by("ec2:vpc", &capa).opt_in(), None);
    }
}
