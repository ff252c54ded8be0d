//! CAPA's EventBridgeInstanceState queue and rule (phase 2, task `instance-state-queue`). With the
//! feature gate `EventBridgeInstanceState`, CAPA creates, for Cluster API Cluster `N`
//! (`scope.Name()`, the Cluster's name, on EKS too):
//! - an SQS queue `N-queue` (`.` in `N` replaced by `-`: `GenerateQueueName`, in CAPA's
//!   `pkg/cloud/services/instancestate/queue.go`), untagged, whose policy is one statement with
//!   `Sid` `CAPAEvents_<rule>_<queue>` allowing `events.amazonaws.com` to `sqs:SendMessage` to it
//!   on condition `ArnEquals aws:SourceArn <the rule's ARN>` (`createPolicyForRule`, same file);
//! - an EventBridge rule `N-ec2-rule` on the default bus, untagged, whose one target has the
//!   queue's name as id and its ARN (`reconcileRules`, `getEC2RuleName`, in `rule.go`).
//!
//! Only AWSCluster's delete path removes them (`DeleteEC2Events`, called from
//! `controllers/awscluster_controller.go`); AWSManagedControlPlane's never does, so an EKS
//! cluster leaves both. Neither carries a tag, so nothing but their names and how they point at
//! each other says whose they are. The pair is deleted ([`decide`]: Delete) only when every one
//! of these holds, else both are reported, never touched (Keep):
//! - both exist, named exactly the cluster's ([`queue_name`], [`rule_name`]);
//! - the rule has exactly one target: id the queue's name, ARN the queue's ARN (another target
//!   means someone else uses the rule);
//! - the queue's policy holds exactly CAPA's statement: its `Sid`, and its `aws:SourceArn`
//!   naming the rule's ARN (another statement means someone else uses the queue).
//!
//! One rule decides for the pair because each one's proof is the other: the rule goes first (its
//! target removed, then the rule, as CAPA does), then the queue. A pass that deleted the rule and
//! failed on the queue leaves a queue whose proof is gone: it is reported from then on, to be
//! deleted by hand (`gc plan` and the audit name it).

use super::Verdict;

/// CAPA's queue name for Cluster API Cluster `capa_cluster` (`GenerateQueueName`).
pub fn queue_name(capa_cluster: &str) -> String {
    format!("{}-queue", capa_cluster.replace('.', "-"))
}

/// CAPA's rule name for Cluster API Cluster `capa_cluster` (`getEC2RuleName`: not adjusted).
pub fn rule_name(capa_cluster: &str) -> String {
    format!("{capa_cluster}-ec2-rule")
}

/// The `Sid` of CAPA's statement in the queue's policy (`createPolicyForRule`).
pub fn statement_sid(capa_cluster: &str) -> String {
    format!(
        "CAPAEvents_{}_{}",
        rule_name(capa_cluster),
        queue_name(capa_cluster)
    )
}

/// What DescribeRule and ListTargetsByRule say of the rule.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleFacts {
    pub name: String,
    pub arn: String,
    /// (id, ARN) of every target.
    pub targets: Vec<(String, String)>,
}

/// What GetQueueUrl and GetQueueAttributes say of the queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueFacts {
    pub name: String,
    pub url: String,
    pub arn: String,
    /// The `Policy` attribute, as JSON text (`None`: the queue has no policy).
    pub policy: Option<String>,
}

