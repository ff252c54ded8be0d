//! The per-cluster switches, with CAPA's names kept exactly:
//! - `aws.cluster.x-k8s.io/external-resource-gc`: absent or "true" = collect external resources
//!   (phase 2), "false" = opt out (phases 1 and 3 still run). Anything else is an error.
//! - `aws.cluster.x-k8s.io/external-resource-tasks-gc`: comma list of `dns-record` (report
//!   only), `load-balancer`,
//!   `target-group`, `instance`, `launch-template`, `instance-profile`, `oidc-provider`,
//!   `security-group`, `eks-security-group`, `ebs-volume`, `ebs-snapshot`, `eks-log-group`
//!   limiting phase 2; absent = all but the opt-ins `ebs-volume`, `ebs-snapshot` and
//!   `eks-log-group`. An unknown or empty task is an error. The list parses straight into sweeper-aws's `GcTask`, whose names are the
//!   ones the registered cleaners declare: there is no second list to keep in step.
//!
//! An error here means: a Warning Event and a condition naming the bad value, and nothing is
//! deleted until it is fixed.

use std::collections::BTreeMap;

use sweeper_aws::phases::{GcTask, UnknownGcTask};

pub const GC_ANNOTATION: &str = "aws.cluster.x-k8s.io/external-resource-gc";
pub const TASKS_ANNOTATION: &str = "aws.cluster.x-k8s.io/external-resource-tasks-gc";

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
    Ok(GcSettings { external_gc, tasks })
}

/// The settings of an EKS cluster, whose switches may sit on two objects: the
/// AWSManagedControlPlane (where CAPA's gc reads them) and the AWSManagedCluster (where
/// `clusterawsadm gc` writes them, being Cluster.spec.infrastructureRef). `false` on either opts
/// out; tasks set on both are intersected (each one narrows what runs); tasks set on one apply.
pub fn combine(a: GcSettings, b: GcSettings) -> GcSettings {
    let tasks = match (a.tasks, b.tasks) {
        (Some(x), Some(y)) => Some(x.into_iter().filter(|t| y.contains(t)).collect()),
        (x, None) => x,
        (None, y) => y,
    };
    GcSettings {
        external_gc: a.external_gc && b.external_gc,
        tasks,
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
                tasks: None
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
}
