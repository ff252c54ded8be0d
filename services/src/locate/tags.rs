//! EC2 describe filters and tag pairs as locating reads them. The keys that decide ownership are
//! the policy's (`policy::tags`), re-exported here so a filter and the rule it mirrors name the
//! same key.

pub use crate::policy::tags::*;

/// An EC2 describe filter on a tag value.
pub fn ec2_tag_filter(key: &str, value: &str) -> aws_sdk_ec2::types::Filter {
    aws_sdk_ec2::types::Filter::builder()
        .name(format!("tag:{key}"))
        .values(value)
        .build()
}

/// An EC2 describe filter.
pub fn ec2_filter(name: &str, values: &[String]) -> aws_sdk_ec2::types::Filter {
    aws_sdk_ec2::types::Filter::builder()
        .name(name)
        .set_values(Some(values.to_vec()))
        .build()
}

/// (key, value) pairs of EC2 tags.
pub fn ec2_pairs(tags: &[aws_sdk_ec2::types::Tag]) -> impl Iterator<Item = (&str, &str)> {
    tags.iter()
        .map(|t| (t.key().unwrap_or_default(), t.value().unwrap_or_default()))
}
