//! Phase 2 (task `instance-state-queue`): CAPA's EventBridgeInstanceState pair, the SQS queue
//! `<cluster>-queue` and the EventBridge rule `<cluster>-ec2-rule` that targets it, which
//! AWSManagedControlPlane's delete path never removes (see `policy::instance_state`, which says
//! what CAPA creates, quoting its code, and the rule: both exist, the rule targets only that
//! queue, the queue's policy is only CAPA's statement `CAPAEvents_<rule>_<queue>` naming that
//! rule). Neither is tagged: they are found by name, with four reads (DescribeRule,
//! ListTargetsByRule, GetQueueUrl, GetQueueAttributes), never by a listing.
//!
//! Both are this kind's targets, the rule's ARN and the queue's. When the rule holds, the rule's
//! target is removed and the rule deleted (CAPA's own order, `DeleteEC2Events`), then the queue;
//! a rule that is not deleted leaves the queue for the next pass. When it does not hold, both
//! are reported (`kept`, with the reason: `gc plan`, the audit), never touched.

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::{ErrorClass, call};
use crate::locate::describe;
use crate::model::{Failure, GcTask, Phase};
use crate::policy::Verdict;
use crate::policy::instance_state::{self as policy, QueueFacts, RuleFacts};
use async_trait::async_trait;

/// Selects CAPA's EventBridgeInstanceState queue and rule (on by default).
pub const TASK: GcTask = GcTask::new("instance-state-queue");

pub struct InstanceStateQueue;

const KIND: &str = "instance-state-queue";

/// Nothing in AWS depends on them (order 30). The descriptor's service is the queue's; the rule
/// is reported beside it with its own (`events`) ARN.
pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &[
        "events:DescribeRule",
        "events:ListTargetsByRule",
        "sqs:GetQueueUrl",
        "sqs:GetQueueAttributes",
        "events:RemoveTargets",
        "events:DeleteRule",
        "sqs:DeleteQueue",
    ],
    ..Descriptor::new("sqs", KIND, Phase::Tagged, 30)
};

/// One of the pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PairMember {
    /// The rule's name and its target's id (the queue's name).
    Rule { name: String, target_id: String },
    /// The queue's URL.
    Queue { url: String },
}

/// The rule as DescribeRule and ListTargetsByRule give it; `None` when there is none.
async fn rule(ctx: &CleanCtx<'_>, name: &str) -> Result<Option<RuleFacts>, CleanError> {
    let described = call("events.DescribeRule", || {
        ctx.clients.events.describe_rule().name(name).send()
    })
    .await;
    let described = match described {
        Ok(d) => d,
        Err(f) if f.class == ErrorClass::NotFound => return Ok(None),
        Err(f) => return Err(CleanError::discover(KIND, "DescribeRule")(f)),
    };
    let targets = describe::all_pages(|token| async move {
        let page = call("events.ListTargetsByRule", || {
            ctx.clients
                .events
                .list_targets_by_rule()
                .rule(name)
                .set_next_token(token.clone())
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "ListTargetsByRule"))?;
        let targets = page
            .targets()
            .iter()
            .map(|t| (t.id().to_string(), t.arn().to_string()))
            .collect();
        Ok((targets, page.next_token().map(str::to_string)))
    })
    .await?;
    let facts = RuleFacts {
        name: described.name().unwrap_or(name).to_string(),
        arn: described.arn().unwrap_or_default().to_string(),
        targets,
    };
    Ok(Some(facts))
}

