//! Describes of resources locating already knows by ARN or name (the tagging API named them):
//! 20 per call, so the answer holds those resources only, not every one of the account and
//! region. Such a call fails as a whole when one of them is gone since it was named (a
//! `...NotFound` code); the region's listing then answers for all of them, as before.

use super::describe::{self, TargetGroupInfo};
use crate::errors::{ApiFailure, CleanError, ErrorClass, call};
use crate::model::AwsClients;
use std::collections::HashSet;

/// The ELB APIs take at most 20 load balancers per Describe (target groups: no documented
/// limit, the same is used).
const BY_ID_CHUNK: usize = 20;

/// The v2 load balancers among `arns` and the classic ones among `names` that exist, each with
/// its VPC: (ARN or name, VPC).
pub async fn load_balancers(
    c: &AwsClients,
    arns: &[String],
    names: &[String],
) -> Result<Vec<(String, Option<String>)>, CleanError> {
    match load_balancers_by_id(c, arns, names).await {
        Ok(found) => Ok(found),
        Err(f) if f.class == ErrorClass::NotFound => {
            tracing::debug!(error = %f, "a load balancer named by discovery is gone: listing the region's instead");
            let mut all = Vec::new();
            if !arns.is_empty() {
                all.extend(describe::v2_listing(c).await?);
            }
            if !names.is_empty() {
                all.extend(describe::classic_listing(c).await?);
            }
            let wanted: HashSet<&String> = arns.iter().chain(names).collect();
            Ok(all
                .into_iter()
                .filter(|l| wanted.contains(&l.id))
                .map(|l| (l.id, l.vpc))
                .collect())
        }
        Err(f) => Err(CleanError::discover(
            "load-balancer",
            "DescribeLoadBalancers",
        )(f)),
    }
}

async fn load_balancers_by_id(
    c: &AwsClients,
    arns: &[String],
    names: &[String],
) -> Result<Vec<(String, Option<String>)>, ApiFailure> {
    let mut out = Vec::new();
    for chunk in arns.chunks(BY_ID_CHUNK) {
        let found = call("elbv2.DescribeLoadBalancers", || {
            c.elbv2
                .describe_load_balancers()
                .set_load_balancer_arns(Some(chunk.to_vec()))
                .send()
        })
        .await?;
        out.extend(found.load_balancers().iter().filter_map(|l| {
            Some((
                l.load_balancer_arn()?.to_string(),
                l.vpc_id().map(str::to_string),
            ))
        }));
    }
    for chunk in names.chunks(BY_ID_CHUNK) {
        let found = call("elb.DescribeLoadBalancers", || {
            c.elb
                .describe_load_balancers()
                .set_load_balancer_names(Some(chunk.to_vec()))
                .send()
        })
        .await?;
        out.extend(found.load_balancer_descriptions().iter().filter_map(|d| {
            Some((
                d.load_balancer_name()?.to_string(),
                d.vpc_id().map(str::to_string),
            ))
        }));
    }
    Ok(out)
}

/// The target groups among `arns` that exist.
pub async fn target_groups(
    c: &AwsClients,
    arns: &[String],
) -> Result<Vec<TargetGroupInfo>, CleanError> {
    match target_groups_by_id(c, arns).await {
        Ok(found) => Ok(found),
        Err(f) if f.class == ErrorClass::NotFound => {
            tracing::debug!(error = %f, "a target group named by discovery is gone: listing the region's instead");
            let wanted: HashSet<&String> = arns.iter().collect();
            Ok(describe::target_groups(c)
                .await?
                .into_iter()
                .filter(|t| wanted.contains(&t.arn))
                .collect())
        }
        Err(f) => Err(CleanError::discover("target-group", "DescribeTargetGroups")(f)),
    }
}

