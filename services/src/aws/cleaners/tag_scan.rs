//! Tag discovery through Describe calls (all pages, tags fetched 20 at a time in bulk), for what the
//! tagging API does not cover or when the tagging API is not to be trusted (alternative
//! discovery). Every page goes through the same short retry as the deletes.

use super::CleanError;
use crate::aws::errors::call;
use crate::aws::teardown::AwsClients;

/// DescribeTags accepts at most 20 names/ARNs per call in both ELB APIs.
const TAGS_CHUNK: usize = 20;
/// The largest page both ELB APIs allow.
const ELB_PAGE: i32 = 400;

/// A resource with its tags as (key, value) pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tagged {
    /// Classic load balancer name, or v2 load balancer / target group ARN.
    pub id: String,
    pub tags: Vec<(String, String)>,
}

impl Tagged {
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.tags.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

fn discover_err(
    kind: &'static str,
    op: &'static str,
) -> impl Fn(crate::aws::errors::ApiFailure) -> CleanError {
    move |source| CleanError::Discover { kind, op, source }
}

/// Every classic load balancer of the account/region, with tags.
pub async fn classic_load_balancers(c: &AwsClients) -> Result<Vec<Tagged>, CleanError> {
    let mut names = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let page = call("elb.DescribeLoadBalancers", || {
            c.elb
                .describe_load_balancers()
                .page_size(ELB_PAGE)
                .set_marker(marker.clone())
                .send()
        })
        .await
        .map_err(discover_err("load-balancer", "DescribeLoadBalancers"))?;
        names.extend(
            page.load_balancer_descriptions()
                .iter()
                .filter_map(|d| d.load_balancer_name().map(str::to_string)),
        );
        marker = page
            .next_marker()
            .filter(|m| !m.is_empty())
            .map(str::to_string);
        if marker.is_none() {
            break;
        }
    }
    let mut out = Vec::with_capacity(names.len());
    for chunk in names.chunks(TAGS_CHUNK) {
        let tags = call("elb.DescribeTags", || {
            c.elb
                .describe_tags()
                .set_load_balancer_names(Some(chunk.to_vec()))
                .send()
        })
        .await
        .map_err(discover_err("load-balancer", "DescribeTags"))?;
        for d in tags.tag_descriptions() {
            let Some(name) = d.load_balancer_name() else {
                continue;
            };
            out.push(Tagged {
                id: name.to_string(),
                tags: d
                    .tags()
                    .iter()
                    .map(|t| {
                        (
                            t.key().to_string(),
                            t.value().unwrap_or_default().to_string(),
                        )
                    })
                    .collect(),
            });
        }
    }
    Ok(out)
}

/// Every v2 (application, network, gateway) load balancer ARN, with tags.
pub async fn v2_load_balancers(c: &AwsClients) -> Result<Vec<Tagged>, CleanError> {
    let arns = v2_load_balancer_arns(c).await?;
    v2_tags(c, arns, "load-balancer").await
}

/// Every v2 load balancer ARN, without tags.
pub async fn v2_load_balancer_arns(c: &AwsClients) -> Result<Vec<String>, CleanError> {
    let mut arns = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let page = call("elbv2.DescribeLoadBalancers", || {
            c.elbv2
                .describe_load_balancers()
                .page_size(ELB_PAGE)
                .set_marker(marker.clone())
                .send()
        })
        .await
        .map_err(discover_err("load-balancer", "DescribeLoadBalancers"))?;
        arns.extend(
            page.load_balancers()
                .iter()
                .filter_map(|l| l.load_balancer_arn().map(str::to_string)),
        );
        marker = page
            .next_marker()
            .filter(|m| !m.is_empty())
            .map(str::to_string);
        if marker.is_none() {
            break;
        }
    }
    Ok(arns)
}

/// A v2 target group: its ARN and the load balancers still using it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetGroupInfo {
    pub arn: String,
    pub load_balancer_arns: Vec<String>,
}

/// Every target group of the account/region, in bulk (one call per 400).
pub async fn target_groups(c: &AwsClients) -> Result<Vec<TargetGroupInfo>, CleanError> {
    let mut out = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let page = call("elbv2.DescribeTargetGroups", || {
            c.elbv2
                .describe_target_groups()
                .page_size(ELB_PAGE)
                .set_marker(marker.clone())
                .send()
        })
        .await
        .map_err(discover_err("target-group", "DescribeTargetGroups"))?;
        out.extend(page.target_groups().iter().filter_map(|t| {
            Some(TargetGroupInfo {
                arn: t.target_group_arn()?.to_string(),
                load_balancer_arns: t.load_balancer_arns().to_vec(),
            })
        }));
        marker = page
            .next_marker()
            .filter(|m| !m.is_empty())
            .map(str::to_string);
        if marker.is_none() {
            break;
        }
    }
    Ok(out)
}

/// Tags of v2 resources (load balancers or target groups), 20 ARNs per call.
pub async fn v2_tags(
    c: &AwsClients,
    arns: Vec<String>,
    kind: &'static str,
) -> Result<Vec<Tagged>, CleanError> {
    let mut out = Vec::with_capacity(arns.len());
    for chunk in arns.chunks(TAGS_CHUNK) {
        let tags = call("elbv2.DescribeTags", || {
            c.elbv2
                .describe_tags()
                .set_resource_arns(Some(chunk.to_vec()))
                .send()
        })
        .await
        .map_err(discover_err(kind, "DescribeTags"))?;
        for d in tags.tag_descriptions() {
            let Some(arn) = d.resource_arn() else {
                continue;
            };
            out.push(Tagged {
                id: arn.to_string(),
                tags: d
                    .tags()
                    .iter()
                    .map(|t| {
                        (
                            t.key().unwrap_or_default().to_string(),
                            t.value().unwrap_or_default().to_string(),
                        )
                    })
                    .collect(),
            });
        }
    }
    Ok(out)
}

/// Security groups matching `filters`, all pages.
pub async fn security_groups(
    c: &AwsClients,
    filters: Vec<aws_sdk_ec2::types::Filter>,
) -> Result<Vec<aws_sdk_ec2::types::SecurityGroup>, CleanError> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = call("ec2.DescribeSecurityGroups", || {
            c.ec2
                .describe_security_groups()
                .set_filters(Some(filters.clone()))
                .max_results(1000)
                .set_next_token(token.clone())
                .send()
        })
        .await
        .map_err(discover_err("security-group", "DescribeSecurityGroups"))?;
        out.extend(page.security_groups().iter().cloned());
        token = page
            .next_token()
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    Ok(out)
}
