//! Locating through the Resource Groups Tagging API. Reads ALL pages (CAPA's gc service read only
//! the first one and leaked the rest); an ARN that doesn't parse is returned as a failure beside
//! the good ones rather than aborting locating or being guessed at.

use crate::arn::{Arn, ArnError};
use crate::errors::{ApiFailure, FailureKind, call};
use aws_sdk_resourcegroupstagging::Client;
use aws_sdk_resourcegroupstagging::types::TagFilter;
use std::collections::BTreeMap;

/// One resource the tagging API returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaggedResource {
    pub arn: Arn,
    pub tags: BTreeMap<String, String>,
}

/// The largest page GetResources allows (`ResourcesPerPage`). Without it the service chooses,
/// and may answer a large cluster in twice as many pages, each one more sequential round trip.
pub const MAX_PAGE: i32 = 100;

#[derive(Debug, Default)]
pub struct TaggedResources {
    pub resources: Vec<TaggedResource>,
    /// ARNs the API returned that could not be parsed; reported, never deleted.
    pub malformed: Vec<ArnError>,
    /// Pages read, for metrics and the API-call budget.
    pub pages: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum TaggingError {
    #[error("tagging API GetResources for tag {key}={values:?} failed: {source}")]
    GetResources {
        key: String,
        values: Vec<String>,
        source: ApiFailure,
    },
    #[error("tagging API GetResources (every tagged resource) failed: {source}")]
    GetEvery { source: ApiFailure },
}

impl TaggingError {
    pub fn kind(&self) -> FailureKind {
        match self {
            TaggingError::GetResources { source, .. } | TaggingError::GetEvery { source } => {
                source.kind
            }
        }
    }
}

/// Every resource carrying tag `key` with one of `values`, across all pages.
/// `page_size` (1..=100) is mostly for tests; `None` lets the service choose.
pub async fn resources_with_tag(
    client: &Client,
    key: &str,
    values: &[&str],
    page_size: Option<i32>,
) -> Result<TaggedResources, TaggingError> {
    resources_of_types_with_tag(client, &[], key, values, page_size).await
}

/// [`resources_with_tag`], of the resource `types` only (`service:type`, as the API's
/// `ResourceTypeFilters`; empty: every type). The service then reads only those types'
/// resources instead of every tagged resource of the account and region.
pub async fn resources_of_types_with_tag(
    client: &Client,
    types: &[&str],
    key: &str,
    values: &[&str],
    page_size: Option<i32>,
) -> Result<TaggedResources, TaggingError> {
    let types: Option<Vec<String>> =
        (!types.is_empty()).then(|| types.iter().map(|t| t.to_string()).collect());
    let filter = TagFilter::builder()
        .key(key)
        .set_values(Some(values.iter().map(|v| v.to_string()).collect()))
        .build();
    read_pages(client, types, Some(filter), page_size)
        .await
        .map_err(|e| TaggingError::GetResources {
            key: key.to_string(),
            values: values.iter().map(|v| v.to_string()).collect(),
            source: e,
        })
}

/// Every resource of the session's account and region that carries a tag, across all pages:
/// the leak scan's one listing. Its ownership tags have a cluster name in the key, which the
/// API cannot filter on (a key filter is exact, and several filters are ANDed), so the tags are
/// read here and judged by the caller.
pub async fn every_tagged_resource(
    client: &Client,
    page_size: Option<i32>,
) -> Result<TaggedResources, TaggingError> {
    read_pages(client, None, None, page_size)
        .await
        .map_err(|source| TaggingError::GetEvery { source })
}

async fn read_pages(
    client: &Client,
    types: Option<Vec<String>>,
    filter: Option<TagFilter>,
    page_size: Option<i32>,
) -> Result<TaggedResources, ApiFailure> {
    let mut out = TaggedResources::default();
    let mut token: Option<String> = None;
    loop {
        // Page by page through the shared retry, so one throttled page does not fail locating.
        let page = call("tagging.GetResources", || {
            client
                .get_resources()
                .set_tag_filters(filter.clone().map(|f| vec![f]))
                .set_resource_type_filters(types.clone())
                .set_resources_per_page(page_size)
                .set_pagination_token(token.clone())
                .send()
        })
        .await?;
        out.pages += 1;
        token = page
            .pagination_token()
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        for mapping in page.resource_tag_mapping_list.unwrap_or_default() {
            let Some(raw) = mapping.resource_arn else {
                continue;
            };
            let tags = mapping
                .tags
                .unwrap_or_default()
                .into_iter()
                .map(|t| (t.key, t.value))
                .collect();
            match raw.parse::<Arn>() {
                Ok(arn) => out.resources.push(TaggedResource { arn, tags }),
                Err(e) => {
                    tracing::warn!(arn = %raw, error = %e, "tagging API returned a malformed ARN; it will not be touched");
                    out.malformed.push(e);
                }
            }
        }
        if token.is_none() {
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::mocked::{self, assert_calls, code, mock};
    use aws_sdk_resourcegroupstagging::operation::get_resources::{
        GetResourcesError, GetResourcesOutput,
    };
    use aws_sdk_resourcegroupstagging::types::{ResourceTagMapping, Tag};

    fn mapping(arn: &str) -> ResourceTagMapping {
        ResourceTagMapping::builder()
            .resource_arn(arn)
            .tags(
                Tag::builder()
                    .key("kubernetes.io/cluster/c1")
                    .value("owned")
                    .build()
                    .unwrap(),
            )
            .build()
    }

    #[tokio::test]
    async fn every_page_is_read_with_the_tag_and_type_filters_and_bad_arns_set_apart() {
        let first = mock!(Client::get_resources)
            .match_requests(|r| {
                let f = r.tag_filters();
                f.len() == 1
                    && f[0].key() == Some("kubernetes.io/cluster/c1")
                    && f[0].values() == ["owned"]
                    && r.resource_type_filters() == ["ec2:security-group"]
                    && r.resources_per_page() == Some(MAX_PAGE)
                    && r.pagination_token().is_none()
            })
            .then_output(|| {
                GetResourcesOutput::builder()
                    .resource_tag_mapping_list(mapping(
                        "arn:aws:ec2:us-east-1:0:security-group/sg-1",
                    ))
                    .resource_tag_mapping_list(mapping("not-an-arn"))
                    .pagination_token("page-2")
                    .build()
            });
        // The service ends the listing with an empty token, not an absent one.
        let second = mock!(Client::get_resources)
            .match_requests(|r| r.pagination_token() == Some("page-2"))
            .then_output(|| {
                GetResourcesOutput::builder()
                    .resource_tag_mapping_list(mapping(
                        "arn:aws:ec2:us-east-1:0:security-group/sg-2",
                    ))
                    .pagination_token("")
                    .build()
            });
        let c = mocked::in_order(&[&first, &second]);
        let found = resources_of_types_with_tag(
            &c.tagging,
            &["ec2:security-group"],
            "kubernetes.io/cluster/c1",
            &["owned"],
            Some(MAX_PAGE),
        )
        .await
        .unwrap();
        assert_eq!(found.pages, 2);
        assert_eq!(
            found
                .resources
                .iter()
                .map(|r| r.arn.resource_id())
                .collect::<Vec<_>>(),
            ["sg-1", "sg-2"]
        );
        assert_eq!(found.resources[0].tags["kubernetes.io/cluster/c1"], "owned");
        assert_eq!(found.malformed.len(), 1, "reported, never deleted");
        assert_calls(&second, 1, "GetResources page 2");
    }

    #[tokio::test]
    async fn a_failed_page_fails_the_scan_naming_the_tag() {
        let denied = mock!(Client::get_resources)
            .then_error(|| GetResourcesError::generic(code("AccessDeniedException")));
        let c = mocked::in_order(&[&denied]);
        let err = resources_with_tag(&c.tagging, "kubernetes.io/cluster/c1", &["owned"], None)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("kubernetes.io/cluster/c1"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_failed_page_keeps_its_kind() {
        let expired = mock!(Client::get_resources)
            .then_error(|| GetResourcesError::generic(code("ExpiredTokenException")));
        let c = mocked::in_order(&[&expired]);
        let err = resources_with_tag(&c.tagging, "kubernetes.io/cluster/c1", &["owned"], None)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), FailureKind::Credential, "{err}");
    }
}