/// The queue as GetQueueUrl and GetQueueAttributes give it; `None` when there is none.
async fn queue(ctx: &CleanCtx<'_>, name: &str) -> Result<Option<QueueFacts>, CleanError> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let url = call("sqs.GetQueueUrl", || {
        ctx.clients.sqs.get_queue_url().queue_name(name).send()
    })
    .await;
    let url = match url {
        Ok(u) => u.queue_url().unwrap_or_default().to_string(),
        Err(f) if f.class == ErrorClass::NotFound => return Ok(None),
        Err(f) => return Err(CleanError::discover(KIND, "GetQueueUrl")(f)),
    };
    let attrs = call("sqs.GetQueueAttributes", || {
        ctx.clients
            .sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(A::QueueArn)
            .attribute_names(A::Policy)
            .send()
    })
    .await;
    let attrs = match attrs {
        Ok(a) => a,
        Err(f) if f.class == ErrorClass::NotFound => return Ok(None),
        Err(f) => return Err(CleanError::discover(KIND, "GetQueueAttributes")(f)),
    };
    let get = |a: A| attrs.attributes().and_then(|m| m.get(&a)).cloned();
    Ok(Some(QueueFacts {
        name: name.to_string(),
        arn: get(A::QueueArn).unwrap_or_default(),
        policy: get(A::Policy),
        url,
    }))
}

#[async_trait]
impl Cleaner for InstanceStateQueue {
    type Detail = PairMember;

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<PairMember>>, CleanError> {
        let (rule_name, queue_name) = (
            policy::rule_name(ctx.capa_cluster),
            policy::queue_name(ctx.capa_cluster),
        );
        let r = rule(ctx, &rule_name).await?;
        let q = queue(ctx, &queue_name).await?;
        let verdict = policy::decide(r.as_ref(), q.as_ref(), ctx.capa_cluster);
        let mut out = Vec::new();
        if let Some(r) = r {
            let id = if r.arn.is_empty() { r.name } else { r.arn };
            out.push(Target::new(
                id,
                PairMember::Rule {
                    name: rule_name,
                    target_id: queue_name.clone(),
                },
            ));
        }
        if let Some(q) = q {
            let id = if q.arn.is_empty() {
                q.url.clone()
            } else {
                q.arn
            };
            out.push(Target::new(id, PairMember::Queue { url: q.url }));
        }
        Ok(match verdict {
            Verdict::Delete => out,
            Verdict::Keep(why) => {
                tracing::info!(%why, "CAPA's instance-state queue or rule does not hold: reported, kept");
                out.into_iter().map(|t| t.kept(why.clone())).collect()
            }
            // Nothing found; the rule has no other outcome.
            _ => Vec::new(),
        })
    }

    /// The rule first (its target removed, then the rule), then the queue, only once the rule
    /// is gone: in one pass, in the targets' order.
    async fn delete_together(
        &self,
        ctx: &CleanCtx<'_>,
        targets: &[Target<PairMember>],
    ) -> Option<Vec<Result<Outcome, CleanError>>> {
        let mut rule_gone = !targets
            .iter()
            .any(|t| matches!(t.detail, PairMember::Rule { .. }));
        let mut rule_outcome = None;
        if let Some(t) = targets
            .iter()
            .find(|t| matches!(t.detail, PairMember::Rule { .. }))
        {
            let o = self.delete(ctx, t).await;
            rule_gone = matches!(o, Ok(Outcome::Deleted | Outcome::Gone));
            rule_outcome = Some(o);
        }
        let mut out = Vec::with_capacity(targets.len());
        for t in targets {
            match t.detail {
                PairMember::Rule { .. } => {
                    out.push(rule_outcome.take().unwrap_or(Ok(Outcome::Gone)))
                }
                PairMember::Queue { .. } if rule_gone => out.push(self.delete(ctx, t).await),
                PairMember::Queue { .. } => out.push(Ok(Outcome::Remaining(Failure::waiting(
                    "waits until its rule is deleted",
                )))),
            }
        }
        Some(out)
    }

