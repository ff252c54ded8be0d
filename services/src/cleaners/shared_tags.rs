//! Phase 3, task `shared-tag` (issue #44): in the cluster's bring-your-own VPC, the VPC, its
//! subnets and its route tables lose the cluster's `kubernetes.io/cluster/<name>=shared` tag;
//! **nothing is deleted**. The rule is `policy::shared_tags::decide`: only a VPC the cluster's
//! object names and CAPA does not own, only the cluster's key with the value `shared`, only that
//! key (another cluster's key on the same subnet stays). Last of phase 3, so only once phases 1
//! and 2 are done (the cloud provider has no load balancer left that needs the subnet tag).
//!
//! The untag is `ec2:DeleteTags` naming the key and the value `shared`: EC2 removes a tag given
//! with a value only while it has that value, so a tag turned `owned` meanwhile stays. It is
//! never called with an empty tag list (which would remove every tag); the IAM policy allows
//! it only for keys under `kubernetes.io/cluster/`, with the key list required.

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::tags;
use crate::model::{GcTask, Phase};
use crate::policy::{self, Candidate};
use async_trait::async_trait;
use aws_sdk_ec2::types::Tag;
use std::fmt;

/// Selects the untag (on by default, like every task but the opt-ins).
pub const TASK: GcTask = GcTask::new("shared-tag");

pub struct SharedTags;

const KIND: &str = "shared-tag";

/// After the VPC's own step (order 80): in a bring-your-own VPC nothing else of phase 3 runs, and
/// in a CAPA-managed one this kind finds nothing (the policy keeps CAPA's).
pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    untags: true,
    iam_actions: &[
        "ec2:DescribeVpcs",
        "ec2:DescribeSubnets",
        "ec2:DescribeRouteTables",
        "ec2:DeleteTags",
    ],
    ..Descriptor::new("ec2", KIND, Phase::Network, 80)
};

/// The tag key an untag removes (`kubernetes.io/cluster/<name>`), printed bare: the audit's
/// detail and `gc plan` show it as it is.
#[derive(Clone, PartialEq, Eq)]
pub struct TagKey(pub String);

