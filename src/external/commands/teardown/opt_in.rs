//! `sweeper teardown --gc-task`: the phase-2 tasks a one-shot teardown runs. The value has the
//! grammar of `sweeper.dev/gc-tasks` (read by the same parser: comma-separated task names,
//! trimmed, an empty or unknown one an error) and adds the tasks it names to the default set,
//! which is what runs without it: a scan's candidate is torn down whole by default, and the
//! opt-ins (`ebs-volume`, `ebs-snapshot`, `eks-log-group`) are what a user adds to recover what
//! the scan priced under them. Pure.

use super::decide::TargetError;
use crate::external::core::annotations::{self, GcSettings, SWEEPER_TASKS_ANNOTATION};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use sweeper_aws::model::Phase;
use sweeper_aws::phases::registry;
use sweeper_aws::phases::{GcTask, PassReport};

/// The settings of a teardown with the tasks `named` (each `--gc-task` value) added to the
/// default set; without any, the default settings.
pub fn settings(named: &[String]) -> Result<GcSettings, TargetError> {
    let mut raw = BTreeMap::new();
    if !named.is_empty() {
        raw.insert(SWEEPER_TASKS_ANNOTATION.to_string(), named.join(","));
    }
    let mut s = annotations::parse(&raw).map_err(TargetError::GcTask)?;
    if let Some(extra) = s.tasks.take() {
        let mut all = registry::default_tasks();
        for t in extra {
            if !all.contains(&t) {
                all.push(t);
            }
        }
        s.tasks = Some(all);
        s.tasks_from = vec!["--gc-task".into()];
    }
    Ok(s)
}

/// The tasks of `named` the default set does not run.
pub fn added(named: &[String]) -> Vec<GcTask> {
    let default = registry::default_tasks();
    let mut out: Vec<GcTask> = Vec::new();
    for t in named
        .iter()
        .flat_map(|v| v.split(','))
        .filter_map(|n| n.trim().parse::<GcTask>().ok())
    {
        if !default.contains(&t) && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// The plan's lines for what the named tasks add to a default teardown: each planned phase-2
/// resource of a kind only those tasks delete.
pub fn render_added(out: &mut String, named: &[String], plan: &PassReport) {
    let added = added(named);
    if added.is_empty() {
        return;
    }
    for t in added {
        let kinds: Vec<&str> = registry::descriptors()
            .into_iter()
            .filter(|d| d.phase == Phase::Tagged && d.task == Some(t))
            .map(|d| d.kind)
            .collect();
        let found: Vec<String> = plan
            .phases
            .iter()
            .filter(|p| p.phase == Phase::Tagged)
            .flat_map(|p| &p.planned)
            .filter(|r| kinds.contains(&r.kind.as_str()))
            .map(|r| r.id.clone())
            .collect();
        let _ = writeln!(
            out,
            "--gc-task {t} adds: {}",
            if found.is_empty() {
                "nothing found".to_string()
            } else {
                found.join(", ")
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ts: &Option<Vec<GcTask>>) -> Vec<&'static str> {
        ts.iter().flatten().map(GcTask::name).collect()
    }

    #[test]
    fn named_tasks_add_to_the_default_set_with_the_annotations_grammar() {
        assert_eq!(
            settings(&[]).unwrap().tasks,
            None,
            "absent: the default set"
        );
        let s = settings(&["ebs-volume, ebs-snapshot".into()]).unwrap();
        let got = names(&s.tasks);
        for t in registry::default_tasks() {
            assert!(got.contains(&t.name()), "{t} of the default set");
        }
        assert!(got.contains(&"ebs-volume") && got.contains(&"ebs-snapshot"));
        assert!(!got.contains(&"eks-log-group"), "an opt-in not named");
        let twice = settings(&["load-balancer".into(), "load-balancer".into()]).unwrap();
        assert_eq!(names(&twice.tasks).len(), registry::default_tasks().len());
        for bad in ["ebs-volume,", "no-such-task"] {
            let e = settings(&[bad.into()]).unwrap_err().to_string();
            assert!(e.starts_with("--gc-task: "), "{e}");
        }
        assert_eq!(
            added(&["ebs-volume,load-balancer".into()])
                .iter()
                .map(GcTask::name)
                .collect::<Vec<_>>(),
            ["ebs-volume"]
        );
    }
}
