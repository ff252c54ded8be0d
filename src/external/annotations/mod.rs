//! The per-cluster switches, with CAPA's names kept exactly:
//! - `aws.cluster.x-k8s.io/external-resource-gc`: absent or "true" = collect external resources
//!   (phase 2), "false" = opt out (phases 1 and 3 still run). Anything else is an error.
//! - `aws.cluster.x-k8s.io/external-resource-tasks-gc`: comma list of `dns-record` (external-dns
//!   records: reported, deleted only with the owner id below), `load-balancer`,
//!   `target-group`, `instance`, `launch-template`, `instance-profile`, `oidc-provider`,
//!   `security-group`, `eks-security-group`, `ebs-volume`, `ebs-snapshot`, `eks-log-group`
//!   limiting phase 2; absent = all but the opt-ins `ebs-volume`, `ebs-snapshot` and
//!   `eks-log-group`. An unknown or empty task is an error. The list parses straight into sweeper-aws's `GcTask`, whose names are the
//!   ones the registered cleaners declare: there is no second list to keep in step.
//! - `sweeper.dev/external-dns-owner-id`: the external-dns owner id (`--txt-owner-id`) of the
//!   cluster's external-dns. With it, the `dns-record` task deletes the Route53 records
//!   external-dns made under exactly that id for the load balancers the teardown deletes, each
//!   with its TXT companion (sweeper-aws `cleaners::dns_records`); without it they are only
//!   reported. sweeper's own name (not CAPA's): CAPA has no such switch. Read from the object
//!   itself (AWSCluster, AWSManagedControlPlane), never from a linked AWSManagedCluster.
//!
//! An error in CAPA's two switches means: a Warning Event and a condition naming the bad value,
//! and nothing is deleted until it is fixed. A bad owner id is reported the same way (Event,
//! condition, log) but holds nothing: its records are only reported, as without the annotation,
//! and the rest of the teardown goes on (see [`DnsOwner::Invalid`]).

use std::collections::BTreeMap;

use sweeper_aws::cleaners::dns_records::owner_id_problem;
use sweeper_aws::phases::{GcTask, UnknownGcTask};

pub const GC_ANNOTATION: &str = "aws.cluster.x-k8s.io/external-resource-gc";
pub const TASKS_ANNOTATION: &str = "aws.cluster.x-k8s.io/external-resource-tasks-gc";
pub const DNS_OWNER_ANNOTATION: &str = "sweeper.dev/external-dns-owner-id";

#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum AnnotationError {
    #[error("annotation {GC_ANNOTATION} has value {0:?}: use \"true\" or \"false\"")]
    BadSwitch(String),
    /// The known names come from the registered phase-2 cleaners (`GcTask`'s parser), so a new
    /// cleaner's task is accepted here without touching this file.
    #[error("annotation {TASKS_ANNOTATION} has unknown task {:?}: use {}", .0.given, .0.expected)]
    UnknownTask(#[from] UnknownGcTask),
    #[error("annotation {TASKS_ANNOTATION} has an empty task in {0:?}")]
    EmptyTask(String),
    #[error(
        "annotation {DNS_OWNER_ANNOTATION} has value {value:?}: {why}; external-dns records are \
         reported, not deleted, until it is fixed"
    )]
    BadDnsOwner { value: String, why: String },
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
/// error in the linked object's annotations is prefixed with its label.
pub fn settings_of(
    own: &BTreeMap<String, String>,
    linked: Option<&(String, BTreeMap<String, String>)>,
) -> Result<GcSettings, String> {
    let own = parse(own).map_err(|e| e.to_string())?;
    match linked {
        Some((label, other)) => parse(other)
            .map(|other| combine(own, other))
            .map_err(|e| format!("{label}: {e}")),
        None => Ok(own),
    }
}

/// What the annotations ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcSettings {
    /// Phase 2 (external resources) runs.
    pub external_gc: bool,
    /// Phase 2 cleaners selected; `None` = all.
    pub tasks: Option<Vec<GcTask>>,
    /// The external-dns owner id whose records go with their load balancers.
    pub dns_owner: DnsOwner,
}