async fn target_groups_by_id(
    c: &AwsClients,
    arns: &[String],
) -> Result<Vec<TargetGroupInfo>, ApiFailure> {
    let mut out = Vec::new();
    for chunk in arns.chunks(BY_ID_CHUNK) {
        let found = call("elbv2.DescribeTargetGroups", || {
            c.elbv2
                .describe_target_groups()
                .set_target_group_arns(Some(chunk.to_vec()))
                .send()
        })
        .await?;
        out.extend(found.target_groups().iter().filter_map(|t| {
            Some(TargetGroupInfo {
                arn: t.target_group_arn()?.to_string(),
                load_balancer_arns: t.load_balancer_arns().to_vec(),
                vpc: t.vpc_id().map(str::to_string),
            })
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::mocked::{self, assert_calls, code, mock};
    use aws_sdk_elasticloadbalancingv2 as elbv2;
    use elbv2::operation::describe_load_balancers::{
        DescribeLoadBalancersError, DescribeLoadBalancersOutput,
    };
    use elbv2::operation::describe_target_groups::{
        DescribeTargetGroupsError, DescribeTargetGroupsOutput,
    };
    use elbv2::types::{LoadBalancer, TargetGroup};

    fn lbs(arns: &[(&str, &str)]) -> DescribeLoadBalancersOutput {
        let mut b = DescribeLoadBalancersOutput::builder();
        for (arn, vpc) in arns {
            b = b.load_balancers(
                LoadBalancer::builder()
                    .load_balancer_arn(*arn)
                    .vpc_id(*vpc)
                    .build(),
            );
        }
        b.build()
    }

    #[tokio::test]
    async fn named_load_balancers_are_described_by_arn_only() {
        let by_arn = mock!(elbv2::Client::describe_load_balancers)
            .match_requests(|r| r.load_balancer_arns() == ["arn:lb/app/a/1"])
            .then_output(|| lbs(&[("arn:lb/app/a/1", "vpc-1")]));
        let c = mocked::in_order(&[&by_arn]);
        let found = load_balancers(&c, &["arn:lb/app/a/1".into()], &[])
            .await
            .unwrap();
        assert_eq!(
            found,
            [("arn:lb/app/a/1".to_string(), Some("vpc-1".to_string()))]
        );
    }

    #[tokio::test]
    async fn one_gone_since_the_scan_falls_back_to_the_regions_listing_narrowed_to_the_named() {
        let by_arn = mock!(elbv2::Client::describe_load_balancers)
            .match_requests(|r| !r.load_balancer_arns().is_empty())
            .then_error(|| DescribeLoadBalancersError::generic(code("LoadBalancerNotFound")));
        let listing = mock!(elbv2::Client::describe_load_balancers)
            .match_requests(|r| r.load_balancer_arns().is_empty())
            .then_output(|| lbs(&[("arn:lb/app/a/1", "vpc-1"), ("arn:lb/app/other/2", "vpc-1")]));
        let c = mocked::in_order(&[&by_arn, &listing]);
        let found = load_balancers(
            &c,
            &["arn:lb/app/a/1".into(), "arn:lb/app/gone/3".into()],
            &[],
        )
        .await
        .unwrap();
        assert_eq!(
            found,
            [("arn:lb/app/a/1".to_string(), Some("vpc-1".to_string()))]
        );
        assert_calls(&listing, 1, "the region's listing");
    }

    #[tokio::test]
    async fn target_groups_fall_back_the_same_way_and_other_errors_fail() {
        let by_arn = mock!(elbv2::Client::describe_target_groups)
            .match_requests(|r| !r.target_group_arns().is_empty())
            .then_error(|| DescribeTargetGroupsError::generic(code("TargetGroupNotFound")));
        let listing = mock!(elbv2::Client::describe_target_groups)
            .match_requests(|r| r.target_group_arns().is_empty())
            .then_output(|| {
                DescribeTargetGroupsOutput::builder()
                    .target_groups(
                        TargetGroup::builder()
                            .target_group_arn("tg-1")
                            .vpc_id("vpc-1")
                            .build(),
                    )
                    .target_groups(TargetGroup::builder().target_group_arn("tg-x").build())
                    .build()
            });
        let denied = mock!(elbv2::Client::describe_target_groups)
            .then_error(|| DescribeTargetGroupsError::generic(code("AccessDenied")));
        let c = mocked::in_order(&[&by_arn, &listing, &denied]);
        let found = target_groups(&c, &["tg-1".into(), "tg-gone".into()])
            .await
            .unwrap();
        assert_eq!(
            found.iter().map(|t| t.arn.as_str()).collect::<Vec<_>>(),
            ["tg-1"]
        );
        let err = target_groups(&c, &["tg-1".into()]).await.unwrap_err();
        assert!(err.to_string().contains("DescribeTargetGroups"), "{err}");
    }
}
