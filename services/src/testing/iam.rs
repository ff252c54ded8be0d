//! The shipped IAM policy (deploy/iam/sweeper-policy.json) against the AWS operations sweeper
//! calls. Every call goes through `errors::call("<service>.<Operation>", ...)`, so the source
//! names them all: the unit test below derives the set from the source and requires the policy
//! to grant exactly that; the LocalStack suite checks every call it records against it too
//! (see `assert_in_policy`). A second test derives the same set from the cleaners' descriptors
//! (`Descriptor::iam_actions`) and the pass's own (`phases::PASS_IAM_ACTIONS`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The IAM action of an operation, named as sweeper's calls name it (`ec2.DescribeVpcs`,
/// `elbv2.DeleteTargetGroup`, `tagging.GetResources`) or as the recorder does
/// (`EC2.DescribeVpcs`, `ElasticLoadBalancingv2.DeleteLoadBalancer`,
/// `ResourceGroupsTaggingAPI.GetResources`, `STS.GetCallerIdentity`).
pub fn iam_action(op: &str) -> Option<String> {
    let (service, operation) = op.split_once('.')?;
    let prefix = match service.to_ascii_lowercase().as_str() {
        "ec2" => "ec2",
        "elb" | "elbv2" | "elasticloadbalancing" | "elasticloadbalancingv2" => {
            "elasticloadbalancing"
        }
        "tagging" | "resourcegroupstaggingapi" => "tag",
        "sts" => "sts",
        "iam" => "iam",
        "eks" => "eks",
        // sweeper's calls say `logs.`, the recorder `CloudWatchLogs.`.
        "logs" | "cloudwatchlogs" => "logs",
        "route53" => "route53",
        "sqs" => "sqs",
        // sweeper's calls say `events.`, the recorder `EventBridge.`.
        "events" | "eventbridge" => "events",
        "secretsmanager" | "secrets manager" => "secretsmanager",
        "ssm" => "ssm",
        "s3" => "s3",
        _ => return None,
    };
    // S3's actions are not named after every operation: listing a bucket's objects is
    // `s3:ListBucket`.
    let action = match (prefix, operation) {
        ("s3", "ListObjectsV2" | "ListObjects" | "HeadBucket") => "ListBucket",
        _ => operation,
    };
    Some(format!("{prefix}:{action}"))
}

/// What the code says it needs: every registered cleaner's descriptor's actions and the pass's
/// own.
pub fn declared_actions() -> BTreeSet<String> {
    crate::phases::registry::descriptors()
        .iter()
        .flat_map(|d| d.iam_actions.iter())
        .chain(crate::phases::PASS_IAM_ACTIONS)
        .map(|a| a.to_string())
        .collect()
}

/// Operations that need no IAM permission.
pub const NEEDS_NO_PERMISSION: [&str; 1] = ["sts:GetCallerIdentity"];

/// The repository root: the first directory holding deploy/iam, from the directory of the crate
/// whose test runs (cargo and nextest set CARGO_MANIFEST_DIR at run time) up. The run-time value
/// wins over the compile-time one because builds of several checkouts share one target directory
/// (scripts/lib.sh) and cargo may reuse a binary built in another checkout.
fn root() -> PathBuf {
    let manifest =
        std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
    Path::new(&manifest)
        .ancestors()
        .find(|d| d.join("deploy/iam").is_dir())
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The actions the shipped policy allows.
pub fn policy_actions() -> BTreeSet<String> {
    let path = root().join("deploy/iam/sweeper-policy.json");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let doc: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = BTreeSet::new();
    for st in doc["Statement"].as_array().into_iter().flatten() {
        assert_eq!(st["Effect"], "Allow", "the policy only allows: {st}");
        match &st["Action"] {
            serde_json::Value::String(a) => {
                out.insert(a.clone());
            }
            serde_json::Value::Array(a) => {
                out.extend(a.iter().filter_map(|v| v.as_str().map(str::to_string)));
            }
            other => panic!("Action {other}"),
        }
    }
    out
}

/// What tests' fixture builders call and sweeper never does (it creates nothing but snapshots,
/// which the policy lists): recorded alongside the teardown's calls on the same clients.
fn builds_fixtures(action: &str) -> bool {
    let op = action.split_once(':').map_or(action, |(_, o)| o);
    [
        "Create",
        "Run",
        "Allocate",
        "Associate",
        "Attach",
        "Authorize",
        "Register",
        "Add",
        "Put",
        "Set",
        "Tag",
    ]
    .iter()
    .any(|p| op.starts_with(p))
}

/// Fails when a recorded operation is not granted by the shipped policy (fixture builders'
/// creates aside).
pub fn assert_in_policy(recorded: &[String]) {
    let allowed = policy_actions();
    let missing: BTreeSet<String> = recorded
        .iter()
        .filter_map(|op| iam_action(op))
        .filter(|a| {
            !allowed.contains(a)
                && !NEEDS_NO_PERMISSION.contains(&a.as_str())
                && !builds_fixtures(a)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "AWS operations called but not in deploy/iam/sweeper-policy.json: {missing:?}"
    );
}

/// The operations named in `call("<service>.<Operation>"` in the Rust files under `dir`.
pub fn called_in_source(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                // Test support builds fixtures with calls sweeper never makes.
                if p.file_name().is_some_and(|n| n == "testing") {
                    continue;
                }
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.extend(called_in_file(&p));
            }
        }
    }
    out
}