    async fn delete(
        &self,
        ctx: &CleanCtx<'_>,
        t: &Target<PairMember>,
    ) -> Result<Outcome, CleanError> {
        match &t.detail {
            PairMember::Rule { name, target_id } => {
                let removed = call("events.RemoveTargets", || {
                    ctx.clients
                        .events
                        .remove_targets()
                        .rule(name)
                        .ids(target_id)
                        .send()
                })
                .await;
                if let Ok(r) = &removed
                    && r.failed_entry_count() > 0
                {
                    let why = r
                        .failed_entries()
                        .iter()
                        .map(|e| format!("{:?}: {:?}", e.error_code(), e.error_message()))
                        .collect::<Vec<_>>()
                        .join("; ");
                    return Ok(Outcome::Remaining(Failure::new(
                        crate::model::FailureKind::Other,
                        format!("RemoveTargets: {why}"),
                    )));
                }
                match settle(removed, KIND, &t.id, "RemoveTargets")? {
                    Outcome::Deleted => {}
                    Outcome::Gone => return Ok(Outcome::Gone),
                    other => return Ok(other),
                }
                let res = call("events.DeleteRule", || {
                    ctx.clients.events.delete_rule().name(name).send()
                })
                .await;
                settle(res, KIND, &t.id, "DeleteRule")
            }
            PairMember::Queue { url } => {
                let res = call("sqs.DeleteQueue", || {
                    ctx.clients.sqs.delete_queue().queue_url(url).send()
                })
                .await;
                settle(res, KIND, &t.id, "DeleteQueue")
            }
        }
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, assert_calls, code, mock};
    use aws_sdk_eventbridge::Client as Events;
    use aws_sdk_eventbridge::operation::delete_rule::DeleteRuleOutput;
    use aws_sdk_eventbridge::operation::describe_rule::{DescribeRuleError, DescribeRuleOutput};
    use aws_sdk_eventbridge::operation::list_targets_by_rule::ListTargetsByRuleOutput;
    use aws_sdk_eventbridge::operation::remove_targets::RemoveTargetsOutput;
    use aws_sdk_eventbridge::types::Target as EventTarget;
    use aws_sdk_sqs::Client as Sqs;
    use aws_sdk_sqs::operation::delete_queue::DeleteQueueOutput;
    use aws_sdk_sqs::operation::get_queue_attributes::GetQueueAttributesOutput;
    use aws_sdk_sqs::operation::get_queue_url::{GetQueueUrlError, GetQueueUrlOutput};
    use aws_sdk_sqs::types::QueueAttributeName as A;

    const Q_ARN: &str = "arn:aws:sqs:us-east-1:000000000000:c1-queue";
    const Q_URL: &str = "https://sqs.us-east-1.amazonaws.com/000000000000/c1-queue";
    const R_ARN: &str = "arn:aws:events:us-east-1:000000000000:rule/c1-ec2-rule";

    fn reads(policy: String) -> [mocked::Rule; 4] {
        [
            mock!(Events::describe_rule)
                .match_requests(|r| r.name() == Some("c1-ec2-rule"))
                .then_output(|| {
                    DescribeRuleOutput::builder()
                        .name("c1-ec2-rule")
                        .arn(R_ARN)
                        .build()
                }),
            mock!(Events::list_targets_by_rule)
                .match_requests(|r| r.rule() == Some("c1-ec2-rule"))
                .then_output(|| {
                    ListTargetsByRuleOutput::builder()
                        .targets(
                            EventTarget::builder()
                                .id("c1-queue")
                                .arn(Q_ARN)
                                .build()
                                .unwrap(),
                        )
                        .build()
                }),
            mock!(Sqs::get_queue_url)
                .match_requests(|r| r.queue_name() == Some("c1-queue"))
                .then_output(|| GetQueueUrlOutput::builder().queue_url(Q_URL).build()),
            mock!(Sqs::get_queue_attributes)
                .match_requests(|r| {
                    r.queue_url() == Some(Q_URL) && r.attribute_names() == [A::QueueArn, A::Policy]
                })
                .then_output(move || {
                    GetQueueAttributesOutput::builder()
                        .attributes(A::QueueArn, Q_ARN)
                        .attributes(A::Policy, policy.clone())
                        .build()
                }),
        ]
    }

