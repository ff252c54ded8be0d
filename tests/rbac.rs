//! The shipped RBAC (deploy/manifests/full/rbac.yaml and external-only/rbac.yaml) against what
//! sweeper really calls.
//!
//! Every `sweeper run` the integration tests start runs as the shipped service account, and the
//! test apiserver audits that identity's requests (scripts/env-up.sh). This test reads the audit
//! log of the run and checks, with RBAC's own matching rules:
//! - every call was allowed by the shipped rules (and the API server's authorizer refused none);
//! - every verb of every rule was needed: some call used it that no other rule allowed, so the
//!   role grants nothing the code does not use;
//! - no `*` verbs, no escalate/bind/impersonate.
//!
//! It must run after the other tests: `make test` (scripts/test.sh) runs it last and passes the
//! audit-log offset where its run began in `SWEEPER_AUDIT_FROM`.

mod support;

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom};

const SA_USER: &str = "system:serviceaccount:sweeper-system:sweeper";
/// The external-only install (deploy/manifests/external-only): the external collector's
/// conformance tests run as it.
const EXTERNAL_SA_USER: &str = "system:serviceaccount:sweeper-system:sweeper-external";

#[derive(Debug)]
struct Rule {
    /// `ClusterRole sweeper #0`
    label: String,
    /// Some(ns) for a Role: only requests in that namespace.
    namespace: Option<String>,
    groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Call {
    verb: String,
    group: String,
    /// `resource` or `resource/subresource`
    resource: String,
    namespace: String,
    /// Empty for create and for collections: RBAC sees no name there.
    name: String,
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}/{} ns={:?} name={:?}",
            self.verb, self.group, self.resource, self.namespace, self.name
        )
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The roles in `file` (under deploy/manifests), all bound to service account `sa` of
/// sweeper-system and to nothing else. The test environment binds the external-only rules to a
/// second service account: as scripts/env-up.sh does, every `name: sweeper…` becomes
/// `name: <sa>…` when `sa` is not `sweeper`.
fn shipped_rules(file: &str, sa: &str) -> Vec<Rule> {
    let path = format!("{}/deploy/manifests/{file}", env!("CARGO_MANIFEST_DIR"));
    let text: String = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| match l.split_once("name: sweeper") {
            Some((head, tail)) if sa != "sweeper" && (tail.is_empty() || tail.starts_with('-')) => {
                format!("{head}name: {sa}{tail}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    let mut rules = Vec::new();
    let mut bound = BTreeSet::new();
    let mut roles = BTreeSet::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: Value = serde_json::to_value(serde_yaml::Value::deserialize(doc).unwrap()).unwrap();
        let kind = v["kind"].as_str().unwrap_or_default();
        let name = v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match kind {
            "ClusterRole" | "Role" => {
                let namespace = (kind == "Role")
                    .then(|| v["metadata"]["namespace"].as_str().unwrap().to_string());
                roles.insert(format!("{kind}/{name}"));
                for (i, r) in v["rules"].as_array().unwrap().iter().enumerate() {
                    rules.push(Rule {
                        label: format!("{kind} {name} rule #{i}"),
                        namespace: namespace.clone(),
                        groups: strings(&r["apiGroups"]),
                        resources: strings(&r["resources"]),
                        verbs: strings(&r["verbs"]),
                        names: strings(&r["resourceNames"]),
                    });
                }
            }
            "ClusterRoleBinding" | "RoleBinding" => {
                let subjects = v["subjects"].as_array().unwrap();
                assert!(
                    subjects.iter().all(|s| s["kind"] == "ServiceAccount"
                        && s["name"] == sa
                        && s["namespace"] == "sweeper-system"),
                    "{kind} {name} binds the {sa} service account and only it"
                );
                bound.insert(format!(
                    "{}/{}",
                    v["roleRef"]["kind"].as_str().unwrap(),
                    v["roleRef"]["name"].as_str().unwrap()
                ));
            }
            _ => {}
        }
    }
    assert_eq!(roles, bound, "every shipped role is bound, and only those");
    rules
}

/// RBAC's matching (k8s.io/kubernetes/pkg/apis/rbac/v1/evaluation_helpers.go).
fn allows(rule: &Rule, call: &Call) -> bool {
    let any = |list: &[String], x: &str| list.iter().any(|v| v == "*" || v == x);
    if let Some(ns) = &rule.namespace
        && *ns != call.namespace
    {
        return false;
    }
    let resource_ok = rule.resources.iter().any(|r| {
        r == "*"
            || *r == call.resource
            || r.strip_prefix("*/")
                .is_some_and(|sub| call.resource.split_once('/').is_some_and(|(_, s)| s == sub))
    });
    any(&rule.groups, &call.group)
        && resource_ok
        && any(&rule.verbs, &call.verb)
        && (rule.names.is_empty() || rule.names.contains(&call.name))
}

struct Audit {
    calls: Vec<Call>,
    non_resource: BTreeSet<String>,
    forbidden: BTreeSet<String>,
}

/// The requests of `user` in the audit log since `SWEEPER_AUDIT_FROM`.
fn read_audit(user: &str) -> Audit {
    let facts = support::EnvFacts::load();
    let path = facts.get("SWEEPER_AUDIT_LOG");
    let from: u64 = std::env::var("SWEEPER_AUDIT_FROM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut f = std::fs::File::open(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}: start the environment with `make env-up`"));
    f.seek(SeekFrom::Start(from)).unwrap();
    let mut text = String::new();
    f.read_to_string(&mut text).unwrap();
    let mut audit = Audit {
        calls: Vec::new(),
        non_resource: BTreeSet::new(),
        forbidden: BTreeSet::new(),
    };
    for line in text.lines() {
        let Ok(ev) = serde_json::from_str::<Value>(line) else {
            continue; // a line cut by the offset or by a write in progress
        };
        if ev["user"]["username"] != user {
            continue;
        }
        let verb = ev["verb"].as_str().unwrap_or_default().to_string();
        let code = ev["responseStatus"]["code"].as_i64().unwrap_or(0);
        let uri = ev["requestURI"].as_str().unwrap_or_default().to_string();
        // Authorization's own verdict. A 403 alone is not enough: admission also answers 403,
        // e.g. NamespaceLifecycle for a create in a namespace being deleted.
        if ev["annotations"]["authorization.k8s.io/decision"] == "forbid" {
            audit.forbidden.insert(format!("{verb} {uri} ({code})"));
        }
        let Some(obj) = ev.get("objectRef").filter(|o| o.is_object()) else {
            audit
                .non_resource
                .insert(uri.split('?').next().unwrap_or_default().to_string());
            continue;
        };
        let s = |k: &str| obj[k].as_str().unwrap_or_default().to_string();
        let mut resource = s("resource");
        if !s("subresource").is_empty() {
            resource = format!("{resource}/{}", s("subresource"));
        }
        // RBAC sees no name on create (it is in the body, not the URL).
        let name = if verb == "create" {
            String::new()
        } else {
            s("name")
        };
        audit.calls.push(Call {
            verb,
            group: s("apiGroup"),
            resource,
            namespace: s("namespace"),
            name,
        });
    }
    audit.calls.sort();
    audit.calls.dedup();
    audit
}

#[test]
#[ignore = "needs the test environment and the rest of the suite: run `make test`"]
fn shipped_rbac_allows_every_call_sweeper_made_and_nothing_more() {
    check(
        &shipped_rules("full/rbac.yaml", "sweeper"),
        SA_USER,
        20,
        &[],
    );
}

/// The external-only role: Secrets only in CAPA's namespace, ConfigMaps only in sweeper's, CAPA's
/// kinds and identities, no wildcard; every call the external collector made allowed, and every
/// grant used. Its calls include the uninstall Job's, which tests/uninstall.rs runs as this
/// identity (the pause switch's patch by name).
#[test]
#[ignore = "needs the test environment and the rest of the suite: run `make test`"]
fn external_only_rbac_allows_every_call_the_external_collector_made_and_nothing_more() {
    let rules = shipped_rules("external-only/rbac.yaml", "sweeper-external");
    for r in &rules {
        assert!(
            !r.groups.contains(&"*".to_string()) && !r.resources.contains(&"*".to_string()),
            "{}: no wildcard in the least-privilege role",
            r.label
        );
        // Audit records and the pause switch: sweeper's own namespace only (on EKS a cluster-wide
        // grant would reach kube-system/aws-auth).
        if r.resources.iter().any(|x| x == "configmaps") {
            assert_eq!(
                r.namespace.as_deref(),
                Some("sweeper-system"),
                "{}: ConfigMaps only in sweeper's namespace",
                r.label
            );
        }
        if r.resources.iter().any(|x| x == "secrets") {
            assert_eq!(
                r.namespace.as_deref(),
                Some("capa-system"),
                "{}: Secrets only in CAPA's namespace",
                r.label
            );
        }
    }
    check(&rules, EXTERNAL_SA_USER, 10, &UNREACHED_BY_THE_SUITE);
}

/// Grants of the external-only role the suite cannot show in use, each with why it stays:
/// - the leader-election Role: the external collector's tests run without leader election (the
///   shipped Lease is tests/leader.rs's and the demo's); its rules are the full role's, whose
///   use tests/leader.rs proves, plus `get`, which the full role's `*` get covers there.
/// - Event `patch`: kube-runtime's Recorder patches an Event's series when the same Event
///   repeats within its cache window (its documented RBAC is create + patch); sweeper only
///   publishes an Event when a condition changes, so the suite never repeats one.
const UNREACHED_BY_THE_SUITE: [(&str, &str); 4] = [
    ("Role sweeper-external-leader-election rule #0", "create"),
    ("Role sweeper-external-leader-election rule #1", "get"),
    ("Role sweeper-external-leader-election rule #1", "update"),
    ("ClusterRole sweeper-external rule #8", "patch"),
];

/// Every call `user` made is allowed by `rules`, no verb is dangerous, and every verb of every
/// rule was the only grant for some call (but the `exempt` (rule, verb) pairs, each justified
/// where it is declared).
fn check(rules: &[Rule], user: &str, at_least: usize, exempt: &[(&str, &str)]) {
    for r in rules {
        for v in &r.verbs {
            assert!(
                !["*", "escalate", "bind", "impersonate"].contains(&v.as_str()),
                "{}: verb {v:?} must never be granted",
                r.label
            );
        }
    }
    let audit = read_audit(user);
    assert!(
        audit.calls.len() >= at_least,
        "only {} distinct calls of {user} in the audit log since offset {:?}: this test checks \
         what the other integration tests made sweeper call, so run it after them (`make test`)",
        audit.calls.len(),
        std::env::var("SWEEPER_AUDIT_FROM").ok()
    );
    assert!(
        audit.forbidden.is_empty(),
        "the API server's authorizer refused sweeper: {:#?}",
        audit.forbidden
    );
    let denied: Vec<String> = audit
        .calls
        .iter()
        .filter(|c| !rules.iter().any(|r| allows(r, c)))
        .map(|c| c.to_string())
        .collect();
    assert!(
        denied.is_empty(),
        "calls the shipped role does not allow: {denied:#?}"
    );
    // Non-resource requests are discovery and version, which every authenticated user may read
    // (system:discovery, system:public-info-viewer); the role grants none.
    let unexpected: Vec<&String> = audit
        .non_resource
        .iter()
        .filter(|p| !(p.starts_with("/api") || *p == "/version"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "non-resource requests beyond discovery: {unexpected:?}"
    );
    // Minimality: each granted verb of each rule is the only grant for at least one real call.
    let mut unneeded = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        for v in &r.verbs {
            let needed = audit.calls.iter().any(|c| {
                c.verb == *v
                    && allows(r, c)
                    && !rules
                        .iter()
                        .enumerate()
                        .any(|(j, other)| j != i && allows(other, c))
            });
            if !needed && !exempt.contains(&(r.label.as_str(), v.as_str())) {
                unneeded.push(format!("{}: verb {v}", r.label));
            }
        }
    }
    assert!(
        unneeded.is_empty(),
        "grants no call needed (unused, or covered by another rule): {unneeded:#?}"
    );
}

#[test]
fn rbac_matching_follows_the_api_server() {
    let rule = |ns: Option<&str>, g: &str, r: &str, v: &str, names: &[&str]| Rule {
        label: "r".into(),
        namespace: ns.map(String::from),
        groups: vec![g.into()],
        resources: vec![r.into()],
        verbs: vec![v.into()],
        names: names.iter().map(|s| s.to_string()).collect(),
    };
    let call = |verb: &str, g: &str, r: &str, ns: &str, name: &str| Call {
        verb: verb.into(),
        group: g.into(),
        resource: r.into(),
        namespace: ns.into(),
        name: name.into(),
    };
    let all = rule(None, "*", "*", "delete", &[]);
    assert!(allows(
        &all,
        &call("delete", "apps", "deployments", "a", "x")
    ));
    assert!(allows(&all, &call("delete", "", "pods/status", "a", "x")));
    assert!(!allows(&all, &call("create", "", "pods", "a", "")));
    let lease = rule(
        Some("sweeper-system"),
        "coordination.k8s.io",
        "leases",
        "update",
        &["sweeper"],
    );
    let upd = |ns: &str, name: &str| call("update", "coordination.k8s.io", "leases", ns, name);
    assert!(allows(&lease, &upd("sweeper-system", "sweeper")));
    assert!(!allows(&lease, &upd("sweeper-system", "other")));
    assert!(!allows(&lease, &upd("default", "sweeper")));
    let status = rule(None, "g", "*/status", "patch", &[]);
    assert!(allows(
        &status,
        &call("patch", "g", "things/status", "", "x")
    ));
    assert!(!allows(&status, &call("patch", "g", "things", "", "x")));
}
