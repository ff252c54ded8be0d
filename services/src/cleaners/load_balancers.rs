//! Load balancers, classic and v2. Phase 1 deletes the CAPA API-server load balancer, phase 2 the
//! ones the cloud provider and the AWS Load Balancer Controller created (from the inventory);
//! which is whose is `policy`'s (`policy::capa`, `policy::Ownership`).
//! The API is chosen from what locating recorded (ARN shape or the API it came from), so a delete
//! is one call with no Describe first.

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::arn::Arn;
use crate::errors::call;
use crate::locate::capa_tagged::{self, CapaTagged};
use crate::locate::describe;
use crate::locate::inventory::Inventory;
use crate::locate::tagging::TaggedResource;
use crate::model::{AwsClients, GcTask, Phase};
use crate::policy::{self, Candidate, Ownership};
use async_trait::async_trait;

/// Selects phase 2's load balancers.
pub const TASK: GcTask = GcTask::new("load-balancer");

/// One executor for two phases, its descriptor saying which: [`LoadBalancers::CAPA_OWNED`] or
/// [`LoadBalancers::TAGGED`].
pub struct LoadBalancers(&'static Descriptor);

/// Classic and v2 alike: the elbv2 API's actions carry the same names.
const IAM_ACTIONS: &[&str] = &[
    "elasticloadbalancing:DescribeLoadBalancers",
    "elasticloadbalancing:DescribeTags",
    "elasticloadbalancing:DeleteLoadBalancer",
];

impl LoadBalancers {
    /// Phase 1: carrying `sigs.k8s.io/cluster-api-provider-aws/cluster/N=owned`.
    pub const CAPA_OWNED: LoadBalancers = LoadBalancers(&Descriptor {
        iam_actions: IAM_ACTIONS,
        ..Descriptor::new("elasticloadbalancing", KIND, Phase::CapaOwned, 10)
    });
    /// Phase 2: the inventory.
    pub const TAGGED: LoadBalancers = LoadBalancers(&Descriptor {
        task: Some(TASK),
        iam_actions: IAM_ACTIONS,
        ..Descriptor::new("elasticloadbalancing", KIND, Phase::Tagged, 10)
    });
}

const KIND: &str = "load-balancer";

/// Which API deletes a load balancer, and by what.
#[derive(Clone, Debug, PartialEq)]
pub enum Api {
    /// The classic ELB API, by name.
    Classic { name: String },
    /// The elbv2 API (application, network, gateway), by ARN.
    V2 { arn: String },
}

/// Phase 2's load balancers in the inventory.
#[derive(Debug, Default)]
struct TaggedShare(Vec<Target<Api>>);

/// The load balancers phase 2's locate step found.
pub fn tagged(inv: &Inventory) -> &[Target<Api>] {
    inv.get::<TaggedShare>().map_or(&[], |s| &s.0)
}

/// What a load balancer ARN says about the API that deletes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LbKind {
    /// `loadbalancer/<name>`: the classic ELB API, by name.
    Classic { name: String },
    /// `loadbalancer/app|net|gwy/<name>/<id>`: the elbv2 API, by ARN. The type segment is not
    /// trusted beyond that (LocalStack reports NLBs as `app/`), elbv2 deletes all three alike.
    V2,
}

/// Decides classic vs v2 from a parsed ARN; `None` when it is not a load balancer ARN we know.
pub fn lb_kind(arn: &Arn) -> Option<LbKind> {
    if arn.service != "elasticloadbalancing" || arn.resource_type() != "loadbalancer" {
        return None;
    }
    let rest = arn.resource_id();
    match rest.split_once('/') {
        None if !rest.is_empty() => Some(LbKind::Classic {
            name: rest.to_string(),
        }),
        Some(("app" | "net" | "gwy", tail)) if !tail.is_empty() => Some(LbKind::V2),
        _ => None,
    }
}

fn classic(name: String) -> Target<Api> {
    Target::new(name.clone(), Api::Classic { name })
}

fn v2(arn: String) -> Target<Api> {
    Target::new(arn.clone(), Api::V2 { arn })
}