/// Whether the rule and the queue (whichever exist) are CAPA's pair for `capa_cluster`: Delete
/// both, or Keep both with the reason (see the module doc). `Foreign` when neither exists.
pub fn decide(rule: Option<&RuleFacts>, queue: Option<&QueueFacts>, capa_cluster: &str) -> Verdict {
    let (rule_n, queue_n) = (rule_name(capa_cluster), queue_name(capa_cluster));
    let (rule, queue) = match (rule, queue) {
        (None, None) => return Verdict::foreign("neither the rule nor the queue exists"),
        (Some(_), None) => {
            return Verdict::keep(format!(
                "rule {rule_n} without its queue {queue_n}: nothing proves it is CAPA's"
            ));
        }
        (None, Some(_)) => {
            return Verdict::keep(format!(
                "queue {queue_n} without its rule {rule_n}: nothing proves it is CAPA's"
            ));
        }
        (Some(r), Some(q)) => (r, q),
    };
    if rule.name != rule_n || queue.name != queue_n {
        return Verdict::foreign("not the cluster's names");
    }
    match rule.targets.as_slice() {
        [(id, arn)] if *id == queue_n && *arn == queue.arn => {}
        [] => return Verdict::keep(format!("rule {rule_n} has no target: not CAPA's pair")),
        [_] => {
            return Verdict::keep(format!(
                "rule {rule_n} targets something else than queue {queue_n}"
            ));
        }
        _ => {
            return Verdict::keep(format!(
                "rule {rule_n} has targets besides queue {queue_n}: someone else uses it"
            ));
        }
    }
    let Some(policy) = queue.policy.as_deref() else {
        return Verdict::keep(format!(
            "queue {queue_n} has no policy: CAPA's statement is missing"
        ));
    };
    match capa_statement(&queue_n, policy, &statement_sid(capa_cluster), &rule.arn) {
        Ok(()) => Verdict::Delete,
        Err(why) => Verdict::keep(why.to_string()),
    }
}

/// Why a queue's policy is not the one CAPA writes for the pair; each names the queue (its
/// Display is the reason the verdict keeps it with).
#[derive(Debug, thiserror::Error)]
pub enum QueuePolicyMismatch {
    #[error("queue {queue}: its policy is not JSON: {error}")]
    NotJson {
        queue: String,
        error: serde_json::Error,
    },
    #[error("queue {queue}: its policy has no statement")]
    NoStatement { queue: String },
    #[error(
        "queue {queue}: its policy has {count} statements, CAPA writes one: someone else uses it"
    )]
    NotOneStatement { queue: String, count: usize },
    #[error("queue {queue}: its policy lacks CAPA's statement {sid}")]
    NoCapaStatement { queue: String, sid: String },
    #[error("queue {queue}: CAPA's statement names source {named:?}, not the rule {rule}")]
    OtherSource {
        queue: String,
        named: Option<String>,
        rule: String,
    },
}

/// Whether `policy` (of the queue named `queue`) holds exactly one statement, CAPA's: `sid`,
/// allowing events to send from the rule `rule_arn` (`aws:SourceArn`).
fn capa_statement(
    queue: &str,
    policy: &str,
    sid: &str,
    rule_arn: &str,
) -> Result<(), QueuePolicyMismatch> {
    use QueuePolicyMismatch as E;
    let queue = || queue.to_string();
    let doc: serde_json::Value = serde_json::from_str(policy).map_err(|error| E::NotJson {
        queue: queue(),
        error,
    })?;
    let statements = match doc.get("Statement") {
        Some(serde_json::Value::Array(a)) => a.clone(),
        Some(one @ serde_json::Value::Object(_)) => vec![one.clone()],
        _ => return Err(E::NoStatement { queue: queue() }),
    };
    let [st] = statements.as_slice() else {
        return Err(E::NotOneStatement {
            queue: queue(),
            count: statements.len(),
        });
    };
    if st.get("Sid").and_then(|s| s.as_str()) != Some(sid) {
        return Err(E::NoCapaStatement {
            queue: queue(),
            sid: sid.to_string(),
        });
    }
    let source = st
        .pointer("/Condition/ArnEquals/aws:SourceArn")
        .and_then(|s| s.as_str());
    if source != Some(rule_arn) {
        return Err(E::OtherSource {
            queue: queue(),
            named: source.map(str::to_string),
            rule: rule_arn.to_string(),
        });
    }
    Ok(())
}

