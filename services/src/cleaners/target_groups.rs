//! Target groups, after the load balancers: one bulk DescribeTargetGroups tells which are still
//! attached (LoadBalancerArns); those are reported in use and left for a later pass, the rest are
//! deleted (`policy::target_groups` decides). A ResourceInUse from the delete itself is retried, then reported the same way.
//!
//! Two phases, as the load balancers: phase 1 takes the groups CAPA created for its API-server
//! load balancer (`apiserver-target-*`, `additional-listener-*`), which carry CAPA's ownership
//! tag and nothing else of the cluster's, so phase 2's rule keeps them as CAPA's. CAPA's own
//! delete (`deleteLB` in v2.13.0's `pkg/cloud/services/elb/loadbalancer.go`) removes them with
//! the load balancer; sweeper deletes the load balancer by itself, after which the group is no
//! longer attached and only its tag says whose it is: without phase 1's share it was left behind
//! (seen with CAPA's own controller, issue #53).

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, claim_into, settle};
use crate::errors::call;
use crate::locate::capa_tagged;
use crate::locate::describe;
use crate::locate::inventory::Inventory;
use crate::locate::tagging::TaggedResource;
use crate::model::{AwsClients, GcTask, Phase};
use crate::policy::{self, Candidate, Ownership};
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};

/// Selects phase 2's target groups.
pub const TASK: GcTask = GcTask::new("target-group");

/// One executor for two phases, its descriptor saying which: [`TargetGroups::CAPA_OWNED`] or
/// [`TargetGroups::TAGGED`].
pub struct TargetGroups(&'static Descriptor);

const KIND: &str = "target-group";

/// Phase 2's target group ARNs in the inventory.
#[derive(Debug, Default)]
struct TaggedShare(Vec<String>);

/// The target group ARNs phase 2's locate step found.
pub fn tagged(inv: &Inventory) -> &[String] {
    inv.get::<TaggedShare>().map_or(&[], |s| &s.0)
}

const IAM_ACTIONS: &[&str] = &[
    "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:DescribeTags",
    // Which load balancers still use a group.
    "elasticloadbalancing:DescribeLoadBalancers",
    "elasticloadbalancing:DeleteTargetGroup",
];

impl TargetGroups {
    /// Phase 1: carrying `sigs.k8s.io/cluster-api-provider-aws/cluster/N=owned`, after CAPA's
    /// load balancers (order 10) and before its security groups.
    pub const CAPA_OWNED: TargetGroups = TargetGroups(&CAPA_DESCRIPTOR);
    /// Phase 2: the inventory.
    pub const TAGGED: TargetGroups = TargetGroups(&DESCRIPTOR);
}

pub const CAPA_DESCRIPTOR: Descriptor = Descriptor {
    iam_actions: IAM_ACTIONS,
    ..Descriptor::new("elasticloadbalancing", KIND, Phase::CapaOwned, 15)
};

pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: IAM_ACTIONS,
    ..Descriptor::new("elasticloadbalancing", KIND, Phase::Tagged, 20)
};

