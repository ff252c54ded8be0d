//! Discovery through the Resource Groups Tagging API. Reads ALL pages (CAPA's gc service read only
//! the first one and leaked the rest); an ARN that doesn't parse is returned as a failure beside
//! the good ones rather than aborting discovery or being guessed at.

use crate::aws::arn::{Arn, ArnError};
use crate::aws::errors::call;
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
    #[error("tagging API GetResources for tag {key}={values:?} failed: {message}")]
    GetResources {
        key: String,
        values: Vec<String>,
        message: String,
    },
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
    let mut out = TaggedResources::default();
    let mut token: Option<String> = None;
    loop {
        // Page by page through the shared retry, so one throttled page does not fail discovery.
        let page = call("tagging.GetResources", || {
            client
                .get_resources()
                .tag_filters(filter.clone())
                .set_resource_type_filters(types.clone())
                .set_resources_per_page(page_size)
                .set_pagination_token(token.clone())
                .send()
        })
        .await
        .map_err(|e| TaggingError::GetResources {
            key: key.to_string(),
            values: values.iter().map(|v| v.to_string()).collect(),
            message: e.to_string(),
        })?;
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
