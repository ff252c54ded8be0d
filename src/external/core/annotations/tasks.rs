//! Which phase-2 tasks run: two annotations, one rule (issue #41).
//!
//! - [`SWEEPER_TASKS_ANNOTATION`] (`sweeper.dev/gc-tasks`), sweeper's own: a comma list of any of
//!   sweeper's phase-2 task names (`GcTask`, the names the registered cleaners declare, CAPA's
//!   three included).
//! - [`CAPA_TASKS_ANNOTATION`] (`aws.cluster.x-k8s.io/external-resource-tasks-gc`), CAPA's, read
//!   with CAPA's meaning and vocabulary: `load-balancer`, `target-group`, `security-group`
//!   (`registry::CAPA`) and nothing else. CAPA's AWSCluster webhook (`validateGCTasksAnnotation`,
//!   called from `ValidateUpdate` only) refuses every update of an object whose annotation names
//!   anything else, and CAPA's gc calls a nil function for such a name (the
//!   AWSManagedControlPlane has no webhook check, so only the gc stops it there). Another name in
//!   it (an object annotated before CAPA's webhook, an AWSManagedControlPlane, an older sweeper's
//!   `gc configure`) is therefore an error ([`AnnotationError::NotCapaTask`]) that holds the
//!   teardown like any bad annotation, never a task of sweeper's.
//!
//! Both lists: parts are trimmed; an empty part or an unknown name is an error; a name given twice
//! counts once. Trimming is kept from before (sweeper reads "load-balancer, target-group" in CAPA's
//! annotation as two tasks), although CAPA splits without trimming: its webhook refuses such a
//! value and its gc cannot run " target-group". `sweeper gc configure` never writes a space.
//!
//! How the two combine on one object, safety first ([`object_tasks`], the one place):
//!
//! | CAPA's annotation | sweeper's annotation | phase-2 tasks |
//! |---|---|---|
//! | absent | absent | the default set: every task but the opt-ins `ebs-volume`, `ebs-snapshot`, `eks-log-group` |
//! | list C | absent | exactly C (a user who narrowed gc with CAPA's annotation never asked for sweeper's other tasks) |
//! | absent | list L | exactly L |
//! | list C | list L | L without the CAPA tasks C leaves out (a CAPA task runs only when both allow it; sweeper's own follow L) |
//! | an error in either | | none: Warning Event, condition, log; nothing is deleted until it is fixed |
//!
//! On EKS, the AWSManagedCluster's two annotations combine by the same rule, and the two objects'
//! sets are intersected (`combine`): no task runs that either object's annotations leave out.

use crate::external::core::annotations::AnnotationError;
use sweeper_aws::phases::GcTask;
use sweeper_aws::phases::registry::{self, CAPA, OPT_IN};

pub const SWEEPER_TASKS_ANNOTATION: &str = "sweeper.dev/gc-tasks";
pub const CAPA_TASKS_ANNOTATION: &str = "aws.cluster.x-k8s.io/external-resource-tasks-gc";

/// Which annotations one object's task set comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TasksFrom {
    /// Neither: the default set.
    Default,
    /// CAPA's alone.
    Capa,
    /// sweeper's alone.
    Sweeper,
    /// Both, combined.
    Both,
}

impl TasksFrom {
    /// The annotations that set the tasks, sweeper's first.
    pub fn annotations(self) -> &'static [&'static str] {
        match self {
            TasksFrom::Default => &[],
            TasksFrom::Capa => &[CAPA_TASKS_ANNOTATION],
            TasksFrom::Sweeper => &[SWEEPER_TASKS_ANNOTATION],
            TasksFrom::Both => &[SWEEPER_TASKS_ANNOTATION, CAPA_TASKS_ANNOTATION],
        }
    }
}

/// One object's phase-2 tasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectTasks {
    /// The tasks to run; `None` = the default set.
    pub tasks: Option<Vec<GcTask>>,
    pub from: TasksFrom,
}

/// The phase-2 tasks one object's annotations select, from the raw values of CAPA's and
/// sweeper's task annotations (`None` = absent). The whole rule of the module doc, table and
/// errors, in one pure function.
pub fn object_tasks(
    capa: Option<&str>,
    sweeper: Option<&str>,
) -> Result<ObjectTasks, AnnotationError> {
    let capa = capa.map(capa_list).transpose()?;
    let own = sweeper.map(sweeper_list).transpose()?;
    Ok(match (capa, own) {
        (None, None) => ObjectTasks {
            tasks: None,
            from: TasksFrom::Default,
        },
        (Some(c), None) => ObjectTasks {
            tasks: Some(c),
            from: TasksFrom::Capa,
        },
        (None, Some(l)) => ObjectTasks {
            tasks: Some(l),
            from: TasksFrom::Sweeper,
        },
        (Some(c), Some(l)) => ObjectTasks {
            tasks: Some(
                l.into_iter()
                    .filter(|t| !CAPA.contains(t) || c.contains(t))
                    .collect(),
            ),
            from: TasksFrom::Both,
        },
    })
}