#[async_trait]
impl Cleaner for TargetGroups {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        self.0
    }

    fn claim(&self, r: &TaggedResource, inv: &mut Inventory) -> bool {
        if self.0.phase != Phase::Tagged {
            return false;
        }
        let kind = ("elasticloadbalancing", "targetgroup");
        claim_into(r, inv, kind, |s: &mut TaggedShare, r| {
            s.0.push(r.arn.to_string())
        })
    }

    async fn describe_owned(
        &self,
        c: &AwsClients,
        own: &Ownership,
        inv: &mut Inventory,
    ) -> Result<(), CleanError> {
        if self.0.phase != Phase::Tagged {
            return Ok(());
        }
        let groups = describe::target_groups(c).await?;
        let vpc_of: HashMap<String, Option<String>> = groups
            .iter()
            .map(|t| (t.arn.clone(), t.vpc.clone()))
            .collect();
        let arns = groups.into_iter().map(|t| t.arn).collect();
        // The cluster tag, or the LB controller's in the cluster's VPC.
        let ours: Vec<String> = describe::v2_tags(c, arns, KIND)
            .await?
            .into_iter()
            .filter(|tg| {
                let tags: Vec<_> = tg.pairs().collect();
                let vpc = vpc_of.get(&tg.id).and_then(|v| v.as_deref());
                own.decide(&Candidate { tags: &tags, vpc }).is_delete()
            })
            .map(|tg| tg.id)
            .collect();
        inv.share_mut::<TaggedShare>().0.extend(ours);
        Ok(())
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        if self.0.phase == Phase::Tagged {
            let ours = tagged(ctx.inventory);
            if ours.is_empty() {
                return Ok(Vec::new());
            }
            let groups = describe::target_groups(ctx.clients).await?;
            return judged(ctx, ours, groups).await;
        }
        // Phase 1: the groups CAPA's tag for this cluster says owned, from the pass's one tagging
        // query (`locate::capa_tagged`; the load balancer cleaner read the same answer), CAPA's
        // rule applied again to the tags returned. Alternative discovery: every group of the
        // region and its tags.
        let capa = ctx.capa_key();
        let capas = |tags: &[(&str, &str)]| {
            policy::capa::decide(&Candidate::tagged(tags), &capa).is_delete()
        };
        let (ours, listed): (Vec<String>, _) = if ctx.alternative_discovery {
            let groups = describe::target_groups(ctx.clients).await?;
            let arns = groups.iter().map(|t| t.arn.clone()).collect();
            let ours = describe::v2_tags(ctx.clients, arns, KIND)
                .await?
                .into_iter()
                .filter(|tg| capas(&tg.pairs().collect::<Vec<_>>()))
                .map(|tg| tg.id)
                .collect();
            (ours, Some(groups))
        } else {
            let found = ctx.view.capa_tagged(ctx.clients, &capa, KIND).await?;
            let ours = capa_tagged::of_type(&found, "elasticloadbalancing", "targetgroup")
                .filter(|r| {
                    let tags: Vec<_> = r
                        .tags
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    capas(&tags)
                })
                .map(|r| r.arn.to_string())
                .collect();
            (ours, None)
        };
        if ours.is_empty() {
            return Ok(Vec::new());
        }
        // The region's groups, described after this phase's load balancer deletes (the cleaner
        // runs after theirs): which load balancers still use ours.
        let groups = match listed {
            Some(g) => g,
            None => describe::target_groups(ctx.clients).await?,
        };
        judged(ctx, &ours, groups).await
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("elbv2.DeleteTargetGroup", || {
            ctx.clients
                .elbv2
                .delete_target_group()
                .target_group_arn(&t.id)
                .send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteTargetGroup")
    }
}

/// `ours` as targets, each judged by the load balancers that still use it (`groups`: the
/// region's DescribeTargetGroups, made after the load balancer cleaner of the same phase ran, so
/// attachments reflect this pass's deletes).
async fn judged(
    ctx: &CleanCtx<'_>,
    ours: &[String],
    groups: Vec<describe::TargetGroupInfo>,
) -> Result<Vec<Target>, CleanError> {
    let mut users: HashMap<String, Vec<String>> = groups
        .into_iter()
        .map(|t| (t.arn, t.load_balancer_arns))
        .collect();
    // LocalStack (and briefly AWS) keeps listing a deleted load balancer in LoadBalancerArns:
    // only load balancers that still exist count as users. One bulk call, and only when needed.
    let attached = ours
        .iter()
        .any(|arn| users.get(arn).is_some_and(|l| !l.is_empty()));
    if attached {
        // The pass's listing: described again once a load balancer delete went out.
        let listed = ctx.view.v2_lbs(ctx.clients).await?;
        let live: HashSet<&str> = listed.iter().map(|l| l.id.as_str()).collect();
        for lbs in users.values_mut() {
            lbs.retain(|l| live.contains(l.as_str()));
        }
    }
    Ok(ours
        .iter()
        // Not listed any more: already deleted, nothing to do.
        .filter_map(|arn| {
            let lbs = users.get(arn)?;
            Target::plain(arn.clone()).judged(policy::target_groups::decide(lbs))
        })
        .collect())
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::mocked::{self, assert_calls, mock};
    use aws_sdk_elasticloadbalancingv2::Client;
    use aws_sdk_elasticloadbalancingv2::operation::delete_target_group::DeleteTargetGroupOutput;
    use aws_sdk_elasticloadbalancingv2::operation::describe_load_balancers::DescribeLoadBalancersOutput;
    use aws_sdk_elasticloadbalancingv2::operation::describe_target_groups::DescribeTargetGroupsOutput;
    use aws_sdk_elasticloadbalancingv2::types::{LoadBalancer, TargetGroup};

    fn tg(arn: &str, lbs: &[&str]) -> TargetGroup {
        let mut b = TargetGroup::builder().target_group_arn(arn);
        for l in lbs {
            b = b.load_balancer_arns(*l);
        }
        b.build()
    }

    #[tokio::test]
    async fn only_the_inventorys_groups_are_targets_and_one_a_live_balancer_uses_waits() {
        let mut inv = Inventory::default();
        inv.share_mut::<TaggedShare>().0.extend([
            "tg-free".to_string(),
            "tg-attached".to_string(),
            "tg-gone".to_string(),
        ]);
        let groups = mock!(Client::describe_target_groups).then_output(|| {
            DescribeTargetGroupsOutput::builder()
                .target_groups(tg("tg-free", &["lb-deleted"]))
                .target_groups(tg("tg-attached", &["lb-live", "lb-deleted"]))
                // Someone else's: listed by the region, never a target.
                .target_groups(tg("tg-theirs", &[]))
                .build()
        });
        let live = mock!(Client::describe_load_balancers).then_output(|| {
            DescribeLoadBalancersOutput::builder()
                .load_balancers(LoadBalancer::builder().load_balancer_arn("lb-live").build())
                .build()
        });
        let delete = mock!(Client::delete_target_group)
            .match_requests(|r| r.target_group_arn() == Some("tg-free"))
            .then_output(|| DeleteTargetGroupOutput::builder().build());
        let c = mocked::in_order(&[&groups, &live, &delete]);
        let cx = ctx(&c, &inv);
        let found = TargetGroups::TAGGED.discover(&cx).await.unwrap();
        let seen: Vec<(&str, Option<&str>)> = found
            .iter()
            .map(|t| (t.id.as_str(), t.blocked.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [
                ("tg-free", None),
                ("tg-attached", Some("in use by load balancer(s) lb-live")),
            ]
        );
        assert_eq!(
            TargetGroups::TAGGED.delete(&cx, &found[0]).await.unwrap(),
            Outcome::Deleted
        );
        assert_calls(&delete, 1, "DeleteTargetGroup");
    }

    /// Phase 1 from the tagging query: CAPA's API-server group is a target, judged by the
    /// region's groups described after it (it still lists the load balancer phase 1 just
    /// deleted, which is gone); a `shared` answer and the query's load balancer are not.
    #[tokio::test]
    async fn phase_one_takes_capas_groups_from_the_tagging_query() {
        let p = "arn:aws:elasticloadbalancing:us-east-1:0:";
        let (ours, shared) = (
            format!("{p}targetgroup/c1-apiserver/1"),
            format!("{p}targetgroup/c1-shared/2"),
        );
        let lb = format!("{p}loadbalancer/app/c1-apiserver/3");
        let query = mocked::capa_tagged_query(&[
            (&ours, mocked::CAPA_KEY, "owned"),
            (&shared, mocked::CAPA_KEY, "shared"),
            (&lb, mocked::CAPA_KEY, "owned"),
        ]);
        let (o, s) = (ours.clone(), shared.clone());
        let groups = mock!(Client::describe_target_groups).then_output(move || {
            DescribeTargetGroupsOutput::builder()
                .target_groups(tg(&o, &["lb-deleted"]))
                .target_groups(tg(&s, &[]))
                .build()
        });
        let live = mock!(Client::describe_load_balancers)
            .then_output(|| DescribeLoadBalancersOutput::builder().build());
        let c = mocked::in_order(&[&query, &groups, &live]);
        let inv = Inventory::default();
        let found = TargetGroups::CAPA_OWNED
            .discover(&ctx(&c, &inv))
            .await
            .unwrap();
        let seen: Vec<(&str, Option<&str>)> = found
            .iter()
            .map(|t| (t.id.as_str(), t.blocked.as_deref()))
            .collect();
        assert_eq!(seen, [(ours.as_str(), None)]);
        assert_calls(&query, 1, "GetResources");
    }

    /// The load balancer cleaner's query serves the target group cleaner of the same pass, until
    /// a load balancer delete went out: then it is asked again.
    #[tokio::test]
    async fn phase_ones_two_cleaners_share_one_query_until_a_load_balancer_delete() {
        use crate::cleaners::load_balancers::LoadBalancers;
        let first = mocked::capa_tagged_query(&[]);
        let again = mocked::capa_tagged_query(&[]);
        let c = mocked::in_order(&[&first, &again]);
        let inv = Inventory::default();
        let cx = ctx(&c, &inv);
        assert!(
            LoadBalancers::CAPA_OWNED
                .discover(&cx)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            TargetGroups::CAPA_OWNED
                .discover(&cx)
                .await
                .unwrap()
                .is_empty()
        );
        assert_calls(&first, 1, "one query for both cleaners");
        let (service, kind) = crate::locate::view::LOAD_BALANCERS;
        cx.view.forget(service, kind).await;
        assert!(
            TargetGroups::CAPA_OWNED
                .discover(&cx)
                .await
                .unwrap()
                .is_empty()
        );
        assert_calls(&again, 1, "asked again after a load balancer delete");
    }

    /// A cluster without CAPA groups (every managed cluster's usual case) costs the query alone:
    /// no listing of the region's groups.
    #[tokio::test]
    async fn phase_one_without_capa_groups_lists_nothing() {
        let query = mocked::capa_tagged_query(&[]);
        let c = mocked::in_order(&[&query]);
        let inv = Inventory::default();
        let found = TargetGroups::CAPA_OWNED
            .discover(&ctx(&c, &inv))
            .await
            .unwrap();
        assert!(found.is_empty());
        assert_calls(&query, 1, "GetResources");
    }

    /// `--alternative-discovery`: CAPA's API-server group, still listing the load balancer phase
    /// 1 just deleted, is a target by CAPA's tag; another cluster's (a prefix-sharing name), a
    /// `shared` one and the cloud provider's (`kubernetes.io/cluster/N=owned`, phase 2's) are not.
    #[tokio::test]
    async fn capas_api_server_group_is_phase_ones_by_capas_tag_alone() {
        use aws_sdk_elasticloadbalancingv2::operation::describe_tags::DescribeTagsOutput;
        use aws_sdk_elasticloadbalancingv2::types::{Tag, TagDescription};
        let capa = crate::locate::tags::capa_key(mocked::CLUSTER);
        let other = crate::locate::tags::capa_key(&format!("{}-b", mocked::CLUSTER));
        let cloud = format!("kubernetes.io/cluster/{}", mocked::CLUSTER);
        let described = |arn: &str, k: &str, v: &str| {
            TagDescription::builder()
                .resource_arn(arn)
                .tags(Tag::builder().key(k).value(v).build())
                .build()
        };
        let groups = mock!(Client::describe_target_groups).then_output(|| {
            DescribeTargetGroupsOutput::builder()
                .target_groups(tg("tg-apiserver", &["lb-deleted"]))
                .target_groups(tg("tg-other", &[]))
                .target_groups(tg("tg-shared", &[]))
                .target_groups(tg("tg-cloud", &[]))
                .build()
        });
        let (c1, c2, c3) = (capa.clone(), other.clone(), cloud.clone());
        let c4 = capa.clone();
        let tags = mock!(Client::describe_tags).then_output(move || {
            DescribeTagsOutput::builder()
                .tag_descriptions(described("tg-apiserver", &c1, "owned"))
                .tag_descriptions(described("tg-other", &c2, "owned"))
                .tag_descriptions(described("tg-shared", &c4, "shared"))
                .tag_descriptions(described("tg-cloud", &c3, "owned"))
                .build()
        });
        let live = mock!(Client::describe_load_balancers)
            .then_output(|| DescribeLoadBalancersOutput::builder().build());
        let c = mocked::in_order(&[&groups, &tags, &live]);
        let inv = Inventory::default();
        let found = TargetGroups::CAPA_OWNED
            .discover(&CleanCtx {
                alternative_discovery: true,
                ..ctx(&c, &inv)
            })
            .await
            .unwrap();
        let seen: Vec<(&str, Option<&str>)> = found
            .iter()
            .map(|t| (t.id.as_str(), t.blocked.as_deref()))
            .collect();
        assert_eq!(seen, [("tg-apiserver", None)]);
        assert!(
            !TargetGroups::CAPA_OWNED.claim(
                &TaggedResource {
                    arn: "arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/x/1"
                        .parse()
                        .unwrap(),
                    tags: [(capa, "owned".to_string())].into(),
                },
                &mut Inventory::default()
            ),
            "phase 1 claims nothing from the tagging API"
        );
    }

    #[tokio::test]
    async fn nothing_in_the_inventory_asks_nothing() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        assert!(
            TargetGroups::TAGGED
                .discover(&ctx(&c, &inv))
                .await
                .unwrap()
                .is_empty()
        );
    }
}