/// The policy CAPA writes for the pair (`createPolicyForRule`), for tests and fixtures.
pub fn capa_policy(capa_cluster: &str, queue_arn: &str, rule_arn: &str) -> String {
    serde_json::json!({
        "Version": "2012-10-17",
        "Id": queue_arn,
        "Statement": [{
            "Sid": statement_sid(capa_cluster),
            "Effect": "Allow",
            "Principal": {"Service": ["events.amazonaws.com"]},
            "Action": ["sqs:SendMessage"],
            "Resource": [queue_arn],
            "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
        }],
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    const Q_ARN: &str = "arn:aws:sqs:us-east-1:000000000000:c1-queue";
    const R_ARN: &str = "arn:aws:events:us-east-1:000000000000:rule/c1-ec2-rule";

    fn rule(targets: &[(&str, &str)]) -> RuleFacts {
        RuleFacts {
            name: "c1-ec2-rule".into(),
            arn: R_ARN.into(),
            targets: targets
                .iter()
                .map(|(i, a)| (i.to_string(), a.to_string()))
                .collect(),
        }
    }

    fn queue(policy: Option<String>) -> QueueFacts {
        QueueFacts {
            name: "c1-queue".into(),
            url: "http://q/c1-queue".into(),
            arn: Q_ARN.into(),
            policy,
        }
    }

    #[test]
    fn names_are_capas() {
        assert_eq!(queue_name("a.b"), "a-b-queue");
        assert_eq!(rule_name("a.b"), "a.b-ec2-rule");
        assert_eq!(statement_sid("c1"), "CAPAEvents_c1-ec2-rule_c1-queue");
    }

    #[test]
    fn only_capas_pair_is_deleted() {
        let capa = || Some(capa_policy("c1", Q_ARN, R_ARN));
        let ours = rule(&[("c1-queue", Q_ARN)]);
        let other_sid = capa_policy("c2", Q_ARN, R_ARN);
        let other_source = capa_policy("c1", Q_ARN, "arn:aws:events:us-east-1:0:rule/x");
        let mut two: serde_json::Value = serde_json::from_str(&capa().unwrap()).unwrap();
        let st = two["Statement"][0].clone();
        two["Statement"].as_array_mut().unwrap().push(st);
        let one_object = {
            let mut v: serde_json::Value = serde_json::from_str(&capa().unwrap()).unwrap();
            v["Statement"] = v["Statement"][0].clone();
            v.to_string()
        };
        let other_queue = rule(&[("c1-queue", "arn:aws:sqs:us-east-1:000000000000:other")]);
        let extra = rule(&[("c1-queue", Q_ARN), ("mine", "arn:aws:lambda:x")]);
        let mut renamed = ours.clone();
        renamed.name = "c2-ec2-rule".into();
        let d = |r: Option<&RuleFacts>, q: Option<QueueFacts>| decide(r, q.as_ref(), "c1");
        let queue = |p: Option<String>| Some(queue(p));
        table::check(&[
            (d(Some(&ours), queue(capa())), Delete, "CAPA's pair"),
            (
                d(Some(&ours), queue(Some(one_object))),
                Delete,
                "a single statement as an object",
            ),
            (d(None, None), Foreign, "nothing there"),
            (d(Some(&ours), None), Keep, "the rule alone"),
            (d(None, queue(capa())), Keep, "the queue alone"),
            (d(Some(&ours), queue(None)), Keep, "a queue without policy"),
            (
                d(Some(&ours), queue(Some(other_sid))),
                Keep,
                "a queue without CAPA's Sid",
            ),
            (
                d(Some(&ours), queue(Some(other_source))),
                Keep,
                "CAPA's Sid for another rule",
            ),
            (
                d(Some(&ours), queue(Some(two.to_string()))),
                Keep,
                "a statement besides CAPA's",
            ),
            (
                d(Some(&ours), queue(Some("not json".into()))),
                Keep,
                "a policy that does not parse",
            ),
            (
                d(Some(&rule(&[])), queue(capa())),
                Keep,
                "a rule without target",
            ),
            (
                d(Some(&other_queue), queue(capa())),
                Keep,
                "a rule targeting another queue",
            ),
            (
                d(Some(&extra), queue(capa())),
                Keep,
                "a rule with another target",
            ),
            (
                d(Some(&renamed), queue(capa())),
                Foreign,
                "another cluster's rule",
            ),
        ]);
    }
}
