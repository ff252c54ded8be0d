//! The bucket the cluster names for CAPA's bootstrap data: its tags read and quoted in the
//! report, the bucket never deleted (see the module above for the call, `policy::bootstrap_s3`
//! for why).

use super::{BUCKET, never_deleted, s3_arn};
use crate::cleaners::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target};
use crate::errors::{ErrorClass, call};
use crate::policy::Verdict;
use crate::policy::bootstrap_s3::decide_bucket;
use async_trait::async_trait;

/// S3's answer for a bucket without any tag: not an absence of the bucket.
const NO_TAG_SET: &str = "NoSuchTagSet";

pub struct BootstrapBucket;

#[async_trait]
impl Cleaner for BootstrapBucket {
    /// Nothing: the target is report-only.
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &BUCKET
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        // Only the bucket the cluster's object names: never one found by its tags.
        let Some(bucket) = ctx.s3_bucket else {
            return Ok(Vec::new());
        };
        let arn = s3_arn(ctx, bucket, None);
        let res = call("s3.GetBucketTagging", || {
            ctx.clients.s3.get_bucket_tagging().bucket(bucket).send()
        })
        .await;
        let tags: Option<Vec<(String, String)>> = match res {
            Ok(out) => Some(
                out.tag_set()
                    .iter()
                    .map(|t| (t.key().to_string(), t.value().to_string()))
                    .collect(),
            ),
            Err(f) if f.code.as_deref() == Some(NO_TAG_SET) => None,
            // Gone (CAPA's own delete removes it when empty): nothing to report.
            Err(f) if f.class == ErrorClass::NotFound => {
                tracing::debug!(bucket = %arn, "the bucket the cluster names does not exist");
                return Ok(Vec::new());
            }
            // Report-only: a bucket sweeper may not read (its own policy, another account's)
            // is said as such and never holds the teardown, which deletes nothing here anyway.
            Err(source) => {
                let why = format!(
                    "cannot read its tags ({source}); reported, never deleted: check the bucket by hand"
                );
                tracing::warn!(bucket = %arn, %why, "bootstrap bucket unreadable");
                return Ok(vec![Target::plain(arn).kept(why)]);
            }
        };
        let pairs: Option<Vec<(&str, &str)>> = tags
            .as_ref()
            .map(|t| t.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect());
        let verdict = decide_bucket(bucket, pairs.as_deref(), ctx.capa_cluster);
        let Verdict::Keep(why) = verdict else {
            // The rule keeps every bucket; anything else is not this kind's to act on.
            return Ok(Vec::new());
        };
        tracing::info!(bucket = %arn, %why, "reported, kept");
        let mut t = Target::plain(arn).kept(why);
        if let Some(p) = pairs {
            t = t.with_tags(p);
        }
        Ok(vec![t])
    }

    async fn delete(&self, _ctx: &CleanCtx<'_>, _t: &Target) -> Result<Outcome, CleanError> {
        Ok(never_deleted())
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, code, mock};
    use aws_sdk_s3::Client as S3;
    use aws_sdk_s3::operation::get_bucket_tagging::{
        GetBucketTaggingError, GetBucketTaggingOutput,
    };
    use aws_sdk_s3::types::Tag;

    fn cx_with<'a>(c: &'a crate::model::AwsClients, inv: &'a Inventory) -> CleanCtx<'a> {
        CleanCtx {
            s3_bucket: Some("capa-boot"),
            ..ctx(c, inv)
        }
    }

    #[tokio::test]
    async fn the_named_bucket_tagged_for_the_cluster_is_reported_with_its_tags_not_deleted() {
        let tagging = mock!(S3::get_bucket_tagging)
            .match_requests(|r| r.bucket() == Some("capa-boot"))
            .then_output(|| {
                GetBucketTaggingOutput::builder()
                    .tag_set(Tag::builder().key(CAPA_KEY).value("owned").build().unwrap())
                    .build()
                    .unwrap()
            });
        // No other rule: a DeleteBucket would find none and panic.
        let c = mocked::in_order(&[&tagging]);
        let inv = Inventory::default();
        let cx = cx_with(&c, &inv);
        let found = BootstrapBucket.discover(&cx).await.unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, "arn:aws:s3:::capa-boot");
        let why = found[0].kept.as_deref().unwrap_or_default();
        assert!(why.contains("never deleted"), "{why}");
        assert_eq!(
            found[0]
                .tags
                .as_ref()
                .and_then(|t| t.get(CAPA_KEY))
                .map(String::as_str),
            Some("owned"),
            "the audit record quotes the tags"
        );
        assert_eq!(
            BootstrapBucket.delete(&cx, &found[0]).await.unwrap(),
            never_deleted()
        );
    }

    #[tokio::test]
    async fn an_untagged_bucket_is_reported_and_a_gone_one_is_not() {
        let untagged = mock!(S3::get_bucket_tagging)
            .then_error(|| GetBucketTaggingError::generic(code("NoSuchTagSet")));
        let gone = mock!(S3::get_bucket_tagging)
            .then_error(|| GetBucketTaggingError::generic(code("NoSuchBucket")));
        let c = mocked::in_order(&[&untagged, &gone]);
        let inv = Inventory::default();
        let cx = cx_with(&c, &inv);
        let found = BootstrapBucket.discover(&cx).await.unwrap();
        assert_eq!(found.len(), 1);
        assert!(found[0].tags.is_none() && found[0].kept.is_some());
        assert!(BootstrapBucket.discover(&cx).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_bucket_that_cannot_be_read_is_reported_and_holds_nothing() {
        let denied = mock!(S3::get_bucket_tagging)
            .then_error(|| GetBucketTaggingError::generic(code("AccessDenied")));
        let c = mocked::in_order(&[&denied]);
        let inv = Inventory::default();
        let found = BootstrapBucket.discover(&cx_with(&c, &inv)).await.unwrap();
        assert_eq!(found.len(), 1);
        assert!(
            found[0]
                .kept
                .as_deref()
                .is_some_and(|w| w.contains("cannot read its tags")),
            "{:?}",
            found[0].kept
        );
    }

    #[tokio::test]
    async fn no_bucket_named_means_no_call() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        assert!(
            BootstrapBucket
                .discover(&ctx(&c, &inv))
                .await
                .unwrap()
                .is_empty()
        );
    }
}
