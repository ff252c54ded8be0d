//! How narrowly deploy/iam/sweeper-policy.json grants what it grants (iam.rs checks *which*
//! actions): each opt-in task's writes in statements of its own, Route 53 changes only deletes,
//! log-group deletes only EKS's, and every write left on `Resource: "*"` without a condition named
//! here with the reason IAM cannot say more.

use super::iam::policy_actions;
use crate::phases::registry::{OPT_IN, descriptors};
use serde_json::Value;
use std::collections::BTreeSet;

fn statements() -> Vec<Value> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/iam/sweeper-policy.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["Statement"].as_array().unwrap().clone()
}

fn list(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect(),
        _ => vec![],
    }
}

fn grants(st: &Value, action: &str) -> bool {
    list(&st["Action"]).iter().any(|a| a == action)
}

fn read_only(action: &str) -> bool {
    let op = action.split_once(':').map_or(action, |(_, o)| o);
    ["Describe", "List", "Get"]
        .iter()
        .any(|p| op.starts_with(p))
}

/// `ebs-volume` -> `OptInEbsVolume`.
fn sid_of(task: &str) -> String {
    let camel: String = task
        .split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect();
    format!("OptIn{camel}")
}

/// Writes left on every resource with no condition, each because IAM cannot narrow it further:
/// whose resource it is, sweeper decides by tags whose key names the cluster
/// (`kubernetes.io/cluster/<name>`, `sigs.k8s.io/cluster-api-provider-aws/cluster/<name>`), and
/// `aws:ResourceTag/<key>` takes no wildcard in the key; no fixed tag is common to everything a
/// cluster leaves (the AWS Load Balancer Controller's, the cloud provider's, CAPA's and
/// Karpenter's each tag their own way). Scoping them by resource type ARN alone narrows nothing
/// the action does not already imply.
const UNSCOPED_WRITES: [&str; 18] = [
    "ec2:DeleteInternetGateway",
    "ec2:DeleteLaunchTemplate",
    "ec2:DeleteNatGateway",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteRouteTable",
    "ec2:DeleteSecurityGroup",
    "ec2:DeleteSubnet",
    "ec2:DeleteVpc",
    "ec2:DeleteVpcEndpoints",
    "ec2:DetachInternetGateway",
    "ec2:DisassociateAddress",
    "ec2:DisassociateRouteTable",
    "ec2:ReleaseAddress",
    "ec2:RevokeSecurityGroupEgress",
    "ec2:RevokeSecurityGroupIngress",
    "ec2:TerminateInstances",
    "elasticloadbalancing:DeleteLoadBalancer",
    "elasticloadbalancing:DeleteTargetGroup",
];

#[test]
fn each_opt_in_task_writes_only_through_statements_of_its_own() {
    let sts = statements();
    for task in OPT_IN {
        let sid = sid_of(task.name());
        let others: BTreeSet<&str> = descriptors()
            .iter()
            .filter(|d| d.task != Some(task))
            .flat_map(|d| d.iam_actions.iter().copied())
            .chain(crate::phases::PASS_IAM_ACTIONS.iter().copied())
            .collect();
        let own: BTreeSet<String> = descriptors()
            .iter()
            .filter(|d| d.task == Some(task))
            .flat_map(|d| d.iam_actions.iter())
            .filter(|a| !read_only(a) && !others.contains(*a))
            .map(|a| a.to_string())
            .collect();
        assert!(
            !own.is_empty(),
            "{task}: an opt-in task that writes nothing?"
        );
        let (mine, rest): (Vec<&Value>, Vec<&Value>) = sts
            .iter()
            .partition(|st| st["Sid"].as_str().is_some_and(|s| s.starts_with(&sid)));
        let granted: BTreeSet<String> = mine.iter().flat_map(|st| list(&st["Action"])).collect();
        assert_eq!(
            granted, own,
            "{task}: statements {sid}* grant exactly its writes"
        );
        for a in &own {
            let elsewhere: Vec<&str> = rest
                .iter()
                .filter(|st| grants(st, a))
                .filter_map(|st| st["Sid"].as_str())
                .collect();
            assert!(
                elsewhere.is_empty(),
                "{a} ({task}) also granted by {elsewhere:?}: leaving {sid}* out would not take it away"
            );
        }
    }
}

#[test]
fn route53_changes_are_deletes_of_the_record_types_sweeper_deletes() {
    let sts = statements();
    let st: Vec<&Value> = sts
        .iter()
        .filter(|st| grants(st, "route53:ChangeResourceRecordSets"))
        .collect();
    assert_eq!(st.len(), 1, "one statement grants record changes");
    let c = &st[0]["Condition"];
    assert_eq!(
        c["ForAllValues:StringEquals"]["route53:ChangeResourceRecordSetsActions"],
        serde_json::json!(["DELETE"])
    );
    assert_eq!(
        c["ForAllValues:StringEquals"]["route53:ChangeResourceRecordSetsRecordTypes"],
        serde_json::json!(["A", "AAAA", "CNAME", "TXT"]),
        "external-dns's records and its TXT ownership records (policy::dns_records)"
    );
    // ForAllValues is true of a request without the key: require it.
    assert_eq!(
        c["Null"]["route53:ChangeResourceRecordSetsActions"],
        "false"
    );
    assert_eq!(st[0]["Resource"], "arn:*:route53:::hostedzone/*");
}

#[test]
fn log_group_deletes_reach_only_the_log_groups_eks_names() {
    let sts = statements();
    for st in sts.iter().filter(|st| grants(st, "logs:DeleteLogGroup")) {
        let resources = list(&st["Resource"]);
        assert!(!resources.is_empty());
        for r in resources {
            assert!(
                r.starts_with("arn:*:logs:*:*:log-group:/aws/eks/") && r.contains("/cluster"),
                "{r}"
            );
        }
    }
}

#[test]
fn every_other_write_is_scoped_by_resource_or_condition_or_named_unscopable() {
    let allowed = policy_actions();
    let mut unscoped = BTreeSet::new();
    for st in statements() {
        let scoped = st["Resource"] != "*" || st.get("Condition").is_some();
        for a in list(&st["Action"]) {
            if !read_only(&a) && !scoped {
                unscoped.insert(a);
            }
        }
    }
    let named: BTreeSet<String> = UNSCOPED_WRITES.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        unscoped, named,
        "writes on every resource without a condition"
    );
    assert!(named.is_subset(&allowed));
    // The scoped ones say how: pinned.
    let by_sid = |sid: &str| statements().into_iter().find(|s| s["Sid"] == sid).unwrap();
    assert_eq!(
        by_sid("EksOidcProviders")["Resource"],
        "arn:*:iam::*:oidc-provider/oidc.eks.*.amazonaws.com/id/*"
    );
    assert_eq!(
        by_sid("KarpenterInstanceProfiles")["Condition"]["Null"]["aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass"],
        "false"
    );
    assert_eq!(
        by_sid("OptInEbsVolume")["Condition"]["Null"]["aws:ResourceTag/CSIVolumeName"],
        "false"
    );
    assert_eq!(
        by_sid("OptInEbsSnapshot")["Condition"]["Null"]["aws:ResourceTag/CSIVolumeSnapshotName"],
        "false"
    );
    assert_eq!(
        by_sid("OptInEbsVolumeTagSnapshot")["Condition"]["StringEquals"]["ec2:CreateAction"],
        "CreateSnapshot"
    );
}

#[test]
fn sids_follow_task_names() {
    assert_eq!(sid_of("ebs-volume"), "OptInEbsVolume");
    assert_eq!(sid_of("eks-log-group"), "OptInEksLogGroup");
}
