//! Which step of a teardown deletes a scanned resource, and whether it really does, so the report
//! promises only what `sweeper teardown` keeps (issue #76). Pure.
//!
//! Two questions, one code path with the teardown:
//! - *which step*: the cleaner that looks for this kind with this proof ([`step_of`]; the task
//!   names are the cleaners' own constants, never re-spelled);
//! - *whether it deletes*: that cleaner's own policy function (`crate::policy`), called with the
//!   facts the scan read of the resource: its tags, its EC2 state where a describe read one,
//!   whether `locate::placement` (the teardown's own confirmation) found a controller-tagged
//!   resource in the cluster's VPCs, and the region's live EKS clusters ([`judge`]).
//!
//! A rule that needs a fact the scan does not read (a log group's retention, the instance-state
//! queue's policy) is not guessed: the resource is reported as needing a person, with why, and
//! `sweeper teardown`'s dry run shows what it would do.

use super::claims::{Claim, ClaimRule};
use crate::cleaners::{
    bootstrap_data, dns_records, instance_profiles, instance_state, instances, launch_templates,
    load_balancers, log_groups, oidc_providers, security_groups, snapshots, target_groups, volumes,
};
use crate::model::GcTask;
use crate::phases::registry::OPT_IN;
use crate::policy::bootstrap_data::BootstrapStore;
use crate::policy::{self, Candidate, Ownership, Verdict, tags};
use serde::Serialize;
use std::collections::BTreeSet;

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
    /// No teardown deletes it: no cleaner takes the kind, or the one that does keeps it (`why`).
    NotDeleted,
}

/// The step that deletes one resource: its phase-2 task, or the phase (1: CAPA's own, 3: CAPA's
/// network), whether a default teardown runs it, and, when it is not deleted, why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeletedBy {
    /// The task name (`load-balancer`, `ebs-volume`), or `phase 1` / `phase 3` (no task: every
    /// teardown runs them), or `none`. For a resource the step's rule keeps, the step whose rule
    /// was asked.
    pub step: String,
    pub class: TeardownClass,
    /// Why a teardown does not delete it, or what it waits for first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl DeletedBy {
    /// The task the user names to have it deleted, when only an opt-in does.
    pub fn opt_in(&self) -> Option<&str> {
        (self.class == TeardownClass::OptIn).then_some(self.step.as_str())
    }

    /// A teardown (default, or with the opt-in named) deletes it.
    pub fn recovers(&self) -> bool {
        matches!(self.class, TeardownClass::Default | TeardownClass::OptIn)
    }
}

/// The step whose cleaner looks for a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// CAPA's own (phase 1) or CAPA's network (phase 3), found by CAPA's tag.
    Phase(u8),
    Task(GcTask),
    /// No cleaner takes this kind.
    None,
}

impl Step {
    fn name(self) -> String {
        match self {
            Step::Phase(n) => format!("phase {n}"),
            Step::Task(t) => t.name().to_string(),
            Step::None => "none".into(),
        }
    }

