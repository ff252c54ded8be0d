//! The Route53 record rule's cases, without I/O: every "must not delete" look-alike.

use super::*;

pub(crate) const LB: &str = "k8s-web-abc-123.elb.us-east-1.amazonaws.com";

fn rec(name: &str, ty: &str, alias: Option<&str>, values: &[&str]) -> Rec {
    Rec {
        name: name.into(),
        ty: ty.into(),
        alias: alias.map(str::to_string),
        values: values.iter().map(|v| v.to_string()).collect(),
        set_id: None,
    }
}

fn txt(owner: &str) -> String {
    format!(
        "\"heritage=external-dns,external-dns/owner={owner},external-dns/resource=service/default/web\""
    )
}

fn lbs() -> HashSet<String> {
    [LB.to_string()].into()
}

fn decide(sets: &[Rec], owner: Option<&str>, lbs_deleted: bool) -> Vec<Fate> {
    fates(
        sets,
        &owned_records(sets, &lbs()),
        Allowed { owner, lbs_deleted },
    )
}

#[test]
fn an_external_dns_record_pointing_at_the_clusters_load_balancer_is_found() {
    let alias = format!("dualstack.{LB}.");
    let sets = [
        rec("www.example.com.", "A", Some(&alias), &[]),
        rec("a-www.example.com.", "TXT", None, &[&txt("c1")]),
        rec("api.example.com.", "CNAME", None, &[LB]),
        rec("api.example.com.", "TXT", None, &[&txt("default")]),
    ];
    let found = owned_records(&sets, &lbs());
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(
        (
            found[0].name.as_str(),
            found[0].txt.as_str(),
            found[0].owner.as_str()
        ),
        ("www.example.com.", "a-www.example.com.", "c1")
    );
    assert_eq!(
        (found[1].txt.as_str(), found[1].owner.as_str()),
        ("api.example.com.", "default")
    );
}

#[test]
fn look_alikes_are_not() {
    let sets = [
        // Points elsewhere, with an external-dns TXT.
        rec(
            "other.example.com.",
            "CNAME",
            None,
            &["lb-of-another.elb.amazonaws.com"],
        ),
        rec("other.example.com.", "TXT", None, &[&txt("c1")]),
        // Points at the load balancer, but no external-dns TXT: someone's hand-made record.
        rec("hand.example.com.", "CNAME", None, &[LB]),
        rec("hand.example.com.", "TXT", None, &["\"v=spf1 -all\""]),
    ];
    assert!(owned_records(&sets, &lbs()).is_empty());
    assert_eq!(
        external_dns_owner("\"heritage=other,external-dns/owner=x\""),
        None
    );
}

#[test]
fn only_the_named_owners_records_of_deleted_load_balancers_are_deleted_with_their_txt() {
    let alias = format!("dualstack.{LB}.");
    let sets = [
        rec("www.example.com.", "A", Some(&alias), &[]),
        rec("a-www.example.com.", "TXT", None, &[&txt("c1")]),
        rec("api.example.com.", "CNAME", None, &[LB]),
        rec("api.example.com.", "TXT", None, &[&txt("default")]),
        rec("web.example.com.", "CNAME", None, &[LB]),
        rec("cname-web.example.com.", "TXT", None, &[&txt("c2")]),
    ];
    let f = decide(&sets, Some("c1"), true);
    assert_eq!(f[0], Fate::Delete { txts: vec![1] });
    assert!(
        matches!(&f[1], Fate::Keep(why) if why.contains("\"default\"")),
        "{f:?}"
    );
    assert!(
        matches!(&f[2], Fate::Keep(why) if why.contains("not the cluster's")),
        "{f:?}"
    );
    // No annotation, or load balancers not deleted: every record stays.
    for (owner, lbs_deleted) in [(None, true), (Some("c1"), false)] {
        assert!(
            decide(&sets, owner, lbs_deleted)
                .iter()
                .all(|f| matches!(f, Fate::Keep(_))),
            "{owner:?} {lbs_deleted}"
        );
    }
    // An annotation naming `default` never reaches here (refused when parsed), and would
    // still delete nothing: "default" records are never deleted.
    assert!(matches!(
        &decide(&sets, Some("default"), true)[1],
        Fate::Keep(_)
    ));
}

#[test]
fn an_older_format_txt_goes_only_with_every_record_it_owns() {
    let alias = format!("dualstack.{LB}.");
    // Both formats (external-dns migrating): A and AAAA at www, both ours.
    let both = [
        rec("www.example.com.", "A", Some(&alias), &[]),
        rec("www.example.com.", "AAAA", Some(&alias), &[]),
        rec("www.example.com.", "TXT", None, &[&txt("c1")]),
        rec("a-www.example.com.", "TXT", None, &[&txt("c1")]),
        rec("aaaa-www.example.com.", "TXT", None, &[&txt("c1")]),
    ];
    assert_eq!(
        decide(&both, Some("c1"), true),
        [
            Fate::Delete { txts: vec![3, 2] },
            Fate::Delete { txts: vec![4] }
        ]
    );
    // Older format only, and an MX at the same name that is not ours: nothing goes.
    let shared = [
        rec("www.example.com.", "A", Some(&alias), &[]),
        rec("www.example.com.", "TXT", None, &[&txt("c1")]),
        rec("www.example.com.", "MX", None, &["10 mail.example.com."]),
    ];
    assert!(
        matches!(&decide(&shared, Some("c1"), true)[0], Fate::Keep(why) if why.contains("stay"))
    );
    // A TXT set holding another value too stays, and its record with it.
    let mixed = [
        rec("www.example.com.", "A", Some(&alias), &[]),
        rec(
            "www.example.com.",
            "TXT",
            None,
            &[&txt("c1"), "\"v=spf1 -all\""],
        ),
    ];
    assert!(
        matches!(&decide(&mixed, Some("c1"), true)[0], Fate::Keep(why) if why.contains("other than"))
    );
    // Routing-policy records are left to their owner.
    let mut weighted = both.clone();
    weighted[0].set_id = Some("blue".into());
    assert!(
        matches!(&decide(&weighted, Some("c1"), true)[0], Fate::Keep(why) if why.contains("set identifier"))
    );
}

#[test]
fn records_are_deleted_only_for_a_valid_owner_id_and_load_balancers_this_pass_deletes() {
    // (annotation, task load-balancer selected, the owner id deleted by)
    let rows: [(Option<&str>, bool, Option<&str>); 6] = [
        (Some("c1"), true, Some("c1")),
        (Some("c1"), false, None),
        (None, true, None),
        (Some("default"), true, None),
        (Some("a,b"), true, None),
        (Some(""), true, None),
    ];
    for (owner, lbs_deleted, want) in rows {
        assert_eq!(
            Allowed::of(owner, lbs_deleted).deleting(),
            want,
            "{owner:?} {lbs_deleted}"
        );
    }
    assert_eq!(
        Allowed::of(Some("default"), true).owner,
        None,
        "an invalid id names no record, even to compare"
    );
}

#[test]
fn owner_ids_are_what_external_dns_can_write_and_never_default() {
    for ok in [
        "c1",
        "prod-eu_1",
        "team.a:cluster/1",
        &"x".repeat(MAX_OWNER_ID),
    ] {
        assert_eq!(owner_id_problem(ok), None, "{ok}");
    }
    for bad in [
        "", "default", "Default", "DEFAULT", "a,b", "a=b", "a b", "\"a\"", "é",
    ] {
        assert!(owner_id_problem(bad).is_some(), "{bad:?}");
    }
    assert!(owner_id_problem(&"x".repeat(MAX_OWNER_ID + 1)).is_some());
}