#[async_trait]
impl Cleaner for LoadBalancers {
    type Detail = Api;

    fn descriptor(&self) -> &'static Descriptor {
        self.0
    }

    fn claim(&self, r: &TaggedResource, inv: &mut Inventory) -> bool {
        if self.0.phase != Phase::Tagged
            || r.arn.service != "elasticloadbalancing"
            || r.arn.resource_type() != "loadbalancer"
        {
            return false;
        }
        let arn = r.arn.to_string();
        let target = match lb_kind(&r.arn) {
            Some(LbKind::Classic { name }) => Target::new(arn, Api::Classic { name }),
            Some(LbKind::V2) => v2(arn),
            None => {
                inv.errors.push(format!(
                    "unrecognised load balancer ARN {arn:?}; not touched"
                ));
                return true;
            }
        };
        inv.share_mut::<TaggedShare>().0.push(target);
        true
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
        let mut found = Vec::new();
        let ours = |lb: &describe::Tagged| {
            let tags: Vec<_> = lb.pairs().collect();
            let vpc = lb.vpc.as_deref();
            own.decide(&Candidate { tags: &tags, vpc }).is_delete()
        };
        for lb in describe::classic_load_balancers(c).await? {
            if ours(&lb) {
                found.push(classic(lb.id));
            }
        }
        for lb in describe::v2_load_balancers(c).await? {
            if ours(&lb) {
                found.push(v2(lb.id));
            }
        }
        inv.share_mut::<TaggedShare>().0.extend(found);
        Ok(())
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Api>>, CleanError> {
        if self.0.phase == Phase::Tagged {
            return Ok(tagged(ctx.inventory).to_vec());
        }
        let capa = ctx.capa_key();
        if !ctx.alternative_discovery {
            return from_capa_query(ctx, &capa).await;
        }
        let capas = |lb: &describe::Tagged| {
            let tags: Vec<_> = lb.pairs().collect();
            policy::capa::decide(&Candidate::tagged(&tags), &capa).is_delete()
        };
        // Alternative discovery: the region's listings and every load balancer's tags. The
        // listings are the pass's: phase 2's external-dns step reads their DNS names and phase
        // 3's blocker check their VPCs, unless a load balancer delete went out.
        let (c, view) = (ctx.clients, ctx.view);
        let mut out = Vec::new();
        for lb in describe::classic_tagged(c, &view.classic_lbs(c).await?).await? {
            if capas(&lb) {
                out.push(classic(lb.id.clone()).with_tags(lb.pairs()));
            }
        }
        for lb in describe::v2_tagged(c, &view.v2_lbs(c).await?).await? {
            if capas(&lb) {
                out.push(v2(lb.id.clone()).with_tags(lb.pairs()));
            }
        }
        Ok(out)
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<Api>) -> Result<Outcome, CleanError> {
        match &t.detail {
            Api::Classic { name } => {
                let res = call("elb.DeleteLoadBalancer", || {
                    ctx.clients
                        .elb
                        .delete_load_balancer()
                        .load_balancer_name(name)
                        .send()
                })
                .await;
                settle(res, KIND, &t.id, "DeleteLoadBalancer")
            }
            Api::V2 { arn } => {
                let res = call("elbv2.DeleteLoadBalancer", || {
                    ctx.clients
                        .elbv2
                        .delete_load_balancer()
                        .load_balancer_arn(arn)
                        .send()
                })
                .await;
                settle(res, KIND, &t.id, "DeleteLoadBalancer")
            }
        }
    }
}