pub fn parse(annotations: &BTreeMap<String, String>) -> Result<GcSettings, AnnotationError> {
    let external_gc = match annotations.get(GC_ANNOTATION).map(|v| v.as_str()) {
        None | Some("true") => true,
        Some("false") => false,
        Some(other) => return Err(AnnotationError::BadSwitch(other.to_string())),
    };
    let tasks = match annotations.get(TASKS_ANNOTATION) {
        None => None,
        Some(list) => {
            let mut tasks = Vec::new();
            for part in list.split(',') {
                let part = part.trim();
                if part.is_empty() {
                    return Err(AnnotationError::EmptyTask(list.clone()));
                }
                let t: GcTask = part.parse()?;
                if !tasks.contains(&t) {
                    tasks.push(t);
                }
            }
            Some(tasks)
        }
    };
    Ok(GcSettings {
        external_gc,
        tasks,
        dns_owner: dns_owner(annotations),
    })
}

/// The settings of an EKS cluster, whose switches may sit on two objects: the
/// AWSManagedControlPlane (where CAPA's gc reads them) and the AWSManagedCluster (where
/// `clusterawsadm gc` writes them, being Cluster.spec.infrastructureRef). `false` on either opts
/// out; tasks set on both are intersected (each one narrows what runs); tasks set on one apply.
/// The external-dns owner id is the control plane's (`a`) alone: clusterawsadm never writes it.
pub fn combine(a: GcSettings, b: GcSettings) -> GcSettings {
    let tasks = match (a.tasks, b.tasks) {
        (Some(x), Some(y)) => Some(x.into_iter().filter(|t| y.contains(t)).collect()),
        (x, None) => x,
        (None, y) => y,
    };
    GcSettings {
        external_gc: a.external_gc && b.external_gc,
        tasks,
        dns_owner: a.dns_owner,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str) -> GcTask {
        name.parse().unwrap()
    }

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn absent_means_collect_everything() {
        assert_eq!(
            parse(&ann(&[])).unwrap(),
            GcSettings {
                external_gc: true,
                tasks: None,
                dns_owner: DnsOwner::Unset,
            }
        );
    }

    #[test]
    fn false_opts_out_of_phase_two() {
        assert!(
            !parse(&ann(&[(GC_ANNOTATION, "false")]))
                .unwrap()
                .external_gc
        );
        assert!(parse(&ann(&[(GC_ANNOTATION, "true")])).unwrap().external_gc);
    }

    #[test]
    fn any_other_switch_value_is_an_error_naming_it() {
        for bad in ["False", "yes", "", "1"] {
            let e = parse(&ann(&[(GC_ANNOTATION, bad)])).unwrap_err();
            assert_eq!(e, AnnotationError::BadSwitch(bad.into()));
            assert!(e.to_string().contains(&format!("{bad:?}")));
        }
    }

    #[test]
    fn tasks_parse_and_deduplicate() {
        let s = parse(&ann(&[(
            TASKS_ANNOTATION,
            "load-balancer, target-group,load-balancer",
        )]))
        .unwrap();
        assert_eq!(
            s.tasks,
            Some(vec![task("load-balancer"), task("target-group")])
        );
    }

    #[test]
    fn unknown_or_empty_tasks_are_errors() {
        let e = parse(&ann(&[(TASKS_ANNOTATION, "load-balancer,nat-gateway")])).unwrap_err();
        let AnnotationError::UnknownTask(unknown) = &e else {
            panic!("expected UnknownTask, got {e:?}");
        };
        assert_eq!(unknown.given, "nat-gateway");
        let text = e.to_string();
        assert!(text.contains("\"nat-gateway\""), "{text}");
        for known in ["load-balancer", "target-group", "security-group"] {
            assert!(text.contains(known), "the error lists {known}: {text}");
        }
        assert!(matches!(
            parse(&ann(&[(TASKS_ANNOTATION, "")])),
            Err(AnnotationError::EmptyTask(_))
        ));
        assert!(matches!(
            parse(&ann(&[(TASKS_ANNOTATION, "target-group,,")])),
            Err(AnnotationError::EmptyTask(_))
        ));
    }

    fn settings(external_gc: bool, tasks: Option<&[GcTask]>) -> GcSettings {
        GcSettings {
            external_gc,
            tasks: tasks.map(<[GcTask]>::to_vec),
            dns_owner: DnsOwner::Unset,
        }
    }

    #[test]
    fn false_on_either_object_opts_out() {
        for (a, b) in [(true, false), (false, true), (false, false)] {
            assert!(!combine(settings(a, None), settings(b, None)).external_gc);
        }
        assert!(combine(settings(true, None), settings(true, None)).external_gc);
    }

    #[test]
    fn tasks_on_both_are_intersected_on_one_apply() {
        let (lb, tg, sg) = (
            task("load-balancer"),
            task("target-group"),
            task("security-group"),
        );
        let both = combine(
            settings(true, Some(&[lb, tg])),
            settings(true, Some(&[tg, sg])),
        );
        assert_eq!(both.tasks, Some(vec![tg]));
        let disjoint = combine(settings(true, Some(&[lb])), settings(true, Some(&[sg])));
        assert_eq!(disjoint.tasks, Some(vec![]), "nothing both allow");
        assert_eq!(
            combine(settings(true, None), settings(true, Some(&[sg]))).tasks,
            Some(vec![sg])
        );
        assert_eq!(
            combine(settings(true, Some(&[lb])), settings(true, None)).tasks,
            Some(vec![lb])
        );
        assert_eq!(
            combine(settings(true, None), settings(true, None)).tasks,
            None
        );
    }

    #[test]
    fn a_valid_external_dns_owner_id_is_taken_as_written() {
        for id in ["c1", "prod-eu_1", "team.a:cluster/1"] {
            let s = parse(&ann(&[(DNS_OWNER_ANNOTATION, id)])).unwrap();
            assert_eq!(s.dns_owner, DnsOwner::Id(id.into()));
            assert_eq!(s.dns_owner.id(), Some(id));
        }
        assert_eq!(parse(&ann(&[])).unwrap().dns_owner, DnsOwner::Unset);
    }

    #[test]
    fn a_bad_external_dns_owner_id_is_an_error_that_blocks_nothing_else() {
        let long = "x".repeat(254);
        for bad in [
            "default", "Default", "", " c1", "c1,c2", "owner=c1", "\"c1\"", &long,
        ] {
            // The rest of the settings still parse: the teardown goes on.
            let s = parse(&ann(&[
                (DNS_OWNER_ANNOTATION, bad),
                (TASKS_ANNOTATION, "load-balancer"),
            ]))
            .unwrap();
            assert_eq!(s.tasks, Some(vec![task("load-balancer")]));
            assert_eq!(s.dns_owner.id(), None, "{bad:?}");
            let e = s.dns_owner.problem().expect("reported").to_string();
            assert!(
                e.contains(DNS_OWNER_ANNOTATION) && e.contains("reported, not deleted"),
                "{e}"
            );
        }
        let e = dns_owner(&ann(&[(DNS_OWNER_ANNOTATION, "default")]));
        assert!(
            e.problem()
                .unwrap()
                .to_string()
                .contains("external-dns#1758")
        );
    }

    #[test]
    fn the_owner_id_of_an_eks_cluster_is_the_control_planes() {
        let own = ann(&[(DNS_OWNER_ANNOTATION, "c1")]);
        let linked = (
            "AWSManagedCluster ns/c".to_string(),
            ann(&[(DNS_OWNER_ANNOTATION, "c2")]),
        );
        assert_eq!(
            settings_of(&own, Some(&linked)).unwrap().dns_owner,
            DnsOwner::Id("c1".into())
        );
        assert_eq!(
            settings_of(&ann(&[]), Some(&linked)).unwrap().dns_owner,
            DnsOwner::Unset
        );
    }
}