    fn class(self) -> TeardownClass {
        match self {
            Step::Task(t) if OPT_IN.contains(&t) => TeardownClass::OptIn,
            Step::Task(t) if t == bootstrap_data::TASK_S3 => TeardownClass::ReportOnly,
            Step::None => TeardownClass::NotDeleted,
            _ => TeardownClass::Default,
        }
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

/// The step whose cleaner looks for a resource of `kind` (the report's `service:type`) claimed
/// by `claims` (this candidate's claims: the names it is torn down by).
pub fn step_of(kind: &str, claims: &[Claim]) -> Step {
    let capa = claims.iter().any(|c| c.rule == ClaimRule::Capa);
    if capa {
        if NETWORK.contains(&kind) {
            return Step::Phase(3);
        }
        if kind == "ec2:instance"
            || kind == "ec2:security-group"
            || kind.starts_with("elasticloadbalancing:loadbalancer")
        {
            return Step::Phase(1);
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
        _ => return Step::None,
    };
    Step::Task(task)
}

/// The cluster a candidate is torn down as, the way `sweeper teardown --from-scan` names it.
#[derive(Clone, Copy, Debug)]
pub struct Teardown<'a> {
    /// The name the cloud provider's tag carries (an EKS cluster's EKS name).
    pub cluster: &'a str,
    /// The name CAPA's tag carries (the Cluster API name; the same but on EKS).
    pub capa_name: &'a str,
    pub region: &'a str,
    /// The region's live EKS clusters (`eks:ListClusters`).
    pub eks_live: &'a BTreeSet<String>,
}

/// What the scan read of one resource.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    pub kind: &'a str,
    pub arn: &'a str,
    pub claims: &'a [Claim],
    pub tags: &'a [(&'a str, &'a str)],
    /// The EC2 state a describe read (instances, volumes).
    pub state: Option<&'a str>,
    /// A controller-tagged resource `locate::placement` confirmed in one of the cluster's VPCs
    /// (the teardown's own confirmation, run by the scan for such resources).
    pub in_cluster_vpcs: bool,
}

/// Stands for "one of the cluster's VPCs" in the ownership rule: placement already proved the
/// resource there, and the rule only asks whether it is in one of them.
const CONFIRMED_VPC: &str = "confirmed-by-placement";

/// The teardown's verdict on one resource and the step that gives it (see the module doc).
pub fn deleted_by(t: &Teardown<'_>, r: &Seen<'_>) -> DeletedBy {
    let step = step_of(r.kind, r.claims);
    let verdict = judge(step, t, r);
    let (class, why) = match (&verdict, step.class()) {
        (_, TeardownClass::NotDeleted) => (
            TeardownClass::NotDeleted,
            Some(
                "no teardown step deletes this kind: delete it by hand if it is the cluster's"
                    .into(),
            ),
        ),
        (_, TeardownClass::ReportOnly) => (
            TeardownClass::ReportOnly,
            Some("CAPA's bootstrap data in S3 is reported, never deleted: check it by hand".into()),
        ),
        (Verdict::Delete | Verdict::Untag, class) => (class, None),
        (Verdict::Blocked(why), class) => (class, Some(format!("deleted once {why}"))),
        (Verdict::Keep(why) | Verdict::Foreign(why), _) => (
            TeardownClass::NotDeleted,
            Some(format!(
                "{} keeps it: {why}; check it and delete it by hand if it is the cluster's",
                step.name()
            )),
        ),
    };
    DeletedBy {
        step: step.name(),
        class,
        why,
    }
}

/// The policy function the step's cleaner calls, with the facts the scan read.
fn judge(step: Step, t: &Teardown<'_>, r: &Seen<'_>) -> Verdict {
    let capa_key = tags::capa_key(t.capa_name);
    let c = Candidate::tagged(r.tags);
    let own = Ownership::of(t.cluster)
        .with_capa_name(t.capa_name)
        .with_vpcs(vec![CONFIRMED_VPC.into()]);
    let placed = Candidate {
        tags: r.tags,
        vpc: r.in_cluster_vpcs.then_some(CONFIRMED_VPC),
    };
    let by_state = |v: Verdict| match (v, r.state) {
        (Verdict::Delete, Some(state)) => policy::instances::by_state(state),
        (v, _) => v,
    };
    match step {
        Step::Phase(1) if r.kind == "ec2:security-group" => {
            // The group's name is not in the listing; a VPC's `default` group is never tagged
            // by CAPA, and AWS refuses its deletion whatever the teardown asks.
            policy::security_groups::decide_capa(&c, None, &capa_key)
        }
        Step::Phase(1) => by_state(policy::capa::decide(&c, &capa_key)),
        Step::Phase(_) => policy::capa::decide(&c, &capa_key),
        Step::None => Verdict::foreign("no cleaner takes this kind"),
        Step::Task(task) => judge_task(task, t, r, &own, &placed, &capa_key, by_state),
    }
}

/// [`judge`] for a phase-2 task's resource.
fn judge_task(
    task: GcTask,
    t: &Teardown<'_>,
    r: &Seen<'_>,
    own: &Ownership,
    placed: &Candidate<'_>,
    capa_key: &str,
    by_state: impl Fn(Verdict) -> Verdict,
) -> Verdict {
    let c = Candidate::tagged(r.tags);
    match task {
        t_ if t_ == volumes::TASK => match r.state {
            // The cleaner asks only for `available` volumes (its describe's filter).
            Some(state) if state != "available" => Verdict::foreign(format!(
                "{state}, not available: the ebs-volume task takes only detached volumes"
            )),
            _ => policy::ebs::volume(&c, t.cluster, capa_key),
        },
        t_ if t_ == snapshots::TASK => policy::ebs::snapshot(&c, t.cluster, capa_key),
        t_ if t_ == security_groups::TASK && r.kind == "ec2:security-group" => {
            policy::security_groups::decide(own, placed)
        }
        t_ if t_ == instances::TASK => by_state(policy::instances::decide(own, placed)),
        t_ if t_ == instance_profiles::TASK => {
            let (path, name) = profile_path_and_name(r.arn);
            let listed = policy::instance_profiles::ListedProfile {
                name,
                path: &path,
                tags: r.tags,
            };
            policy::instance_profiles::decide(&listed, t.cluster, t.region)
        }
        t_ if t_ == bootstrap_data::TASK => match bootstrap_name(r.kind, r.arn) {
            Some((store, name)) => {
                policy::bootstrap_data::decide(store, &name, r.tags, t.capa_name)
            }
            None => Verdict::foreign("not a name CAPA gives bootstrap data"),
        },
        t_ if t_ == log_groups::TASK => Verdict::keep(
            "the rule also needs the group's retention and deletion protection, which the scan \
             does not read: `sweeper teardown --gc-task eks-log-group` (dry run) shows it",
        ),
        t_ if t_ == oidc_providers::TASK => Verdict::keep(
            "no object records the cluster's OIDC issuer, which the rule needs: a teardown \
             without the object keeps the provider",
        ),
        t_ if t_ == dns_records::TASK => Verdict::keep(
            "the dns-record task deletes external-dns's records in a zone, never the zone",
        ),
        t_ if t_ == instance_state::TASK => Verdict::keep(
            "the rule also needs the queue's policy and the rule's targets, which the scan does \
             not read: `sweeper teardown` (dry run) shows it",
        ),
        // Load balancers, target groups, launch templates, detached network interfaces: the
        // phase-2 ownership rule (a target group waits for its load balancer: still deleted).
        _ => own.decide(placed),
    }
}

/// An instance profile ARN's path and name (`instance-profile/<path…>/<name>`; no path is `/`).
fn profile_path_and_name(arn: &str) -> (String, &str) {
    let rest = arn.split_once(":instance-profile/").map_or("", |(_, r)| r);
    match rest.rsplit_once('/') {
        Some((path, name)) => (format!("/{path}/"), name),
        None => ("/".into(), rest),
    }
}

/// The store and name of a Secrets Manager secret or SSM parameter from its ARN: a secret's ARN
/// ends with `-` and six random characters after its name; a parameter's drops the name's
/// leading `/`.
fn bootstrap_name(kind: &str, arn: &str) -> Option<(BootstrapStore, String)> {
    let resource = arn.splitn(6, ':').nth(5)?;
    match kind {
        "secretsmanager:secret" => {
            let name = resource.strip_prefix("secret:")?;
            let (name, suffix) = name.rsplit_once('-')?;
            (suffix.len() == 6).then(|| (BootstrapStore::SecretsManager, name.to_string()))
        }
        "ssm:parameter" => {
            let name = resource.strip_prefix("parameter")?;
            Some((BootstrapStore::Ssm, name.to_string()))
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "deleted_by_tests.rs"]
mod tests;