/// The operations named in `call("<service>.<Operation>"` in one Rust file.
pub fn called_in_file(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split("call(\"")
        .skip(1)
        .filter_map(|piece| piece.split('"').next().and_then(iam_action))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_policy_grants_exactly_what_the_code_calls() {
        let called = called_in_source(&root().join("services/src"));
        assert!(called.len() > 30, "the scan found the calls: {called:?}");
        let mut allowed = policy_actions();
        // Tag-on-create of the snapshot is part of CreateSnapshot's request, not a call.
        assert!(allowed.remove("ec2:CreateTags"));
        let missing: Vec<_> = called.difference(&allowed).collect();
        let unused: Vec<_> = allowed.difference(&called).collect();
        assert!(
            missing.is_empty(),
            "called but not in the policy: {missing:?}"
        );
        assert!(
            unused.is_empty(),
            "in the policy but never called: {unused:?}"
        );
    }

    #[test]
    fn the_shipped_policy_grants_exactly_what_the_descriptors_declare() {
        let declared = declared_actions();
        let allowed = policy_actions();
        let missing: Vec<_> = declared.difference(&allowed).collect();
        let extra: Vec<_> = allowed.difference(&declared).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "deploy/iam/sweeper-policy.json differs from the descriptors' IAM actions \
             (+ phases::PASS_IAM_ACTIONS):\n  declared, not in the policy: {missing:?}\n  \
             in the policy, declared by none: {extra:?}"
        );
        // And what they declare is what the source calls (the snapshot's tag-on-create is part
        // of CreateSnapshot's request, not a call of its own).
        let mut called = called_in_source(&root().join("services/src"));
        called.insert("ec2:CreateTags".to_string());
        let undeclared: Vec<_> = called.difference(&declared).collect();
        let uncalled: Vec<_> = declared.difference(&called).collect();
        assert!(
            undeclared.is_empty() && uncalled.is_empty(),
            "called, declared by no descriptor: {undeclared:?}; declared, never called: {uncalled:?}"
        );
    }

    /// The union being right is not enough: each cleaner's own files call only what its
    /// descriptor declares (what it calls through shared locating helpers is declared too, but
    /// only the union test sees it).
    #[test]
    fn each_cleaner_declares_what_its_own_files_call() {
        use crate::cleaners::{self as c, Cleaner, Descriptor};
        let rows: Vec<(&[&str], Vec<&'static Descriptor>)> = vec![
            (
                &["instances.rs"],
                vec![
                    c::instances::Instances::CAPA_OWNED.descriptor(),
                    c::instances::Instances::TAGGED.descriptor(),
                ],
            ),
            (
                &["load_balancers.rs"],
                vec![
                    c::load_balancers::LoadBalancers::CAPA_OWNED.descriptor(),
                    c::load_balancers::LoadBalancers::TAGGED.descriptor(),
                ],
            ),
            (
                &[
                    "security_groups/mod.rs",
                    "security_groups/refs.rs",
                    "security_groups/revoke.rs",
                ],
                vec![
                    c::security_groups::SecurityGroups::CAPA_OWNED.descriptor(),
                    c::security_groups::SecurityGroups::TAGGED.descriptor(),
                ],
            ),
            (
                &[
                    "security_groups/eks.rs",
                    "security_groups/refs.rs",
                    "security_groups/revoke.rs",
                ],
                vec![&c::security_groups::eks::DESCRIPTOR],
            ),
            (
                &[
                    "dns_records/mod.rs",
                    "dns_records/route53.rs",
                    "dns_records/lbs.rs",
                ],
                vec![&c::dns_records::DESCRIPTOR],
            ),
            (
                &["target_groups.rs"],
                vec![
                    &c::target_groups::CAPA_DESCRIPTOR,
                    &c::target_groups::DESCRIPTOR,
                ],
            ),
            (
                &["launch_templates.rs"],
                vec![&c::launch_templates::DESCRIPTOR],
            ),
            (
                &["instance_profiles.rs"],
                vec![&c::instance_profiles::DESCRIPTOR],
            ),
            (&["oidc_providers.rs"], vec![&c::oidc_providers::DESCRIPTOR]),
            (&["log_groups.rs"], vec![&c::log_groups::DESCRIPTOR]),
            (&["instance_state.rs"], vec![&c::instance_state::DESCRIPTOR]),
            (
                &["bootstrap_data/secrets.rs"],
                vec![&c::bootstrap_data::SECRETS],
            ),
            (
                &["bootstrap_data/parameters.rs"],
                vec![&c::bootstrap_data::PARAMETERS],
            ),
            (
                &["bootstrap_data/objects.rs"],
                vec![&c::bootstrap_data::OBJECTS],
            ),
            (
                &["bootstrap_data/bucket.rs"],
                vec![&c::bootstrap_data::BUCKET],
            ),
            (&["volumes.rs"], vec![&c::volumes::DESCRIPTOR]),
            (&["snapshots.rs"], vec![&c::snapshots::DESCRIPTOR]),
            (
                &["network_interfaces.rs"],
                vec![&c::network_interfaces::DESCRIPTOR],
            ),
            (&["vpc_endpoints.rs"], vec![&c::vpc_endpoints::DESCRIPTOR]),
            (&["nat_gateways.rs"], vec![&c::nat_gateways::DESCRIPTOR]),
            (&["addresses.rs"], vec![&c::addresses::DESCRIPTOR]),
            (
                &["internet_gateways.rs"],
                vec![&c::internet_gateways::DESCRIPTOR],
            ),
            (&["route_tables.rs"], vec![&c::route_tables::DESCRIPTOR]),
            (&["subnets.rs"], vec![&c::subnets::DESCRIPTOR]),
            (&["vpcs.rs"], vec![&c::vpcs::DESCRIPTOR]),
            // Phase 3's gate: only the pass's lookups (below), checked as vpcs.rs's were.
            (&["vpc_blockers.rs"], vec![&c::vpcs::DESCRIPTOR]),
            (&["shared_tags.rs"], vec![&c::shared_tags::DESCRIPTOR]),
            (
                &["guardduty.rs"],
                vec![&c::guardduty::ENDPOINT, &c::guardduty::GROUP],
            ),
        ];
        let dir = root().join("services/src/cleaners");
        let mut covered = BTreeSet::new();
        for (files, descriptors) in &rows {
            for file in *files {
                covered.insert(file.to_string());
                let mut called = called_in_file(&dir.join(file));
                if *file == "vpcs.rs" || *file == "vpc_blockers.rs" {
                    // They hold the pass's VPC lookups (`capa_vpcs`, `blockers`).
                    called.retain(|a| !crate::phases::PASS_IAM_ACTIONS.contains(&a.as_str()));
                }
                for d in descriptors {
                    let undeclared: Vec<_> = called
                        .iter()
                        .filter(|a| !d.iam_actions.contains(&a.as_str()))
                        .collect();
                    assert!(
                        undeclared.is_empty(),
                        "{file} calls what the {:?} {} descriptor does not declare: {undeclared:?}",
                        d.phase,
                        d.kind
                    );
                }
            }
        }
        // A new cleaner file making calls must get a row.
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    stack.push(p);
                } else if !called_in_file(&p).is_empty() {
                    let rel = p.strip_prefix(&dir).unwrap_or(&p).display().to_string();
                    assert!(
                        covered.contains(&rel),
                        "{rel} makes calls but has no row here"
                    );
                }
            }
        }
    }

    #[test]
    fn every_action_is_named_as_iam_spells_it() {
        for d in crate::phases::registry::descriptors() {
            for a in d.iam_actions {
                let (service, op) = a.split_once(':').unwrap_or_default();
                assert!(
                    !service.is_empty()
                        && op.starts_with(|c: char| c.is_ascii_uppercase())
                        && !op.contains(['.', ' ', '*']),
                    "{} {}: {a:?}",
                    d.service,
                    d.kind
                );
            }
        }
    }

    #[test]
    fn operation_names_map_to_iam_actions() {
        assert_eq!(iam_action("ec2.DescribeVpcs").unwrap(), "ec2:DescribeVpcs");
        assert_eq!(
            iam_action("ElasticLoadBalancingv2.DeleteLoadBalancer").unwrap(),
            "elasticloadbalancing:DeleteLoadBalancer"
        );
        assert_eq!(
            iam_action("ResourceGroupsTaggingAPI.GetResources").unwrap(),
            "tag:GetResources"
        );
        assert_eq!(iam_action("s3.ListObjectsV2").unwrap(), "s3:ListBucket");
        assert_eq!(
            iam_action("S3.GetBucketTagging").unwrap(),
            "s3:GetBucketTagging"
        );
        assert_eq!(iam_action("nothing"), None);
    }
}
