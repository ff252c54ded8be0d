//! CAPA's bootstrap objects in the bucket the cluster names: listed under CAPA's three prefixes
//! and reported, never deleted (see the module above for the calls, `policy::bootstrap_s3` for
//! why).

use super::{OBJECTS, never_deleted, s3_arn};
use crate::cleaners::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target};
use crate::errors::{ErrorClass, call};
use crate::locate::describe;
use crate::policy::Verdict;
use crate::policy::bootstrap_s3::{PREFIXES, decide_object};
use async_trait::async_trait;
use tracing::Instrument;

/// ListObjectsV2's page size limit.
const KEYS_PER_PAGE: i32 = 1000;

pub struct BootstrapObjects;

#[async_trait]
impl Cleaner for BootstrapObjects {
    /// Nothing: the targets are report-only.
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &OBJECTS
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target>, CleanError> {
        // No bucket named, nothing to look at: a bucket is never found by its tags.
        let Some(bucket) = ctx.s3_bucket else {
            return Ok(Vec::new());
        };
        let arn = s3_arn(ctx, bucket, None);
        let span = tracing::info_span!("bootstrap_objects", bucket = %arn);
        let mut out = Vec::new();
        for prefix in PREFIXES {
            let listed = match keys_under(ctx, bucket, &arn, prefix)
                .instrument(span.clone())
                .await
            {
                Ok(l) => l,
                // Report-only: an unreadable bucket (its own policy, another account's) is said
                // as such and never holds the teardown, which deletes nothing here anyway.
                Err(e) => {
                    let why = format!(
                        "cannot list it ({e}); reported, never deleted: check the bucket by hand"
                    );
                    tracing::warn!(parent: &span, %why, "bootstrap bucket unreadable");
                    out.push(Target::plain(arn.clone()).kept(why));
                    break;
                }
            };
            match listed {
                Some(keys) => {
                    for key in keys {
                        if let Verdict::Keep(why) = decide_object(bucket, &key) {
                            let id = s3_arn(ctx, bucket, Some(&key));
                            tracing::info!(parent: &span, %id, %why, "CAPA's layout: reported, kept");
                            out.push(Target::plain(id).kept(why));
                        }
                    }
                }
                // Gone: CAPA's own delete (or a person) removed it; nothing left to report.
                None => {
                    tracing::debug!(parent: &span, "the bucket the cluster names does not exist");
                    return Ok(Vec::new());
                }
            }
        }
        Ok(out)
    }

    async fn delete(&self, _ctx: &CleanCtx<'_>, _t: &Target) -> Result<Outcome, CleanError> {
        Ok(never_deleted())
    }
}

