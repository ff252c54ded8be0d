use super::*;

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn target(capa: &str, eks: Option<&str>, account: Option<&str>) -> OrphanTarget {
    OrphanTarget {
        capa: capa.into(),
        eks: eks.map(str::to_string),
        region: "us-east-1".into(),
        account: account.map(str::to_string),
    }
}

#[test]
fn a_name_that_is_live_not_ours_or_shared_is_refused_and_only_then() {
    let objects = set(&["live", "ns_live-eks"]);
    let eks = set(&["eks-live"]);
    let not_ours = set(&["theirs"]);
    let held = vec![HeldName {
        cluster: "shares".into(),
        why: HeldBack::SharesWithLive("live".into()),
        resources: 1,
    }];
    let world = World {
        objects: &objects,
        eks: Some(&eks),
        not_ours: &not_ours,
        held: &held,
        session: Some(("111111111111", "us-east-1")),
    };
    // (what, target, the refusal wanted)
    let cases: Vec<(&str, OrphanTarget, Option<TeardownRefusal>)> = vec![
        ("an orphan", target("gone", None, None), None),
        (
            "an orphan in the account asked for",
            target("gone", None, Some("111111111111")),
            None,
        ),
        (
            "a name sharing a prefix with a live one is not live",
            target("live-2", Some("ns_live"), None),
            None,
        ),
        (
            "a live object's name",
            target("live", None, None),
            Some(TeardownRefusal::LiveObject("live".into())),
        ),
        (
            "a live object's EKS name given as the EKS name",
            target("gone", Some("ns_live-eks"), None),
            Some(TeardownRefusal::LiveObject("ns_live-eks".into())),
        ),
        (
            "a live EKS cluster's name",
            target("gone", Some("eks-live"), None),
            Some(TeardownRefusal::LiveEks {
                name: "eks-live".into(),
                region: "us-east-1".into(),
            }),
        ),
        (
            "marked not ours",
            target("theirs", None, None),
            Some(TeardownRefusal::NotOurs("theirs".into())),
        ),
        (
            "its resources are claimed for a live name too",
            target("shares", None, None),
            Some(TeardownRefusal::SharesWithLive {
                name: "shares".into(),
                other: "live".into(),
            }),
        ),
        (
            "another account than asked",
            target("gone", None, Some("222222222222")),
            Some(TeardownRefusal::AccountMismatch {
                want: "222222222222".into(),
                got: "111111111111".into(),
            }),
        ),
        (
            "bad input: a wildcard",
            target("gone*", None, None),
            Some(TeardownRefusal::InvalidName {
                name: "gone*".into(),
                why: "only letters, digits, '-', '_' and '.' are allowed",
            }),
        ),
        (
            "bad input: an empty EKS name",
            target("gone", Some(""), None),
            Some(TeardownRefusal::InvalidName {
                name: String::new(),
                why: "empty",
            }),
        ),
    ];
    for (what, t, want) in cases {
        assert_eq!(refusal(&t, &world), want, "{what}");
    }
    // Before any AWS call: the checks that need none already refuse, the others wait.
    let early = World {
        eks: None,
        session: None,
        ..world
    };
    assert_eq!(
        refusal(&target("live", None, None), &early),
        Some(TeardownRefusal::LiveObject("live".into()))
    );
    assert_eq!(
        refusal(&target("gone", Some("eks-live"), None), &early),
        None
    );
    let other_region = World {
        session: Some(("111111111111", "eu-west-1")),
        ..world
    };
    assert_eq!(
        refusal(&target("gone", None, None), &other_region),
        Some(TeardownRefusal::RegionMismatch {
            want: "us-east-1".into(),
            got: "eu-west-1".into(),
        })
    );
}

fn file() -> ScanFile {
    serde_json::from_value(serde_json::json!({
        "notice": "A scan deletes nothing.",
        "regions": [
            {"account": "111111111111", "region": "us-east-1", "candidates": [
                {"cluster": "o1", "account": "111111111111", "region": "us-east-1",
                 "resources": [{"arn": "arn:aws:ec2:us-east-1:111111111111:security-group/sg-1",
                                "proofs": [{"tag": "kubernetes.io/cluster/o1=owned", "rule": "cloud"}]}]},
                {"cluster": "e3", "account": "111111111111", "region": "us-east-1",
                 "also_named": ["ns_e3"],
                 "resources": [{"proofs": [{"tag": "sigs.k8s.io/cluster-api-provider-aws/cluster/e3=owned", "rule": "capa"}]}]},
                {"cluster": "ns_e3", "account": "111111111111", "region": "us-east-1",
                 "also_named": ["e3"],
                 "resources": [{"proofs": [{"tag": "kubernetes.io/cluster/ns_e3=owned", "rule": "cloud"}]}]},
                {"cluster": "x", "account": "111111111111", "region": "us-east-1",
                 "also_named": ["y"], "resources": [{"proofs": [{"rule": "cloud"}]}]},
                {"cluster": "y", "account": "111111111111", "region": "us-east-1",
                 "also_named": ["x"], "resources": [{"proofs": [{"rule": "cloud"}]}]}
            ]},
            {"account": "222222222222", "region": "eu-west-1", "candidates": [
                {"cluster": "o1", "account": "222222222222", "region": "eu-west-1", "resources": []}
            ]}
        ]
    }))
    .unwrap()
}

fn located(capa: &str, eks: Option<&str>, account: &str, region: &str) -> OrphanTarget {
    OrphanTarget {
        capa: capa.into(),
        eks: eks.map(str::to_string),
        region: region.into(),
        account: Some(account.into()),
    }
}

#[test]
fn a_scan_names_its_candidates_with_their_account_and_region() {
    let f = file();
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        targets_from_scan(&f, &names(&["o1"]), false, None).unwrap(),
        vec![
            located("o1", None, "222222222222", "eu-west-1"),
            located("o1", None, "111111111111", "us-east-1"),
        ],
        "a name in two regions is two targets"
    );
    assert_eq!(
        targets_from_scan(&f, &names(&["o1"]), false, Some("eu-west-1")).unwrap(),
        vec![located("o1", None, "222222222222", "eu-west-1")]
    );
    let pair = located("e3", Some("ns_e3"), "111111111111", "us-east-1");
    assert_eq!(
        targets_from_scan(&f, &names(&["ns_e3"]), false, None).unwrap(),
        vec![pair.clone()],
        "an EKS pair is one target whichever name is given"
    );
    assert_eq!(
        targets_from_scan(&f, &names(&["e3", "ns_e3"]), false, None).unwrap(),
        vec![pair.clone()]
    );
    assert!(
        targets_from_scan(&f, &names(&["x"]), false, None)
            .unwrap_err()
            .to_string()
            .contains("--eks-name"),
        "a pair whose roles cannot be told is refused"
    );
    assert!(
        targets_from_scan(&f, &names(&["nope"]), false, None)
            .unwrap_err()
            .to_string()
            .contains("not an orphan candidate")
    );
    assert!(
        targets_from_scan(&f, &names(&["o1"]), false, Some("ap-south-1")).is_err(),
        "narrowed away"
    );
    assert!(
        targets_from_scan(&f, &[], true, None).is_err(),
        "--all stops at the ambiguous pair: nothing is guessed"
    );
    let eu = targets_from_scan(&f, &[], true, Some("eu-west-1")).unwrap();
    assert_eq!(eu, vec![located("o1", None, "222222222222", "eu-west-1")]);
}