/// The trimmed parts of a list; an empty one is an error.
fn parts<'a>(annotation: &'static str, value: &'a str) -> Result<Vec<&'a str>, AnnotationError> {
    value
        .split(',')
        .map(|p| match p.trim() {
            "" => Err(AnnotationError::EmptyTask {
                annotation,
                value: value.to_string(),
            }),
            p => Ok(p),
        })
        .collect()
}

fn push_once(out: &mut Vec<GcTask>, t: GcTask) {
    if !out.contains(&t) {
        out.push(t);
    }
}

/// sweeper's annotation: any registered task.
fn sweeper_list(value: &str) -> Result<Vec<GcTask>, AnnotationError> {
    let mut out = Vec::new();
    for part in parts(SWEEPER_TASKS_ANNOTATION, value)? {
        let t: GcTask = part
            .parse()
            .map_err(
                |e: sweeper_aws::phases::UnknownGcTask| AnnotationError::UnknownTask {
                    annotation: SWEEPER_TASKS_ANNOTATION,
                    given: e.given,
                    expected: e.expected,
                },
            )?;
        push_once(&mut out, t);
    }
    Ok(out)
}

/// CAPA's annotation: CAPA's three tasks only.
fn capa_list(value: &str) -> Result<Vec<GcTask>, AnnotationError> {
    let mut out = Vec::new();
    for part in parts(CAPA_TASKS_ANNOTATION, value)? {
        match CAPA.iter().find(|t| t.name() == part) {
            Some(t) => push_once(&mut out, *t),
            None if part.parse::<GcTask>().is_ok() => {
                return Err(AnnotationError::NotCapaTask {
                    given: part.to_string(),
                });
            }
            None => {
                return Err(AnnotationError::UnknownTask {
                    annotation: CAPA_TASKS_ANNOTATION,
                    given: part.to_string(),
                    expected: capa_names(),
                });
            }
        }
    }
    Ok(out)
}

/// CAPA's task names, comma-separated.
pub fn capa_names() -> String {
    names(&CAPA)
}

fn names(tasks: &[GcTask]) -> String {
    tasks
        .iter()
        .map(GcTask::name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `gc configure --gc-task X` writes so that the object's tasks are exactly X (see
/// [`object_tasks`]): sweeper's annotation the whole of X; CAPA's annotation the part of X in
/// CAPA's vocabulary, or removed when X names none of CAPA's tasks (an empty value would make
/// CAPA's gc panic). No tasks: both removed (the default set). Joined with "," and no spaces,
/// which CAPA's webhook and gc need; a task given twice is written once.
pub fn configured(tasks: &[GcTask]) -> [(&'static str, Option<String>); 2] {
    let mut all = Vec::new();
    for t in tasks {
        push_once(&mut all, *t);
    }
    let join = |ts: Vec<&GcTask>| {
        (!ts.is_empty()).then(|| ts.iter().map(|t| t.name()).collect::<Vec<_>>().join(","))
    };
    let capa: Vec<&GcTask> = all.iter().filter(|t| CAPA.contains(t)).collect();
    [
        (SWEEPER_TASKS_ANNOTATION, join(all.iter().collect())),
        (CAPA_TASKS_ANNOTATION, join(capa)),
    ]
}

/// How `gc plan` states a cluster's phase-2 tasks: the tasks, and the annotations they come from
/// (`from`, empty for the default set).
pub fn describe(tasks: Option<&[GcTask]>, from: &[String]) -> String {
    match tasks {
        None => format!(
            "phase-2 tasks: the default set (no task annotation): {}; the opt-ins {} are off\n",
            names(&registry::default_tasks()),
            names(&OPT_IN)
        ),
        Some(ts) => format!(
            "phase-2 tasks: {} (from {})\n",
            if ts.is_empty() {
                "none: no annotation allows a task both ask for".to_string()
            } else {
                names(ts)
            },
            from.join(" and ")
        ),
    }
}

#[cfg(test)]
mod tests;