/// Phase 1 from the tagging query of CAPA's key (`locate::capa_tagged`): its load balancers, CAPA's
/// rule applied again to the tags returned. An ARN that names no load balancer API sweeper knows,
/// or does not parse, is held (remaining, never deleted): it may be CAPA's API-server load
/// balancer, and the network must not go before it.
async fn from_capa_query(ctx: &CleanCtx<'_>, capa: &str) -> Result<Vec<Target<Api>>, CleanError> {
    let found = ctx.view.capa_tagged(ctx.clients, capa, KIND).await?;
    let mut out = Vec::new();
    for r in capa_tagged::of_type(&found, "elasticloadbalancing", "loadbalancer") {
        let tags: Vec<(&str, &str)> = r
            .tags
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if !policy::capa::decide(&Candidate::tagged(&tags), capa).is_delete() {
            continue;
        }
        let arn = r.arn.to_string();
        let target = match lb_kind(&r.arn) {
            Some(LbKind::Classic { name }) => classic(name),
            Some(LbKind::V2) => v2(arn),
            None => unrecognised(arn),
        };
        out.push(target.with_tags(tags));
    }
    for f in found.iter() {
        if let CapaTagged::Malformed(raw) = f {
            out.push(unrecognised(raw.clone()));
        }
    }
    Ok(out)
}