impl fmt::Debug for TagKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[async_trait]
impl Cleaner for SharedTags {
    type Detail = TagKey;

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<TagKey>>, CleanError> {
        if ctx.byo_vpcs.is_empty() {
            return Ok(Vec::new());
        }
        let ec2 = &ctx.clients.ec2;
        let key = tags::cloud_key(ctx.cluster);
        let capa = ctx.capa_key();
        // In the VPCs, carrying the cluster's key with `shared`: the server's filter; the rule
        // then judges what came back.
        let filters = || {
            vec![
                tags::ec2_filter("vpc-id", ctx.byo_vpcs),
                tags::ec2_tag_filter(&key, tags::SHARED),
            ]
        };
        let mut found: Vec<(String, Option<String>, Vec<Tag>)> = Vec::new();
        let vpcs = call("ec2.DescribeVpcs", || {
            ec2.describe_vpcs().set_filters(Some(filters())).send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeVpcs"))?;
        for v in vpcs.vpcs() {
            if let Some(id) = v.vpc_id() {
                found.push((id.into(), Some(id.into()), v.tags().to_vec()));
            }
        }
        let subnets = call("ec2.DescribeSubnets", || {
            ec2.describe_subnets().set_filters(Some(filters())).send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeSubnets"))?;
        for s in subnets.subnets() {
            if let Some(id) = s.subnet_id() {
                found.push((id.into(), s.vpc_id().map(Into::into), s.tags().to_vec()));
            }
        }
        let tables = call("ec2.DescribeRouteTables", || {
            ec2.describe_route_tables()
                .set_filters(Some(filters()))
                .send()
        })
        .await
        .map_err(CleanError::discover(KIND, "DescribeRouteTables"))?;
        for r in tables.route_tables() {
            if let Some(id) = r.route_table_id() {
                found.push((id.into(), r.vpc_id().map(Into::into), r.tags().to_vec()));
            }
        }
        Ok(found
            .into_iter()
            .filter_map(|(id, vpc, t)| {
                let pairs: Vec<_> = tags::ec2_pairs(&t).collect();
                let c = Candidate {
                    tags: &pairs,
                    vpc: vpc.as_deref(),
                };
                let verdict = policy::shared_tags::decide(&c, &key, &capa, ctx.byo_vpcs);
                (verdict == policy::Verdict::Untag)
                    .then(|| Target::new(id, TagKey(key.clone())).with_tags(pairs.iter().copied()))
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target<TagKey>) -> Result<Outcome, CleanError> {
        let key = &t.detail.0;
        let res = call("ec2.DeleteTags", || {
            ctx.clients
                .ec2
                .delete_tags()
                .resources(&t.id)
                // Key and value: removed only while it is still `shared`.
                .tags(Tag::builder().key(key).value(tags::SHARED).build())
                .send()
        })
        .await;
        Ok(match settle(res, KIND, &t.id, "DeleteTags")? {
            Outcome::Deleted => Outcome::Untagged(key.clone()),
            other => other,
        })
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, CLOUD_KEY, assert_calls, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::delete_tags::DeleteTagsOutput;
    use aws_sdk_ec2::operation::describe_route_tables::DescribeRouteTablesOutput;
    use aws_sdk_ec2::operation::describe_subnets::DescribeSubnetsOutput;
    use aws_sdk_ec2::operation::describe_vpcs::DescribeVpcsOutput;
    use aws_sdk_ec2::types::{Filter, RouteTable, Subnet, Vpc};

    fn asks(f: &[Filter]) -> bool {
        f.len() == 2
            && filter_is(f, "vpc-id", &["vpc-byo"])
            && filter_is(f, &format!("tag:{CLOUD_KEY}"), &["shared"])
    }

    #[tokio::test]
    async fn without_a_bring_your_own_vpc_nothing_is_asked() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        let vpcs = ["vpc-capa".to_string()];
        let cx = CleanCtx {
            vpc_ids: &vpcs,
            ..ctx(&c, &inv)
        };
        assert!(SharedTags.discover(&cx).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_clusters_shared_key_alone_is_removed_with_its_value() {
        let vpcs = mock!(Client::describe_vpcs)
            .match_requests(|r| asks(r.filters()))
            .then_output(|| {
                DescribeVpcsOutput::builder()
                    .vpcs(
                        Vpc::builder()
                            .vpc_id("vpc-byo")
                            .tags(tag(CLOUD_KEY, "shared"))
                            .build(),
                    )
                    .build()
            });
        let subnets = mock!(Client::describe_subnets)
            .match_requests(|r| asks(r.filters()))
            .then_output(|| {
                let s = |id: &str, tags: &[(&str, &str)]| {
                    let mut b = Subnet::builder().subnet_id(id).vpc_id("vpc-byo");
                    for (k, v) in tags {
                        b = b.tags(tag(k, v));
                    }
                    b.build()
                };
                DescribeSubnetsOutput::builder()
                    .subnets(s(
                        "subnet-both",
                        &[
                            (CLOUD_KEY, "shared"),
                            ("kubernetes.io/cluster/c2", "shared"),
                        ],
                    ))
                    // The server's filter would not return these; the rule keeps them anyway.
                    .subnets(s(
                        "subnet-capa",
                        &[(CLOUD_KEY, "shared"), (CAPA_KEY, "owned")],
                    ))
                    .subnets(s("subnet-owned", &[(CLOUD_KEY, "owned")]))
                    .build()
            });
        let tables = mock!(Client::describe_route_tables)
            .match_requests(|r| asks(r.filters()))
            .then_output(|| {
                DescribeRouteTablesOutput::builder()
                    .route_tables(
                        RouteTable::builder()
                            .route_table_id("rtb-1")
                            .vpc_id("vpc-byo")
                            .tags(tag(CLOUD_KEY, "shared"))
                            .build(),
                    )
                    .build()
            });
        let untag = mock!(Client::delete_tags)
            .match_requests(|r| {
                r.resources() == ["subnet-both"]
                    && r.tags().len() == 1
                    && r.tags()[0].key() == Some(CLOUD_KEY)
                    && r.tags()[0].value() == Some("shared")
            })
            .then_output(|| DeleteTagsOutput::builder().build());
        let c = mocked::in_order(&[&vpcs, &subnets, &tables, &untag]);
        let inv = Inventory::default();
        let byo = ["vpc-byo".to_string()];
        let cx = CleanCtx {
            byo_vpcs: &byo,
            ..ctx(&c, &inv)
        };
        let found = SharedTags.discover(&cx).await.unwrap();
        let ids: Vec<&str> = found.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["vpc-byo", "subnet-both", "rtb-1"]);
        let out = SharedTags.delete(&cx, &found[1]).await.unwrap();
        assert_eq!(out, Outcome::Untagged(CLOUD_KEY.to_string()));
        assert_calls(
            &untag,
            1,
            "DeleteTags subnet-both, our key and `shared` only",
        );
    }
}