    #[tokio::test]
    async fn capas_pair_goes_rule_first_then_queue() {
        let [describe, targets, url, attrs] = reads(policy::capa_policy("c1", Q_ARN, R_ARN));
        let remove = mock!(Events::remove_targets)
            .match_requests(|r| r.rule() == Some("c1-ec2-rule") && r.ids() == ["c1-queue"])
            .then_output(|| RemoveTargetsOutput::builder().failed_entry_count(0).build());
        let delete_rule = mock!(Events::delete_rule)
            .match_requests(|r| r.name() == Some("c1-ec2-rule"))
            .then_output(|| DeleteRuleOutput::builder().build());
        let delete_queue = mock!(Sqs::delete_queue)
            .match_requests(|r| r.queue_url() == Some(Q_URL))
            .then_output(|| DeleteQueueOutput::builder().build());
        let c = mocked::in_order(&[
            &describe,
            &targets,
            &url,
            &attrs,
            &remove,
            &delete_rule,
            &delete_queue,
        ]);
        let inv = Inventory::default();
        let cx = ctx(&c, &inv);
        let found = InstanceStateQueue.discover(&cx).await.unwrap();
        assert_eq!(
            found.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            [R_ARN, Q_ARN]
        );
        assert!(found.iter().all(|t| t.kept.is_none()));
        let outcomes = InstanceStateQueue
            .delete_together(&cx, &found)
            .await
            .unwrap();
        assert_eq!(
            outcomes.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
            [Outcome::Deleted, Outcome::Deleted]
        );
        assert_calls(&delete_rule, 1, "DeleteRule");
        assert_calls(&delete_queue, 1, "DeleteQueue");
    }

    #[tokio::test]
    async fn a_queue_without_capas_statement_is_reported_and_nothing_deleted() {
        let other = policy::capa_policy("c1", Q_ARN, R_ARN).replace("CAPAEvents_", "Mine_");
        let [describe, targets, url, attrs] = reads(other);
        // No delete rule: a delete call would panic.
        let c = mocked::in_order(&[&describe, &targets, &url, &attrs]);
        let inv = Inventory::default();
        let found = InstanceStateQueue.discover(&ctx(&c, &inv)).await.unwrap();
        assert_eq!(found.len(), 2);
        assert!(
            found
                .iter()
                .all(|t| t.kept.as_deref().is_some_and(|w| w.contains("CAPAEvents_"))),
            "{found:?}"
        );
    }

    #[tokio::test]
    async fn neither_there_nothing_found() {
        let describe = mock!(Events::describe_rule)
            .then_error(|| DescribeRuleError::generic(code("ResourceNotFoundException")));
        let url = mock!(Sqs::get_queue_url).then_error(|| {
            GetQueueUrlError::generic(code("AWS.SimpleQueueService.NonExistentQueue"))
        });
        let c = mocked::in_order(&[&describe, &url]);
        let inv = Inventory::default();
        assert!(
            InstanceStateQueue
                .discover(&ctx(&c, &inv))
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_rule_left_keeps_its_queue() {
        let remove = mock!(Events::remove_targets).then_error(|| {
            aws_sdk_eventbridge::operation::remove_targets::RemoveTargetsError::generic(code(
                "ConcurrentModificationException",
            ))
        });
        let c = mocked::clients(mocked::RuleMode::MatchAny, &[&remove]);
        let inv = Inventory::default();
        let cx = ctx(&c, &inv);
        let pair = [
            Target::new(
                R_ARN,
                PairMember::Rule {
                    name: "c1-ec2-rule".into(),
                    target_id: "c1-queue".into(),
                },
            ),
            Target::new(Q_ARN, PairMember::Queue { url: Q_URL.into() }),
        ];
        let outcomes = InstanceStateQueue
            .delete_together(&cx, &pair)
            .await
            .unwrap();
        assert!(
            outcomes.iter().all(|o| !matches!(o, Ok(Outcome::Deleted))),
            "{outcomes:?}"
        );
        assert!(matches!(outcomes[1], Ok(Outcome::Remaining(_))));
    }
}