/// A CAPA-tagged ARN sweeper cannot delete by: reported as remaining, no call made.
fn unrecognised(arn: String) -> Target<Api> {
    let mut t = Target::new(arn.clone(), Api::V2 { arn: arn.clone() });
    t.blocked = Some(format!(
        "unrecognised load balancer ARN {arn:?} tagged by CAPA for the cluster; not touched"
    ));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arn(s: &str) -> Arn {
        s.parse().unwrap()
    }

    #[test]
    fn load_balancer_type_comes_from_the_arn() {
        let p = "arn:aws:elasticloadbalancing:us-east-1:000000000000:loadbalancer/";
        assert_eq!(
            lb_kind(&arn(&format!("{p}a1b2"))),
            Some(LbKind::Classic {
                name: "a1b2".into()
            })
        );
        for t in ["app", "net", "gwy"] {
            assert_eq!(
                lb_kind(&arn(&format!("{p}{t}/x/50dc6c495c0c9188"))),
                Some(LbKind::V2)
            );
        }
        assert_eq!(lb_kind(&arn(&format!("{p}weird/x/1"))), None);
        assert_eq!(
            lb_kind(&arn(
                "arn:aws:elasticloadbalancing:us-east-1:0:targetgroup/tg/1"
            )),
            None
        );
        assert_eq!(
            lb_kind(&arn("arn:aws:ec2:us-east-1:0:security-group/sg-1")),
            None
        );
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::mocked::{self, CAPA_KEY, CLOUD_KEY, Rule, assert_calls, code, mock};
    use aws_sdk_elasticloadbalancing as elb;
    use aws_sdk_elasticloadbalancingv2 as elbv2;
    use elb::operation::delete_load_balancer::DeleteLoadBalancerOutput as ClassicDeleted;
    use elb::operation::describe_load_balancers::DescribeLoadBalancersOutput as ClassicOut;
    use elb::operation::describe_tags::DescribeTagsOutput as ClassicTags;
    use elb::types::{LoadBalancerDescription, TagDescription as ClassicTagDescription};
    use elbv2::operation::delete_load_balancer::DeleteLoadBalancerError as V2DeleteError;
    use elbv2::operation::describe_load_balancers::DescribeLoadBalancersOutput as V2Out;
    use elbv2::operation::describe_tags::DescribeTagsOutput as V2Tags;
    use elbv2::types::{LoadBalancer, TagDescription};

    const V2_OURS: &str = "arn:aws:elasticloadbalancing:us-east-1:0:loadbalancer/app/c1-api/1";
    const V2_OTHER: &str = "arn:aws:elasticloadbalancing:us-east-1:0:loadbalancer/app/c2-api/2";

    fn classic_tag(k: &str, v: &str) -> elb::types::Tag {
        elb::types::Tag::builder().key(k).value(v).build().unwrap()
    }

    fn v2_tag(k: &str, v: &str) -> elbv2::types::Tag {
        elbv2::types::Tag::builder().key(k).value(v).build()
    }

    /// The region's load balancers: ours (CAPA-owned) and another cluster's, of both APIs.
    fn region_rules() -> [Rule; 4] {
        let classic = mock!(elb::Client::describe_load_balancers).then_output(|| {
            ClassicOut::builder()
                .load_balancer_descriptions(
                    LoadBalancerDescription::builder()
                        .load_balancer_name("c1-apiserver")
                        .build(),
                )
                .load_balancer_descriptions(
                    LoadBalancerDescription::builder()
                        .load_balancer_name("c2-apiserver")
                        .build(),
                )
                .build()
        });
        let classic_tags = mock!(elb::Client::describe_tags)
            .match_requests(|r| r.load_balancer_names() == ["c1-apiserver", "c2-apiserver"])
            .then_output(|| {
                ClassicTags::builder()
                    .tag_descriptions(
                        ClassicTagDescription::builder()
                            .load_balancer_name("c1-apiserver")
                            .tags(classic_tag(CAPA_KEY, "owned"))
                            .build(),
                    )
                    .tag_descriptions(
                        ClassicTagDescription::builder()
                            .load_balancer_name("c2-apiserver")
                            .tags(classic_tag(
                                "sigs.k8s.io/cluster-api-provider-aws/cluster/c2",
                                "owned",
                            ))
                            .build(),
                    )
                    .build()
            });
        let v2 = mock!(elbv2::Client::describe_load_balancers).then_output(|| {
            V2Out::builder()
                .load_balancers(LoadBalancer::builder().load_balancer_arn(V2_OURS).build())
                .load_balancers(LoadBalancer::builder().load_balancer_arn(V2_OTHER).build())
                .build()
        });
        let v2_tags = mock!(elbv2::Client::describe_tags).then_output(|| {
            V2Tags::builder()
                .tag_descriptions(
                    TagDescription::builder()
                        .resource_arn(V2_OURS)
                        .tags(v2_tag(CAPA_KEY, "owned"))
                        .build(),
                )
                // A `shared` cluster tag is not ownership.
                .tag_descriptions(
                    TagDescription::builder()
                        .resource_arn(V2_OTHER)
                        .tags(v2_tag(CAPA_KEY, "shared"))
                        .build(),
                )
                .build()
        });
        [classic, classic_tags, v2, v2_tags]
    }

    /// Phase 1 asks the tagging API once for CAPA's key and reads no listing and no tags: the
    /// region's other load balancers cost nothing. What the answer holds is judged again: a
    /// `shared` value is not ownership, an ARN of another account is dropped, a target group is
    /// the target group cleaner's and an instance phase 1's instance cleaner's, and an ARN of no known load balancer API (or none at all) is
    /// held, never deleted.
    #[tokio::test]
    async fn phase_one_takes_capas_load_balancers_from_one_tagging_query() {
        let p = "arn:aws:elasticloadbalancing:us-east-1:0:";
        let classic_arn = format!("{p}loadbalancer/c1-apiserver");
        let shared = format!("{p}loadbalancer/app/c1-shared/3");
        let foreign = "arn:aws:elasticloadbalancing:us-east-1:999:loadbalancer/app/c1-api/4";
        let group = format!("{p}targetgroup/c1-apiserver/5");
        let weird = format!("{p}loadbalancer/weird/x/6");
        let query = mocked::capa_tagged_query(&[
            (&classic_arn, CAPA_KEY, "owned"),
            (V2_OURS, CAPA_KEY, "owned"),
            (&shared, CAPA_KEY, "shared"),
            (foreign, CAPA_KEY, "owned"),
            (&group, CAPA_KEY, "owned"),
            (&weird, CAPA_KEY, "owned"),
            ("not-an-arn", CAPA_KEY, "owned"),
            // Judged by its ARN even if the type filter let it through: not a load balancer.
            ("arn:aws:ec2:us-east-1:0:instance/i-1", CAPA_KEY, "owned"),
        ]);
        let mut c = mocked::in_order(&[&query]);
        c.scope = Some(crate::scope::Scope {
            partition: "aws".into(),
            region: "us-east-1".into(),
            account: "0".into(),
        });
        let inv = Inventory::default();
        let found = LoadBalancers::CAPA_OWNED
            .discover(&ctx(&c, &inv))
            .await
            .unwrap();
        let seen: Vec<(&Api, Option<&str>)> = found
            .iter()
            .map(|t| (&t.detail, t.blocked.as_deref()))
            .collect();
        assert_eq!(
            seen[..2],
            [
                (
                    &Api::Classic {
                        name: "c1-apiserver".into()
                    },
                    None
                ),
                (
                    &Api::V2 {
                        arn: V2_OURS.into()
                    },
                    None
                ),
            ]
        );
        let held: Vec<&str> = found[2..]
            .iter()
            .filter(|t| t.blocked.is_some())
            .map(|t| t.id.as_str())
            .collect();
        assert_eq!(held, [weird.as_str(), "not-an-arn"], "held, not deleted");
        assert_eq!(found.len(), 4);
        assert_calls(&query, 1, "GetResources");
    }

    /// `--alternative-discovery`: the region's listings of both APIs and every load balancer's
    /// tags, CAPA's rule deciding.
    #[tokio::test]
    async fn phase_one_with_alternative_discovery_reads_the_regions_tags() {
        let rules = region_rules();
        let c = mocked::in_order(&rules.iter().collect::<Vec<_>>());
        let inv = Inventory::default();
        let found = LoadBalancers::CAPA_OWNED
            .discover(&CleanCtx {
                alternative_discovery: true,
                ..ctx(&c, &inv)
            })
            .await
            .unwrap();
        assert_eq!(
            found.iter().map(|t| &t.detail).collect::<Vec<_>>(),
            [
                &Api::Classic {
                    name: "c1-apiserver".into()
                },
                &Api::V2 {
                    arn: V2_OURS.into()
                }
            ]
        );
    }

    #[tokio::test]
    async fn phase_two_reads_the_inventory_and_asks_nothing() {
        let mut inv = Inventory::default();
        let lb = LoadBalancers::TAGGED;
        let tagged = TaggedResource {
            arn: V2_OURS.parse().unwrap(),
            tags: [(CLOUD_KEY.to_string(), "owned".to_string())].into(),
        };
        assert!(lb.claim(&tagged, &mut inv));
        let c = mocked::no_calls();
        let found = lb.discover(&ctx(&c, &inv)).await.unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].detail,
            Api::V2 {
                arn: V2_OURS.into()
            }
        );
    }

    #[tokio::test]
    async fn alternative_discovery_keeps_only_what_ownership_accepts() {
        let rules = region_rules();
        let c = mocked::in_order(&rules.iter().collect::<Vec<_>>());
        let mut inv = Inventory::default();
        // Phase 2's rule for c1: `kubernetes.io/cluster/c1=owned`, never CAPA's; none qualifies.
        let own = Ownership::of("c1");
        LoadBalancers::TAGGED
            .describe_owned(&c, &own, &mut inv)
            .await
            .unwrap();
        assert!(
            tagged(&inv).is_empty(),
            "CAPA's and `shared` are not phase 2's"
        );
    }

    #[tokio::test]
    async fn each_api_deletes_its_own_kind_and_gone_is_done() {
        let by_name = mock!(elb::Client::delete_load_balancer)
            .match_requests(|r| r.load_balancer_name() == Some("c1-apiserver"))
            .then_output(|| ClassicDeleted::builder().build());
        let by_arn = mock!(elbv2::Client::delete_load_balancer)
            .match_requests(|r| r.load_balancer_arn() == Some(V2_OURS))
            .then_error(|| V2DeleteError::generic(code("LoadBalancerNotFound")));
        let c = mocked::in_order(&[&by_name, &by_arn]);
        let inv = Inventory::default();
        let cx = ctx(&c, &inv);
        let lb = LoadBalancers::CAPA_OWNED;
        let t = classic("c1-apiserver".into());
        assert_eq!(lb.delete(&cx, &t).await.unwrap(), Outcome::Deleted);
        let t = v2(V2_OURS.into());
        assert_eq!(lb.delete(&cx, &t).await.unwrap(), Outcome::Gone);
        assert_calls(&by_arn, 1, "elbv2 DeleteLoadBalancer");
    }
}
