//! The two task annotations' one rule, table-tested row by row, and what configure writes.

use super::*;

fn tasks(names: &str) -> Vec<GcTask> {
    names
        .split(',')
        .filter(|n| !n.is_empty())
        .map(|n| n.parse().unwrap())
        .collect()
}

/// Every row of the module doc's table, and its errors.
#[test]
fn the_two_task_annotations_combine_by_one_rule() {
    use TasksFrom::*;
    type Want = Result<(Option<&'static str>, TasksFrom), &'static str>;
    let rows: &[(Option<&str>, Option<&str>, Want)] = &[
        // neither: the default set
        (None, None, Ok((None, Default))),
        // only CAPA's: exactly C
        (
            Some("load-balancer"),
            None,
            Ok((Some("load-balancer"), Capa)),
        ),
        (
            Some("security-group,target-group,load-balancer"),
            None,
            Ok((Some("security-group,target-group,load-balancer"), Capa)),
        ),
        // only sweeper's: exactly L, opt-ins included when named
        (
            None,
            Some("ebs-volume,load-balancer"),
            Ok((Some("ebs-volume,load-balancer"), Sweeper)),
        ),
        (
            None,
            Some("eks-log-group"),
            Ok((Some("eks-log-group"), Sweeper)),
        ),
        // both: L without the CAPA tasks C leaves out; sweeper's own tasks follow L
        (
            Some("load-balancer"),
            Some("ebs-volume,load-balancer,target-group,instance"),
            Ok((Some("ebs-volume,load-balancer,instance"), Both)),
        ),
        (
            Some("load-balancer,target-group,security-group"),
            Some("ebs-volume"),
            Ok((Some("ebs-volume"), Both)),
        ),
        (
            Some("target-group"),
            Some("load-balancer"),
            Ok((Some(""), Both)),
        ),
        // spaces: trimmed (CAPA itself refuses them; configure never writes them)
        (
            Some("load-balancer, target-group"),
            None,
            Ok((Some("load-balancer,target-group"), Capa)),
        ),
        (
            None,
            Some(" ebs-volume , dns-record,ebs-volume"),
            Ok((Some("ebs-volume,dns-record"), Sweeper)),
        ),
        // errors: a sweeper task in CAPA's annotation is never a task, even beside sweeper's
        (Some("ebs-volume"), None, Err("NotCapaTask ebs-volume")),
        (
            Some("load-balancer,instance"),
            Some("instance"),
            Err("NotCapaTask instance"),
        ),
        (
            Some("nat-gateway"),
            None,
            Err("UnknownTask capa nat-gateway"),
        ),
        (
            None,
            Some("nat-gateway"),
            Err("UnknownTask sweeper nat-gateway"),
        ),
        (Some(""), None, Err("EmptyTask capa")),
        (Some("load-balancer,,"), None, Err("EmptyTask capa")),
        (None, Some(""), Err("EmptyTask sweeper")),
        (
            Some("load-balancer"),
            Some("ebs-volume,"),
            Err("EmptyTask sweeper"),
        ),
    ];
    for (capa, own, want) in rows {
        let got = object_tasks(*capa, *own).map_err(|e| match e {
            AnnotationError::NotCapaTask { given } => format!("NotCapaTask {given}"),
            AnnotationError::UnknownTask {
                annotation, given, ..
            } => format!(
                "UnknownTask {} {given}",
                if annotation == CAPA_TASKS_ANNOTATION {
                    "capa"
                } else {
                    "sweeper"
                }
            ),
            AnnotationError::EmptyTask { annotation, .. } => format!(
                "EmptyTask {}",
                if annotation == CAPA_TASKS_ANNOTATION {
                    "capa"
                } else {
                    "sweeper"
                }
            ),
            other => format!("{other:?}"),
        });
        let want = want
            .map(|(ts, from)| ObjectTasks {
                tasks: ts.map(tasks),
                from,
            })
            .map_err(str::to_string);
        assert_eq!(got, want, "CAPA's {capa:?}, sweeper's {own:?}");
    }
}

#[test]
fn a_sweeper_task_in_capas_annotation_says_to_move_it() {
    let e = object_tasks(Some("ebs-volume"), None)
        .unwrap_err()
        .to_string();
    for says in [
        CAPA_TASKS_ANNOTATION,
        "\"ebs-volume\"",
        "validateGCTasksAnnotation",
        SWEEPER_TASKS_ANNOTATION,
        "sweeper gc configure",
        "load-balancer, target-group, security-group",
    ] {
        assert!(e.contains(says), "says {says}: {e}");
    }
    let e = object_tasks(Some("nat-gateway"), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(CAPA_TASKS_ANNOTATION)
            && e.contains("\"nat-gateway\"")
            && e.contains("load-balancer, target-group, security-group")
            && !e.contains("ebs-volume"),
        "CAPA's annotation lists CAPA's names only: {e}"
    );
    let e = object_tasks(None, Some("nat-gateway"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(SWEEPER_TASKS_ANNOTATION) && e.contains("ebs-volume"),
        "sweeper's annotation lists every task: {e}"
    );
}

/// What configure writes gives back exactly what it was given.
#[test]
fn configure_writes_what_reads_back_as_exactly_its_tasks() {
    let value = |w: &[(&str, Option<String>); 2], k: &str| {
        w.iter().find(|(a, _)| *a == k).unwrap().1.clone()
    };
    for (given, capa, own) in [
        (
            "ebs-volume,load-balancer",
            Some("load-balancer"),
            Some("ebs-volume,load-balancer"),
        ),
        ("ebs-volume", None, Some("ebs-volume")),
        (
            "security-group,ebs-snapshot,load-balancer,security-group",
            Some("security-group,load-balancer"),
            Some("security-group,ebs-snapshot,load-balancer"),
        ),
        ("", None, None),
    ] {
        let w = configured(&tasks(given));
        assert_eq!(value(&w, CAPA_TASKS_ANNOTATION).as_deref(), capa, "{given}");
        assert_eq!(
            value(&w, SWEEPER_TASKS_ANNOTATION).as_deref(),
            own,
            "{given}"
        );
        let back = object_tasks(
            value(&w, CAPA_TASKS_ANNOTATION).as_deref(),
            value(&w, SWEEPER_TASKS_ANNOTATION).as_deref(),
        )
        .unwrap();
        let mut want = Vec::new();
        for t in tasks(given) {
            push_once(&mut want, t);
        }
        assert_eq!(
            back.tasks,
            (!want.is_empty()).then_some(want),
            "{given}: the effective set is exactly what was configured"
        );
    }
}

#[test]
fn the_plan_names_the_tasks_and_where_they_come_from() {
    let d = describe(None, &[]);
    assert!(
        d.contains("default set") && d.contains("load-balancer") && d.contains("ebs-volume"),
        "{d}"
    );
    assert!(
        !d.split(';').next().unwrap().contains("ebs-volume"),
        "the opt-ins are not in the default set: {d}"
    );
    let from = vec![SWEEPER_TASKS_ANNOTATION.to_string()];
    assert_eq!(
        describe(Some(&tasks("ebs-volume,load-balancer")), &from),
        "phase-2 tasks: ebs-volume, load-balancer (from sweeper.dev/gc-tasks)\n"
    );
    assert!(describe(Some(&[]), &from).contains("none"));
}