/// Every key under `prefix` in `bucket` (all pages); `None` when the bucket does not exist.
async fn keys_under(
    ctx: &CleanCtx<'_>,
    bucket: &str,
    arn: &str,
    prefix: &str,
) -> Result<Option<Vec<String>>, CleanError> {
    use std::sync::atomic::{AtomicBool, Ordering};
    // Set by the page that finds no bucket (the listing then ends): an atomic because the page
    // futures must be Send.
    let missing = AtomicBool::new(false);
    let missing = &missing;
    let keys = describe::all_pages(|token| async move {
        let res = call("s3.ListObjectsV2", || {
            ctx.clients
                .s3
                .list_objects_v2()
                .bucket(bucket)
                .prefix(prefix)
                .max_keys(KEYS_PER_PAGE)
                .set_continuation_token(token.clone())
                .send()
        })
        .await;
        let page = match res {
            Ok(p) => p,
            Err(f) if f.class == ErrorClass::NotFound => {
                missing.store(true, Ordering::Relaxed);
                return Ok((Vec::new(), None));
            }
            Err(source) => {
                return Err(CleanError::Api {
                    kind: OBJECTS.kind,
                    id: arn.to_string(),
                    op: "ListObjectsV2",
                    source,
                });
            }
        };
        let keys: Vec<String> = page
            .contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_string))
            .collect();
        // Another page only while S3 says the listing is truncated.
        let next = page
            .next_continuation_token()
            .filter(|_| page.is_truncated() == Some(true))
            .map(str::to_string);
        Ok((keys, next))
    })
    .await?;
    Ok((!missing.load(Ordering::Relaxed)).then_some(keys))
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, code, mock};
    use aws_sdk_s3::Client as S3;
    use aws_sdk_s3::operation::list_objects_v2::{ListObjectsV2Error, ListObjectsV2Output};
    use aws_sdk_s3::types::Object;

    const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn page(keys: &[&str], next: Option<&str>) -> ListObjectsV2Output {
        let mut b = ListObjectsV2Output::builder()
            .is_truncated(next.is_some())
            .set_next_continuation_token(next.map(str::to_string));
        for k in keys {
            b = b.contents(Object::builder().key(*k).build());
        }
        b.build()
    }

    #[tokio::test]
    async fn capas_objects_in_the_named_bucket_are_reported_and_nothing_is_deleted() {
        let cp = mock!(S3::list_objects_v2)
            .match_requests(|r| {
                r.bucket() == Some("capa-boot")
                    && r.prefix() == Some("control-plane/")
                    && r.continuation_token().is_none()
            })
            .then_output(|| page(&["control-plane/c1-cp-abcde"], Some("t1")));
        let cp2 = mock!(S3::list_objects_v2)
            .match_requests(|r| {
                r.prefix() == Some("control-plane/") && r.continuation_token() == Some("t1")
            })
            .then_output(|| page(&["control-plane/c1-cp-fghij"], None));
        let node = mock!(S3::list_objects_v2)
            .match_requests(|r| r.prefix() == Some("node/"))
            // Another cluster's machine in the same bucket looks the same: reported too.
            .then_output(|| page(&["node/c2-md-0-x1", "node/nested/key"], None));
        let pool = mock!(S3::list_objects_v2)
            .match_requests(|r| r.prefix() == Some("machine-pool/"))
            .then_output(|| page(&[&format!("machine-pool/c1-mp-0/{HASH}")], None));
        // No other rule: a DeleteObject(s) or DeleteBucket would find none and panic.
        let c = mocked::in_order(&[&cp, &cp2, &node, &pool]);
        let inv = Inventory::default();
        let cx = CleanCtx {
            s3_bucket: Some("capa-boot"),
            ..ctx(&c, &inv)
        };
        let found = BootstrapObjects.discover(&cx).await.unwrap();
        let ids: Vec<&str> = found.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "arn:aws:s3:::capa-boot/control-plane/c1-cp-abcde",
                "arn:aws:s3:::capa-boot/control-plane/c1-cp-fghij",
                "arn:aws:s3:::capa-boot/node/c2-md-0-x1",
                &format!("arn:aws:s3:::capa-boot/machine-pool/c1-mp-0/{HASH}"),
            ]
        );
        assert!(found.iter().all(|t| t.kept.is_some()), "{found:?}");
        assert_eq!(
            BootstrapObjects.delete(&cx, &found[0]).await.unwrap(),
            never_deleted(),
            "no call"
        );
    }

    #[tokio::test]
    async fn no_bucket_named_means_no_call() {
        let c = mocked::no_calls();
        let inv = Inventory::default();
        let found = BootstrapObjects.discover(&ctx(&c, &inv)).await.unwrap();
        assert!(found.is_empty());
    }

    #[tokio::test]
    async fn a_bucket_already_gone_reports_nothing() {
        let gone = mock!(S3::list_objects_v2)
            .then_error(|| ListObjectsV2Error::generic(code("NoSuchBucket")));
        let c = mocked::in_order(&[&gone]);
        let inv = Inventory::default();
        let cx = CleanCtx {
            s3_bucket: Some("capa-boot"),
            ..ctx(&c, &inv)
        };
        assert!(BootstrapObjects.discover(&cx).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_bucket_that_cannot_be_listed_is_reported_and_holds_nothing() {
        let denied = mock!(S3::list_objects_v2)
            .then_error(|| ListObjectsV2Error::generic(code("AccessDenied")));
        let c = mocked::in_order(&[&denied]);
        let inv = Inventory::default();
        let cx = CleanCtx {
            s3_bucket: Some("capa-boot"),
            ..ctx(&c, &inv)
        };
        let found = BootstrapObjects.discover(&cx).await.unwrap();
        assert_eq!(found.len(), 1, "one report for the bucket, no more calls");
        assert_eq!(found[0].id, "arn:aws:s3:::capa-boot");
        assert!(
            found[0]
                .kept
                .as_deref()
                .is_some_and(|w| w.contains("cannot list it") && w.contains("never deleted")),
            "{:?}",
            found[0].kept
        );
    }
}
