//! EC2 instances. Phase 1: those carrying the CAPA-owned tag. Phase 2 (task `instance`): those the
//! cluster owns (`kubernetes.io/cluster/<name>=owned`) that CAPA does not, i.e. Karpenter's and
//! other node provisioners' nodes, which hold their network interfaces and security groups.
//! Which are taken, and which wait, is `policy::instances`'s.
//! Termination is asynchronous, so a pass terminates and reports "waiting" until a later pass no
//! longer finds them (terminated instances are not discovered); meanwhile the later cleaners of
//! the phase wait (`gates_later`), so groups are deleted only after the instances are gone. A
//! termination AWS accepted is [`Outcome::Requested`]: audited by the pass that asked for it,
//! since the pass that later finds the instance gone records nothing (a `shutting-down` instance is
//! waited for, never terminated again, so it is audited once).

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, claim_into, settle};
use crate::errors::call;
use crate::locate::describe;
use crate::locate::inventory::Inventory;
use crate::locate::tagging::TaggedResource;
use crate::locate::tags;
use crate::model::{AwsClients, GcTask, Phase};
use crate::policy::{self, Candidate, Ownership};
use async_trait::async_trait;

/// Selects phase 2's instances (nodes not CAPA's).
pub const TASK: GcTask = GcTask::new("instance");

