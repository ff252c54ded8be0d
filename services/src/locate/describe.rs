//! Tag locating through Describe calls (all pages, tags fetched 20 at a time in bulk), for what the
//! tagging API does not cover or when the tagging API is not to be trusted (alternative
//! discovery, `--alternative-discovery`). Every page goes through the same short retry as the deletes.

use super::tags;
use crate::errors::{CleanError, call};
use crate::model::AwsClients;

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
    /// The VPC it lives in, where the Describe call says.
    pub vpc: Option<String>,
}

impl Tagged {
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.tags.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// A load balancer as the region's listing shows it: classic name or v2 ARN, VPC, DNS name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedLb {
    pub id: String,
    pub vpc: Option<String>,
    pub dns: Option<String>,
}

/// Every classic load balancer of the account/region, with tags.
pub async fn classic_load_balancers(c: &AwsClients) -> Result<Vec<Tagged>, CleanError> {
    classic_tagged(c, &classic_listing(c).await?).await
}

/// The tags of `listed` (the region's classic load balancers, as [`classic_listing`] listed
/// them), 20 names per call.
pub async fn classic_tagged(
    c: &AwsClients,
    listed: &[ListedLb],
) -> Result<Vec<Tagged>, CleanError> {
    let vpc_of: std::collections::HashMap<&str, Option<String>> = listed
        .iter()
        .map(|l| (l.id.as_str(), l.vpc.clone()))
        .collect();
    let names: Vec<String> = listed.iter().map(|l| l.id.clone()).collect();
    let mut out = Vec::with_capacity(names.len());
    for chunk in names.chunks(TAGS_CHUNK) {
        let tags = call("elb.DescribeTags", || {
            c.elb
                .describe_tags()
                .set_load_balancer_names(Some(chunk.to_vec()))
                .send()
        })
        .await
        .map_err(CleanError::discover("load-balancer", "DescribeTags"))?;
        for d in tags.tag_descriptions() {
            let Some(name) = d.load_balancer_name() else {
                continue;
            };
            out.push(Tagged {
                id: name.to_string(),
                vpc: vpc_of.get(name).cloned().flatten(),
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

/// Every classic load balancer of the account/region, all pages.
pub async fn classic_listing(c: &AwsClients) -> Result<Vec<ListedLb>, CleanError> {
    all_pages(|marker| async move {
        let page = call("elb.DescribeLoadBalancers", || {
            c.elb
                .describe_load_balancers()
                .page_size(ELB_PAGE)
                .set_marker(marker.clone())
                .send()
        })
        .await
        .map_err(CleanError::discover(
            "load-balancer",
            "DescribeLoadBalancers",
        ))?;
        let names = page
            .load_balancer_descriptions()
            .iter()
            .filter_map(|d| {
                Some(ListedLb {
                    id: d.load_balancer_name()?.to_string(),
                    vpc: d.vpc_id().map(str::to_string),
                    dns: d.dns_name().map(str::to_string),
                })
            })
            .collect();
        Ok((names, page.next_marker().map(str::to_string)))
    })
    .await
}

/// Every v2 (application, network, gateway) load balancer ARN, with tags and VPC.
pub async fn v2_load_balancers(c: &AwsClients) -> Result<Vec<Tagged>, CleanError> {
    v2_tagged(c, &v2_listing(c).await?).await
}

/// The tags of `listed` (the region's v2 load balancers, as [`v2_listing`] listed them), with
/// their VPC.
pub async fn v2_tagged(c: &AwsClients, listed: &[ListedLb]) -> Result<Vec<Tagged>, CleanError> {
    let vpc_of: std::collections::HashMap<&str, Option<String>> = listed
        .iter()
        .map(|l| (l.id.as_str(), l.vpc.clone()))
        .collect();
    let arns = listed.iter().map(|l| l.id.clone()).collect();
    let mut out = v2_tags(c, arns, "load-balancer").await?;
    for t in &mut out {
        t.vpc = vpc_of.get(t.id.as_str()).cloned().flatten();
    }
    Ok(out)
}

/// Every v2 load balancer of the account/region, all pages.
pub async fn v2_listing(c: &AwsClients) -> Result<Vec<ListedLb>, CleanError> {
    all_pages(|marker| async move {
        let page = call("elbv2.DescribeLoadBalancers", || {
            c.elbv2
                .describe_load_balancers()
                .page_size(ELB_PAGE)
                .set_marker(marker.clone())
                .send()
        })
        .await
        .map_err(CleanError::discover(
            "load-balancer",
            "DescribeLoadBalancers",
        ))?;
        let arns = page
            .load_balancers()
            .iter()
            .filter_map(|l| {
                Some(ListedLb {
                    id: l.load_balancer_arn()?.to_string(),
                    vpc: l.vpc_id().map(str::to_string),
                    dns: l.dns_name().map(str::to_string),
                })
            })
            .collect();
        Ok((arns, page.next_marker().map(str::to_string)))
    })
    .await
}

/// A v2 target group: its ARN and the load balancers still using it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetGroupInfo {
    pub arn: String,
    pub load_balancer_arns: Vec<String>,
    pub vpc: Option<String>,
}

/// Every target group of the account/region, in bulk (one call per 400).
pub async fn target_groups(c: &AwsClients) -> Result<Vec<TargetGroupInfo>, CleanError> {
    all_pages(|marker| async move {
        let page = call("elbv2.DescribeTargetGroups", || {
            c.elbv2
                .describe_target_groups()
                .page_size(ELB_PAGE)
                .set_marker(marker.clone())
                .send()
        })
        .await
        .map_err(CleanError::discover("target-group", "DescribeTargetGroups"))?;
        let groups = page
            .target_groups()
            .iter()
            .filter_map(|t| {
                Some(TargetGroupInfo {
                    arn: t.target_group_arn()?.to_string(),
                    load_balancer_arns: t.load_balancer_arns().to_vec(),
                    vpc: t.vpc_id().map(str::to_string),
                })
            })
            .collect();
        Ok((groups, page.next_marker().map(str::to_string)))
    })
    .await
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
        .map_err(CleanError::discover(kind, "DescribeTags"))?;
        for d in tags.tag_descriptions() {
            let Some(arn) = d.resource_arn() else {
                continue;
            };
            out.push(Tagged {
                id: arn.to_string(),
                vpc: None,
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
    let filters = &filters;
    all_pages(|token| async move {
        let page = call("ec2.DescribeSecurityGroups", || {
            c.ec2
                .describe_security_groups()
                .set_filters(Some(filters.clone()))
                .max_results(1000)
                .set_next_token(token.clone())
                .send()
        })
        .await
        .map_err(CleanError::discover(
            "security-group",
            "DescribeSecurityGroups",
        ))?;
        Ok((
            page.security_groups().to_vec(),
            page.next_token().map(str::to_string),
        ))
    })
    .await
}

/// Detached (`available`) network interfaces matching `filters`, all pages: the only ones any
/// caller wants (an attached interface goes with its instance or load balancer).
pub async fn detached_network_interfaces(
    c: &AwsClients,
    mut filters: Vec<aws_sdk_ec2::types::Filter>,
) -> Result<Vec<aws_sdk_ec2::types::NetworkInterface>, CleanError> {
    filters.push(tags::ec2_filter(
        "status",
        &[crate::policy::network_interfaces::DETACHED.to_string()],
    ));
    let filters = &filters;
    all_pages(|token| async move {
        let page = call("ec2.DescribeNetworkInterfaces", || {
            c.ec2
                .describe_network_interfaces()
                .set_filters(Some(filters.clone()))
                .max_results(1000)
                .set_next_token(token.clone())
                .send()
        })
        .await
        .map_err(CleanError::discover(
            "network-interface",
            "DescribeNetworkInterfaces",
        ))?;
        Ok((
            page.network_interfaces().to_vec(),
            page.next_token().map(str::to_string),
        ))
    })
    .await
}

/// Reads every page of a Describe call paged by marker or token: `page(next)` fetches one page and
/// returns its items and the next marker; an absent or empty marker ends the listing. Any error
/// type: the cleaners' `CleanError`, the scan's `ApiFailure`.
pub(crate) async fn all_pages<T, E, F, Fut>(mut page: F) -> Result<Vec<T>, E>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<String>), E>>,
{
    let mut out = Vec::new();
    let mut next = None;
    loop {
        // Boxed: the page future's type nests inside every caller's future, and unboxed it took
        // the controller's reconcile future past the compiler's type-depth limit.
        let (items, marker) = Box::pin(page(next.take())).await?;
        out.extend(items);
        next = marker.filter(|m| !m.is_empty());
        if next.is_none() {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::mocked::{self, assert_calls, filter_is, mock};
    use aws_sdk_elasticloadbalancing as elb;
    use aws_sdk_elasticloadbalancingv2 as elbv2;

    #[tokio::test]
    async fn classic_tags_are_read_twenty_names_at_a_time_after_every_page() {
        let names: Vec<String> = (0..25).map(|i| format!("lb-{i:02}")).collect();
        let (first, rest) = names.split_at(10);
        let page = |names: &[String], marker: Option<&str>| {
            let mut b =
                elb::operation::describe_load_balancers::DescribeLoadBalancersOutput::builder()
                    .set_next_marker(marker.map(str::to_string));
            for n in names {
                b = b.load_balancer_descriptions(
                    elb::types::LoadBalancerDescription::builder()
                        .load_balancer_name(n)
                        .vpc_id("vpc-1")
                        .build(),
                );
            }
            b.build()
        };
        let (first, rest) = (first.to_vec(), rest.to_vec());
        let page1 = mock!(elb::Client::describe_load_balancers)
            .match_requests(|r| r.marker().is_none() && r.page_size() == Some(ELB_PAGE))
            .then_output(move || page(&first, Some("m2")));
        let page2 = mock!(elb::Client::describe_load_balancers)
            .match_requests(|r| r.marker() == Some("m2"))
            .then_output(move || page(&rest, None));
        let tags = |expect: Vec<String>| {
            mock!(elb::Client::describe_tags)
                .match_requests(move |r| r.load_balancer_names() == expect.as_slice())
                .then_output(|| {
                    elb::operation::describe_tags::DescribeTagsOutput::builder()
                        .tag_descriptions(
                            elb::types::TagDescription::builder()
                                .load_balancer_name("lb-00")
                                .tags(
                                    elb::types::Tag::builder()
                                        .key("k")
                                        .value("v")
                                        .build()
                                        .unwrap(),
                                )
                                .build(),
                        )
                        .build()
                })
        };
        let tags1 = tags(names[..20].to_vec());
        let tags2 = tags(names[20..].to_vec());
        let c = mocked::in_order(&[&page1, &page2, &tags1, &tags2]);
        let found = classic_load_balancers(&c).await.unwrap();
        assert_calls(&tags2, 1, "DescribeTags for the last 5");
        assert_eq!(found.len(), 2, "one tag description per answer");
        assert_eq!(found[0].vpc.as_deref(), Some("vpc-1"));
        assert_eq!(found[0].tags, [("k".to_string(), "v".to_string())]);
    }

    #[tokio::test]
    async fn v2_load_balancers_get_their_tags_and_vpc() {
        let list = mock!(elbv2::Client::describe_load_balancers).then_output(|| {
            elbv2::operation::describe_load_balancers::DescribeLoadBalancersOutput::builder()
                .load_balancers(
                    elbv2::types::LoadBalancer::builder()
                        .load_balancer_arn("arn:lb/app/a/1")
                        .vpc_id("vpc-1")
                        .build(),
                )
                .build()
        });
        let tags = mock!(elbv2::Client::describe_tags)
            .match_requests(|r| r.resource_arns() == ["arn:lb/app/a/1"])
            .then_output(|| {
                elbv2::operation::describe_tags::DescribeTagsOutput::builder()
                    .tag_descriptions(
                        elbv2::types::TagDescription::builder()
                            .resource_arn("arn:lb/app/a/1")
                            .tags(elbv2::types::Tag::builder().key("k").value("v").build())
                            .build(),
                    )
                    .build()
            });
        let c = mocked::in_order(&[&list, &tags]);
        let found = v2_load_balancers(&c).await.unwrap();
        assert_eq!(
            found,
            [Tagged {
                id: "arn:lb/app/a/1".into(),
                tags: vec![("k".into(), "v".into())],
                vpc: Some("vpc-1".into()),
            }]
        );
    }

    #[tokio::test]
    async fn only_detached_interfaces_are_ever_asked_for_on_every_page() {
        let page1 = mock!(aws_sdk_ec2::Client::describe_network_interfaces)
            .match_requests(|r| {
                filter_is(r.filters(), "vpc-id", &["vpc-1"])
                    && filter_is(r.filters(), "status", &["available"])
                    && r.next_token().is_none()
            })
            .then_output(|| {
                aws_sdk_ec2::operation::describe_network_interfaces::DescribeNetworkInterfacesOutput::builder()
                    .network_interfaces(
                        aws_sdk_ec2::types::NetworkInterface::builder()
                            .network_interface_id("eni-1")
                            .build(),
                    )
                    .next_token("t2")
                    .build()
            });
        let page2 = mock!(aws_sdk_ec2::Client::describe_network_interfaces)
            .match_requests(|r| {
                r.next_token() == Some("t2") && filter_is(r.filters(), "status", &["available"])
            })
            .then_output(|| {
                aws_sdk_ec2::operation::describe_network_interfaces::DescribeNetworkInterfacesOutput::builder()
                    .build()
            });
        let c = mocked::in_order(&[&page1, &page2]);
        let found =
            detached_network_interfaces(&c, vec![tags::ec2_filter("vpc-id", &["vpc-1".into()])])
                .await
                .unwrap();
        assert_eq!(found.len(), 1);
        assert_calls(&page2, 1, "DescribeNetworkInterfaces page 2");
    }
}
