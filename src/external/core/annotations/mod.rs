//! The per-cluster switches, with CAPA's names kept exactly:
//! - `aws.cluster.x-k8s.io/external-resource-gc`: absent or true = collect external resources
//!   (phase 2), false = opt out (phases 1 and 3 still run), in the grammar CAPA reads it with
//!   (Go's `strconv.ParseBool`, pkg/cloud/services/gc/cleanup.go: `1 t T TRUE true True`,
//!   `0 f F FALSE false False`), so a value means to sweeper what it means to CAPA. Anything else is
//!   an error, as it is for CAPA.
//! - the phase-2 tasks: sweeper's own `sweeper.dev/gc-tasks` (any of sweeper's task names) and
//!   CAPA's `aws.cluster.x-k8s.io/external-resource-tasks-gc` (CAPA's three names only, as CAPA's
//!   webhook and gc require; another name there is an error). Absent both: every task but the
//!   opt-ins `ebs-volume`, `ebs-snapshot` and `eks-log-group`. How the two combine is [`tasks`]'
//!   one rule. The names parse straight into sweeper-aws's `GcTask`, whose names the registered
//!   cleaners declare: there is no second list to keep in step.
//! - `sweeper.dev/external-dns-owner-id`: the external-dns owner id (`--txt-owner-id`) of the
//!   cluster's external-dns. With it, the `dns-record` task deletes the Route53 records
//!   external-dns made under exactly that id for the load balancers the teardown deletes, each
//!   with its TXT companion (sweeper-aws `cleaners::dns_records`); without it they are only
//!   reported. sweeper's own name (not CAPA's): CAPA has no such switch. Read from the object
//!   itself (AWSCluster, AWSManagedControlPlane), never from a linked AWSManagedCluster.
//!
//! An error in the gc switch or either task annotation means: a Warning Event and a condition
//! naming the bad value, and nothing is deleted until it is fixed. A bad owner id is reported the
//! same way (Event, condition, log) but holds nothing: its records are only reported, as without
//! the annotation, and the rest of the teardown goes on (see [`DnsOwner::Invalid`]).

pub mod tasks;

use std::collections::BTreeMap;

use sweeper_aws::cleaners::dns_records::owner_id_problem;
use sweeper_aws::phases::GcTask;
pub use tasks::{CAPA_TASKS_ANNOTATION, SWEEPER_TASKS_ANNOTATION};

pub const GC_ANNOTATION: &str = "aws.cluster.x-k8s.io/external-resource-gc";
pub const DNS_OWNER_ANNOTATION: &str = "sweeper.dev/external-dns-owner-id";

#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum AnnotationError {
    #[error(
        "annotation {GC_ANNOTATION} has value {0:?}: use \"true\" or \"false\" (CAPA reads it with Go's strconv.ParseBool: also 1, t, T, TRUE, True, 0, f, F, FALSE, False)"
    )]
    BadSwitch(String),
    /// In sweeper's annotation the known names come from the registered phase-2 cleaners
    /// (`GcTask`'s parser), so a new cleaner's task is accepted there without touching this
    /// file; in CAPA's, they are CAPA's three.
    #[error("annotation {annotation} has unknown task {given:?}: use {expected}")]
    UnknownTask {
        annotation: &'static str,
        given: String,
        expected: String,
    },
    #[error("annotation {annotation} has an empty task in {value:?}")]
    EmptyTask {
        annotation: &'static str,
        value: String,
    },
    /// One of sweeper's own tasks in CAPA's annotation (see [`tasks`]).
    #[error(
        "annotation {CAPA_TASKS_ANNOTATION} names {given:?}, a task of sweeper's, not CAPA's: CAPA \
         refuses it there (its AWSCluster webhook, validateGCTasksAnnotation, refuses every update \
         of the object while it is set, and CAPA's gc has no such task), so sweeper does not act \
         on it either; CAPA's annotation takes only {}. Move {given:?} to \
         {SWEEPER_TASKS_ANNOTATION}, e.g. with `sweeper gc configure --gc-task ...`, which writes \
         both",
        tasks::capa_names()
    )]
    NotCapaTask { given: String },
    #[error(
        "annotation {DNS_OWNER_ANNOTATION} has value {value:?}: {why}; external-dns records are \
         reported, not deleted, until it is fixed"
    )]
    BadDnsOwner { value: String, why: String },
    /// An error in the linked object's annotations (the AWSManagedCluster of an EKS cluster),
    /// named with that object's label.
    #[error("{label}: {source}")]
    OnLinked {
        label: String,
        source: Box<AnnotationError>,
    },
}

/// What the cluster says about its external-dns records (see [`DNS_OWNER_ANNOTATION`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DnsOwner {
    /// No annotation: records are reported only.
    #[default]
    Unset,
    /// A valid owner id: its records are deleted with their load balancers.
    Id(String),
    /// An annotation sweeper refuses: reported as an error on the object, records reported
    /// only, nothing else held (a mistake here must not keep the cluster's other resources).
    Invalid(AnnotationError),
}