/// One executor for two phases, its descriptor saying which: [`Instances::CAPA_OWNED`] or
/// [`Instances::TAGGED`].
pub struct Instances(&'static Descriptor);

const IAM_ACTIONS: &[&str] = &["ec2:DescribeInstances", "ec2:TerminateInstances"];

impl Instances {
    /// Phase 1: carrying `sigs.k8s.io/cluster-api-provider-aws/cluster/N=owned`. Groups and
    /// interfaces (later in the phase) cannot go while instances use them: it gates them.
    pub const CAPA_OWNED: Instances = Instances(&Descriptor {
        gates_later: true,
        iam_actions: IAM_ACTIONS,
        ..Descriptor::new("ec2", KIND, Phase::CapaOwned, 10)
    });
    /// Phase 2: the inventory's (the cluster tag, not CAPA's). After the load balancers and
    /// target groups, before interfaces and groups (order 25), which it gates.
    pub const TAGGED: Instances = Instances(&Descriptor {
        task: Some(TASK),
        gates_later: true,
        iam_actions: IAM_ACTIONS,
        ..Descriptor::new("ec2", KIND, Phase::Tagged, 25)
    });

    fn tagged(&self) -> bool {
        self.0.phase == Phase::Tagged
    }
}

const KIND: &str = "instance";
const LIVE_STATES: [&str; 5] = ["pending", "running", "stopping", "stopped", "shutting-down"];

/// EC2 filters take at most 200 values.
const FILTER_CHUNK: usize = 200;

/// Phase 2's instance ids.
#[derive(Debug, Default)]
struct TaggedShare(Vec<String>);

/// A live instance as locating sees it.
pub struct LiveInstance {
    pub id: String,
    pub state: String,
    pub vpc: Option<String>,
    pub tags: Vec<(String, String)>,
    /// The ARN of the IAM instance profile it runs with.
    pub profile: Option<String>,
}

/// Live instances (pending to shutting-down: terminated ones hold nothing) matching `filters`,
/// all pages. Phase 3's blocker check asks the same question.
pub async fn live_instances(
    c: &AwsClients,
    mut filters: Vec<aws_sdk_ec2::types::Filter>,
) -> Result<Vec<LiveInstance>, CleanError> {
    let states: Vec<String> = LIVE_STATES.iter().map(|s| s.to_string()).collect();
    filters.push(tags::ec2_filter("instance-state-name", &states));
    let filters = &filters;
    describe::all_pages(|token| async move {
        let page = call("ec2.DescribeInstances", || {
            c.ec2
                .describe_instances()
                .set_filters(Some(filters.clone()))
                .max_results(1000)
                .set_next_token(token.clone())
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeInstances"))?;
        let seen = page
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(|i| {
                let state = i.state().and_then(|s| s.name()).map(|n| n.as_str());
                Some(LiveInstance {
                    id: i.instance_id()?.to_string(),
                    state: state.unwrap_or_default().to_string(),
                    vpc: i.vpc_id().map(str::to_string),
                    profile: i
                        .iam_instance_profile()
                        .and_then(|p| p.arn())
                        .map(str::to_string),
                    tags: tags::ec2_pairs(i.tags())
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                })
            })
            .collect();
        Ok((seen, page.next_token().map(str::to_string)))
    })
    .await
}

#[async_trait]
impl Cleaner for Instances {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        self.0
    }

    fn claim(&self, r: &TaggedResource, inv: &mut Inventory) -> bool {
        self.tagged()
            && claim_into(r, inv, ("ec2", "instance"), |s: &mut TaggedShare, r| {
                let pairs: Vec<_> = r
                    .tags
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                if !policy::instances::decide_found(&Candidate::tagged(&pairs)).is_delete() {
                    tracing::debug!(arn = %r.arn, "an Auto Scaling group's instance: left to its group");
                } else {
                    s.0.push(r.arn.resource_id().to_string())
                }
            })
    }

    async fn describe_owned(
        &self,
        c: &AwsClients,
        own: &Ownership,
        inv: &mut Inventory,
    ) -> Result<(), CleanError> {
        if !self.tagged() {
            return Ok(());
        }
        let filters = vec![tags::ec2_tag_filter(own.cloud_key(), tags::OWNED)];
        let found: Vec<String> = live_instances(c, filters)
            .await?
            .into_iter()
            .filter(|i| {
                let pairs: Vec<_> = i
                    .tags
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                policy::instances::decide(own, &Candidate::tagged(&pairs)).is_delete()
            })
            .map(|i| i.id)
            .collect();
        inv.share_mut::<TaggedShare>().0.extend(found);
        Ok(())
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        let found = match self.0.phase {
            Phase::CapaOwned => {
                if !super::capa_may_hold(ctx, KIND).await? {
                    return Ok(Vec::new());
                }
                let capa = tags::ec2_tag_filter(&ctx.capa_key(), tags::OWNED);
                live_instances(ctx.clients, vec![capa]).await?
            }
            // Only the two consts exist: anything not phase 1 is `TAGGED`.
            Phase::Tagged | Phase::Network => {
                let ids = ctx
                    .inventory
                    .get::<TaggedShare>()
                    .map_or(&[][..], |s| &s.0[..]);
                let mut out = Vec::new();
                for chunk in ids.chunks(FILTER_CHUNK) {
                    let filters = vec![tags::ec2_filter("instance-id", chunk)];
                    out.extend(live_instances(ctx.clients, filters).await?);
                }
                out
            }
        };
        Ok(found
            .into_iter()
            .filter_map(|i| {
                let pairs = i.tags.iter().map(|(k, v)| (k.as_str(), v.as_str()));
                let t = Target::plain(i.id.clone()).with_tags(pairs);
                t.judged(policy::instances::by_state(&i.state))
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.TerminateInstances", || {
            ctx.clients
                .ec2
                .terminate_instances()
                .instance_ids(&t.id)
                .send()
        })
        .await;
        let terminated = res.as_ref().ok().map(|o| {
            o.terminating_instances().iter().all(|i| {
                i.current_state().and_then(|s| s.name()).map(|n| n.as_str()) == Some("terminated")
            })
        });
        match (settle(res, KIND, &t.id, "TerminateInstances")?, terminated) {
            (Outcome::Deleted, Some(false)) => Ok(Outcome::Requested(
                crate::model::Failure::waiting("terminating; waiting until terminated"),
            )),
            (o, _) => Ok(o),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn tagged(id: &str, tags: &[(&str, &str)]) -> TaggedResource {
        TaggedResource {
            arn: format!("arn:aws:ec2:us-east-1:0:instance/{id}")
                .parse()
                .unwrap(),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn free_standing_nodes_are_taken_and_group_members_left_to_their_group() {
        let owned = ("kubernetes.io/cluster/c1", "owned");
        let mut inv = Inventory::default();
        let external = Instances::TAGGED;
        for r in [
            tagged(
                "i-karpenter",
                &[owned, ("karpenter.sh/nodepool", "default")],
            ),
            tagged("i-asg", &[owned, ("aws:autoscaling:groupName", "ng-1")]),
            tagged("i-eks", &[owned, ("eks:nodegroup-name", "ng-2")]),
        ] {
            assert!(external.claim(&r, &mut inv), "an instance is this kind's");
        }
        let ids = &inv.get::<TaggedShare>().unwrap().0;
        assert_eq!(ids, &vec!["i-karpenter".to_string()]);
        assert!(!Instances::CAPA_OWNED.claim(&tagged("i-x", &[owned]), &mut inv));
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::mocked::{self, CAPA_KEY, assert_calls, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
    use aws_sdk_ec2::operation::terminate_instances::TerminateInstancesOutput;
    use aws_sdk_ec2::types::{
        Instance, InstanceState, InstanceStateChange, InstanceStateName, Reservation,
    };

    fn running(id: &str, state: InstanceStateName) -> Reservation {
        Reservation::builder()
            .instances(
                Instance::builder()
                    .instance_id(id)
                    .state(InstanceState::builder().name(state).build())
                    .tags(tag(CAPA_KEY, "owned"))
                    .build(),
            )
            .build()
    }

    fn live_states(f: &[aws_sdk_ec2::types::Filter]) -> bool {
        filter_is(
            f,
            "instance-state-name",
            &["pending", "running", "stopping", "stopped", "shutting-down"],
        )
    }

    #[tokio::test]
    async fn phase_one_asks_for_capas_live_instances_and_waits_for_shutting_down_ones() {
        let describe = mock!(Client::describe_instances)
            .match_requests(|r| {
                filter_is(r.filters(), &format!("tag:{CAPA_KEY}"), &["owned"])
                    && live_states(r.filters())
                    && r.filters().len() == 2
            })
            .then_output(|| {
                DescribeInstancesOutput::builder()
                    .reservations(running("i-1", InstanceStateName::Running))
                    .reservations(running("i-2", InstanceStateName::ShuttingDown))
                    .build()
            });
        // Phase 1's query found one of CAPA's instances: described, by CAPA's tag.
        let query = mocked::capa_tagged_query(&[(
            "arn:aws:ec2:us-east-1:0:instance/i-1",
            CAPA_KEY,
            "owned",
        )]);
        let c = mocked::in_order(&[&query, &describe]);
        let inv = Inventory::default();
        let found = Instances::CAPA_OWNED
            .discover(&ctx(&c, &inv))
            .await
            .unwrap();
        let seen: Vec<(&str, bool)> = found
            .iter()
            .map(|t| (t.id.as_str(), t.blocked.is_some()))
            .collect();
        assert_eq!(seen, [("i-1", false), ("i-2", true)]);
        assert_calls(&describe, 1, "DescribeInstances");
    }

    /// Sequential rules: a DescribeInstances would find no rule and fail the discover.
    #[tokio::test]
    async fn phase_one_describes_nothing_when_its_query_found_no_instance_of_capas() {
        for found in [
            vec![],
            // A group of CAPA's and a load balancer: not instances.
            vec![
                (
                    "arn:aws:ec2:us-east-1:0:security-group/sg-1",
                    CAPA_KEY,
                    "owned",
                ),
                (
                    "arn:aws:elasticloadbalancing:us-east-1:0:loadbalancer/c1-apiserver",
                    CAPA_KEY,
                    "owned",
                ),
            ],
        ] {
            let query = mocked::capa_tagged_query(&found);
            let c = mocked::in_order(&[&query]);
            let inv = Inventory::default();
            let got = Instances::CAPA_OWNED
                .discover(&ctx(&c, &inv))
                .await
                .unwrap();
            assert!(got.is_empty(), "{found:?}: {got:?}");
            assert_calls(&query, 1, "GetResources");
        }
    }

    /// `--alternative-discovery` does not trust the tagging API: no gate, the Describe decides.
    #[tokio::test]
    async fn alternative_discovery_describes_phase_ones_instances_without_the_query() {
        let describe = mock!(Client::describe_instances)
            .match_requests(|r| filter_is(r.filters(), &format!("tag:{CAPA_KEY}"), &["owned"]))
            .then_output(|| DescribeInstancesOutput::builder().build());
        let c = mocked::in_order(&[&describe]);
        let inv = Inventory::default();
        let cx = CleanCtx {
            alternative_discovery: true,
            ..ctx(&c, &inv)
        };
        assert!(
            Instances::CAPA_OWNED
                .discover(&cx)
                .await
                .unwrap()
                .is_empty()
        );
        assert_calls(&describe, 1, "DescribeInstances");
    }

    #[tokio::test]
    async fn phase_two_asks_only_for_the_inventorys_instances_by_id() {
        let mut inv = Inventory::default();
        inv.share_mut::<TaggedShare>().0.push("i-karpenter".into());
        let describe = mock!(Client::describe_instances)
            .match_requests(|r| {
                filter_is(r.filters(), "instance-id", &["i-karpenter"])
                    && live_states(r.filters())
                    && r.filters().len() == 2
            })
            .then_output(|| {
                DescribeInstancesOutput::builder()
                    .reservations(running("i-karpenter", InstanceStateName::Running))
                    .build()
            });
        let c = mocked::in_order(&[&describe]);
        let found = Instances::TAGGED.discover(&ctx(&c, &inv)).await.unwrap();
        assert_eq!(found.len(), 1);
        // Nothing in the inventory: nothing asked.
        let empty = Inventory::default();
        let none = mocked::no_calls();
        let found = Instances::TAGGED
            .discover(&ctx(&none, &empty))
            .await
            .unwrap();
        assert!(found.is_empty());
    }

    #[tokio::test]
    async fn a_termination_under_way_is_requested_and_keeps_the_instance_remaining() {
        let change = |state| {
            TerminateInstancesOutput::builder()
                .terminating_instances(
                    InstanceStateChange::builder()
                        .instance_id("i-1")
                        .current_state(InstanceState::builder().name(state).build())
                        .build(),
                )
                .build()
        };
        let terminating = mock!(Client::terminate_instances)
            .match_requests(|r| r.instance_ids() == ["i-1"])
            .then_output(move || change(InstanceStateName::ShuttingDown));
        let terminated = mock!(Client::terminate_instances)
            .then_output(move || change(InstanceStateName::Terminated));
        let c = mocked::in_order(&[&terminating, &terminated]);
        let inv = Inventory::default();
        let t = Target::plain("i-1");
        let cleaner = Instances::CAPA_OWNED;
        let first = cleaner.delete(&ctx(&c, &inv), &t).await.unwrap();
        assert!(matches!(first, Outcome::Requested(_)), "{first:?}");
        let second = cleaner.delete(&ctx(&c, &inv), &t).await.unwrap();
        assert_eq!(second, Outcome::Deleted);
        assert_calls(&terminated, 1, "TerminateInstances");
    }
}
