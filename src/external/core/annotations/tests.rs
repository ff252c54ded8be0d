//! The per-cluster switches: the gc switch, the owner id, and an EKS cluster's two objects.

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
            tasks_from: vec![],
            dns_owner: DnsOwner::Unset,
        }
    );
}

/// Every spelling Go's strconv.ParseBool accepts means to sweeper what it means to CAPA.
#[test]
fn every_parse_bool_spelling_opts_in_or_out_as_capa_reads_it() {
    let table = [
        ("1", true),
        ("t", true),
        ("T", true),
        ("TRUE", true),
        ("true", true),
        ("True", true),
        ("0", false),
        ("f", false),
        ("F", false),
        ("FALSE", false),
        ("false", false),
        ("False", false),
    ];
    for (value, collect) in table {
        let got = parse(&ann(&[(GC_ANNOTATION, value)])).unwrap();
        assert_eq!(got.external_gc, collect, "{value:?}");
    }
}

#[test]
fn any_other_switch_value_is_an_error_naming_it() {
    // What ParseBool refuses: CAPA refuses it too (its gc returns the parse error).
    for bad in ["yes", "", "no", "tRUE", " true", "2", "on"] {
        let e = parse(&ann(&[(GC_ANNOTATION, bad)])).unwrap_err();
        assert_eq!(e, AnnotationError::BadSwitch(bad.into()));
        assert!(e.to_string().contains(&format!("{bad:?}")));
    }
}

/// CAPA's annotation as before, for CAPA's names: trimmed, deduplicated. (The rule for both
/// task annotations is table-tested in tasks.rs.)
#[test]
fn tasks_parse_and_deduplicate() {
    let s = parse(&ann(&[(
        CAPA_TASKS_ANNOTATION,
        "load-balancer, target-group,load-balancer",
    )]))
    .unwrap();
    assert_eq!(
        s.tasks,
        Some(vec![task("load-balancer"), task("target-group")])
    );
    assert_eq!(s.tasks_from, [CAPA_TASKS_ANNOTATION]);
    let s = parse(&ann(&[
        (CAPA_TASKS_ANNOTATION, "load-balancer"),
        (SWEEPER_TASKS_ANNOTATION, "ebs-volume,load-balancer"),
    ]))
    .unwrap();
    assert_eq!(
        s.tasks,
        Some(vec![task("ebs-volume"), task("load-balancer")])
    );
    assert_eq!(
        s.tasks_from,
        [SWEEPER_TASKS_ANNOTATION, CAPA_TASKS_ANNOTATION]
    );
}

#[test]
fn unknown_empty_or_misplaced_tasks_are_errors() {
    let e = parse(&ann(&[(
        CAPA_TASKS_ANNOTATION,
        "load-balancer,nat-gateway",
    )]))
    .unwrap_err();
    let AnnotationError::UnknownTask { given, .. } = &e else {
        panic!("expected UnknownTask, got {e:?}");
    };
    assert_eq!(given, "nat-gateway");
    let text = e.to_string();
    assert!(text.contains("\"nat-gateway\""), "{text}");
    for known in ["load-balancer", "target-group", "security-group"] {
        assert!(text.contains(known), "the error lists {known}: {text}");
    }
    for (a, v) in [
        (CAPA_TASKS_ANNOTATION, ""),
        (CAPA_TASKS_ANNOTATION, "target-group,,"),
        (SWEEPER_TASKS_ANNOTATION, ""),
    ] {
        assert!(
            matches!(
                parse(&ann(&[(a, v)])),
                Err(AnnotationError::EmptyTask { annotation, .. }) if annotation == a
            ),
            "{a}={v:?}"
        );
    }
    assert_eq!(
        parse(&ann(&[(CAPA_TASKS_ANNOTATION, "ebs-volume")])),
        Err(AnnotationError::NotCapaTask {
            given: "ebs-volume".into()
        }),
        "a task of sweeper's in CAPA's annotation is never acted on"
    );
}

fn settings(external_gc: bool, tasks: Option<&[GcTask]>) -> GcSettings {
    GcSettings {
        external_gc,
        tasks: tasks.map(<[GcTask]>::to_vec),
        tasks_from: vec![],
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

/// An EKS cluster: each object's two task annotations combine by tasks.rs's rule, then the
/// two objects' sets are intersected; no task runs that any present annotation leaves out.
#[test]
fn a_linked_objects_task_annotations_narrow_like_the_control_planes() {
    let linked = |pairs: &[(&str, &str)]| ("AWSManagedCluster ns/c".to_string(), ann(pairs));
    let cp = ann(&[
        (CAPA_TASKS_ANNOTATION, "load-balancer,target-group"),
        (
            SWEEPER_TASKS_ANNOTATION,
            "ebs-volume,eks-log-group,load-balancer,target-group",
        ),
    ]);
    let tasks = |own: &BTreeMap<String, String>, l: &(String, BTreeMap<String, String>)| {
        settings_of(own, Some(l)).unwrap()
    };
    // The linked object's sweeper annotation narrows sweeper's tasks.
    let s = tasks(
        &cp,
        &linked(&[(SWEEPER_TASKS_ANNOTATION, "ebs-volume,load-balancer")]),
    );
    assert_eq!(
        s.tasks,
        Some(vec![task("ebs-volume"), task("load-balancer")])
    );
    assert_eq!(
        s.tasks_from,
        [
            SWEEPER_TASKS_ANNOTATION.to_string(),
            CAPA_TASKS_ANNOTATION.to_string(),
            format!("{SWEEPER_TASKS_ANNOTATION} on AWSManagedCluster ns/c"),
        ]
    );
    // Its CAPA annotation alone is exactly CAPA's tasks there, as on any object: sweeper's
    // own tasks (asked for on the control plane only) do not run.
    let s = tasks(&cp, &linked(&[(CAPA_TASKS_ANNOTATION, "load-balancer")]));
    assert_eq!(s.tasks, Some(vec![task("load-balancer")]));
    // Both on the linked object: the same rule there, then intersected.
    let s = tasks(
        &cp,
        &linked(&[
            (CAPA_TASKS_ANNOTATION, "target-group"),
            (
                SWEEPER_TASKS_ANNOTATION,
                "eks-log-group,load-balancer,target-group",
            ),
        ]),
    );
    assert_eq!(
        s.tasks,
        Some(vec![task("eks-log-group"), task("target-group")])
    );
    // Nothing on the linked object: the control plane's set as it is.
    let s = tasks(&cp, &linked(&[]));
    assert_eq!(
        s.tasks,
        Some(vec![
            task("ebs-volume"),
            task("eks-log-group"),
            task("load-balancer"),
            task("target-group")
        ])
    );
    // Only the linked object: its set (opt-ins included when named there).
    let s = tasks(
        &ann(&[]),
        &linked(&[(SWEEPER_TASKS_ANNOTATION, "ebs-snapshot")]),
    );
    assert_eq!(s.tasks, Some(vec![task("ebs-snapshot")]));
    // A sweeper task in the linked object's CAPA annotation is an error, named with it.
    let e = settings_of(&cp, Some(&linked(&[(CAPA_TASKS_ANNOTATION, "ebs-volume")])))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("AWSManagedCluster ns/c: ") && e.contains(SWEEPER_TASKS_ANNOTATION),
        "{e}"
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
            (CAPA_TASKS_ANNOTATION, "load-balancer"),
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