impl DnsOwner {
    /// The owner id a teardown may delete by.
    pub fn id(&self) -> Option<&str> {
        match self {
            DnsOwner::Id(id) => Some(id),
            _ => None,
        }
    }

    /// The error to report, for an annotation sweeper refuses.
    pub fn problem(&self) -> Option<&AnnotationError> {
        match self {
            DnsOwner::Invalid(e) => Some(e),
            _ => None,
        }
    }
}

/// Reads [`DNS_OWNER_ANNOTATION`]. The value is taken as written (no trimming, no case folding):
/// external-dns compares owner ids exactly, and so does sweeper.
pub fn dns_owner(annotations: &BTreeMap<String, String>) -> DnsOwner {
    match annotations.get(DNS_OWNER_ANNOTATION) {
        None => DnsOwner::Unset,
        Some(v) => match owner_id_problem(v) {
            None => DnsOwner::Id(v.clone()),
            Some(why) => DnsOwner::Invalid(AnnotationError::BadDnsOwner {
                value: v.clone(),
                why,
            }),
        },
    }
}

/// The settings of one cluster: its own annotations, combined with those of the linked object
/// (`(label, annotations)`: the AWSManagedCluster of an EKS cluster) when there is one. The
/// controller and `gc plan` both read a cluster's switches here, so they cannot disagree. An
/// error in the linked object's annotations is prefixed with its label, and so are the names of
/// its task annotations in `tasks_from`.
pub fn settings_of(
    own: &BTreeMap<String, String>,
    linked: Option<&(String, BTreeMap<String, String>)>,
) -> Result<GcSettings, AnnotationError> {
    let own = parse(own)?;
    match linked {
        Some((label, other)) => parse(other)
            .map(|mut other| {
                for a in &mut other.tasks_from {
                    *a = format!("{a} on {label}");
                }
                combine(own, other)
            })
            .map_err(|e| AnnotationError::OnLinked {
                label: label.clone(),
                source: Box::new(e),
            }),
        None => Ok(own),
    }
}

/// What the annotations ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcSettings {
    /// Phase 2 (external resources) runs.
    pub external_gc: bool,
    /// Phase 2 tasks selected; `None` = the default set (all but the opt-ins).
    pub tasks: Option<Vec<GcTask>>,
    /// The task annotations `tasks` comes from, for messages (empty: the default set).
    pub tasks_from: Vec<String>,
    /// The external-dns owner id whose records go with their load balancers.
    pub dns_owner: DnsOwner,
}

pub fn parse(annotations: &BTreeMap<String, String>) -> Result<GcSettings, AnnotationError> {
    let external_gc = match annotations.get(GC_ANNOTATION) {
        None => true,
        Some(v) => parse_bool(v).ok_or_else(|| AnnotationError::BadSwitch(v.clone()))?,
    };
    let tasks = tasks::object_tasks(
        annotations.get(CAPA_TASKS_ANNOTATION).map(String::as_str),
        annotations
            .get(SWEEPER_TASKS_ANNOTATION)
            .map(String::as_str),
    )?;
    Ok(GcSettings {
        external_gc,
        tasks_from: tasks
            .from
            .annotations()
            .iter()
            .map(|a| a.to_string())
            .collect(),
        tasks: tasks.tasks,
        dns_owner: dns_owner(annotations),
    })
}

/// Go's `strconv.ParseBool`, which CAPA reads the gc switch with: exactly these spellings, no
/// trimming (`" true"` is an error there too).
pub fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The settings of an EKS cluster, whose switches may sit on two objects: the
/// AWSManagedControlPlane (where CAPA's gc reads them) and the AWSManagedCluster (where
/// `clusterawsadm gc` writes them, being Cluster.spec.infrastructureRef). `false` on either opts
/// out. Each object's tasks are its own two task annotations combined ([`tasks::object_tasks`]);
/// tasks set on both objects are intersected (each one narrows what runs, so no task runs that
/// either object's annotations leave out); tasks set on one apply. The external-dns owner id is
/// the control plane's (`a`) alone: clusterawsadm never writes it.
pub fn combine(a: GcSettings, b: GcSettings) -> GcSettings {
    let tasks = match (a.tasks, b.tasks) {
        (Some(x), Some(y)) => Some(x.into_iter().filter(|t| y.contains(t)).collect()),
        (x, None) => x,
        (None, y) => y,
    };
    let mut tasks_from = a.tasks_from;
    tasks_from.extend(b.tasks_from);
    GcSettings {
        external_gc: a.external_gc && b.external_gc,
        tasks,
        tasks_from,
        dns_owner: a.dns_owner,
    }
}

#[cfg(test)]
mod tests;
