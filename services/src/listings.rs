//! Account-wide listings shared by the teardowns of one account. IAM is global: every cluster's
//! pass in an account would list the same instance profiles and OIDC providers, so a fleet of
//! clusters torn down together (concurrent passes, `--external-concurrency`) would list the
//! account once per cluster. Instead, one listing per account is made and shared for [`FRESH`]:
//! about one pass. Concurrent passes wait for the listing in flight rather than making their own.
//!
//! Why this is safe: a listing only narrows what each pass then reads itself with its own
//! session (`GetInstanceProfile`, `GetOpenIDConnectProvider`, whose answers decide). A name
//! listed but gone since is NotFound there and skipped; one created since the listing waits for
//! the next pass. The listing is made with the credentials of the first pass that asks; sessions
//! of one account see the same IAM, whatever their identity.
//!
//! A name a pass deleted (the delete answered success or NotFound) is taken out of the fresh
//! listing ([`Listings::gone`]): the next pass served from it would only read it to be told
//! NotFound. That is exact, not a guess: the name is gone as of the delete's answer, and one
//! made again since would be missing from the listing anyway (made before it), so the listing
//! hides nothing it showed before. (In the fleet benchmark the verifying pass read each deleted
//! Karpenter profile again: 60 of its 8,038 requests.)

use crate::errors::CleanError;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long one listing serves the account's passes.
pub const FRESH: Duration = Duration::from_secs(5);

type Slot = Arc<tokio::sync::Mutex<Option<(Instant, Arc<Vec<String>>)>>>;

/// One account's listings, by name (`iam.ListInstanceProfiles`, ...).
#[derive(Debug, Default)]
pub struct Listings {
    slots: Mutex<HashMap<&'static str, Slot>>,
    /// Listings made (not served from a fresh one): what the fleet benchmark reports.
    made: AtomicUsize,
}

impl Listings {
    /// How many listings were made (each `fetch` run, failed ones included), of every kind.
    pub fn made(&self) -> usize {
        self.made.load(Ordering::Relaxed)
    }

    /// The listing `what`, made by `fetch` unless one made less than [`FRESH`] ago is at hand.
    pub async fn get<F, Fut>(
        &self,
        what: &'static str,
        fetch: F,
    ) -> Result<Arc<Vec<String>>, CleanError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<String>, CleanError>>,
    {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(what)
            .or_default()
            .clone();
        // Held across the fetch: the passes asking meanwhile wait for this one listing.
        let mut held = slot.lock().await;
        if let Some((at, listed)) = held.as_ref()
            && at.elapsed() < FRESH
        {
            return Ok(listed.clone());
        }
        // A failure is not kept: the next pass asks again.
        self.made.fetch_add(1, Ordering::Relaxed);
        let listed = Arc::new(fetch().await?);
        *held = Some((Instant::now(), listed.clone()));
        Ok(listed)
    }

    /// `entry` of listing `what` was deleted: a fresh listing no longer holds it (see the
    /// module's docs). Passes holding the listing already keep their copy.
    pub async fn gone(&self, what: &'static str, entry: &str) {
        let Some(slot) = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(what)
            .cloned()
        else {
            return;
        };
        let mut held = slot.lock().await;
        if let Some((_, listed)) = held.as_mut()
            && listed.iter().any(|e| e == entry)
        {
            *listed = Arc::new(listed.iter().filter(|e| *e != entry).cloned().collect());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn concurrent_passes_share_one_listing_and_a_failure_is_not_kept() {
        let l = Listings::default();
        let calls = AtomicUsize::new(0);
        let fetch = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(vec!["c1_1".to_string()])
        };
        let (a, b, c) = tokio::join!(
            l.get("iam.ListInstanceProfiles", fetch),
            l.get("iam.ListInstanceProfiles", fetch),
            l.get("iam.ListInstanceProfiles", fetch)
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one listing for the three");
        assert_eq!(*a.unwrap(), ["c1_1"]);
        assert!(b.is_ok() && c.is_ok());

        let other = l
            .get("iam.ListOpenIDConnectProviders", || async {
                Err(CleanError::Discover {
                    kind: "oidc-provider",
                    op: "ListOpenIDConnectProviders",
                    source: crate::errors::ApiFailure {
                        class: crate::errors::ErrorClass::Transient,
                        code: Some("Throttling".into()),
                        message: "slow down".into(),
                        kind: crate::errors::FailureKind::Throttled,
                    },
                })
            })
            .await;
        assert!(other.is_err());
        let again = l
            .get("iam.ListOpenIDConnectProviders", || async {
                Ok(vec!["arn".into()])
            })
            .await
            .unwrap();
        assert_eq!(*again, ["arn"], "the failure was not kept");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "another listing, its own slot"
        );
        assert_eq!(l.made(), 3, "one shared, one failed, one after the failure");
    }

    #[tokio::test]
    async fn a_deleted_entry_leaves_the_fresh_listing_and_only_it() {
        let l = Listings::default();
        let what = "iam.ListInstanceProfiles";
        let listing = || async { Ok(vec!["c1_a".to_string(), "c1_b".into(), "c2_a".into()]) };
        // Nothing listed yet: nothing to take out, and nothing is made.
        l.gone(what, "c1_a").await;
        assert_eq!(l.made(), 0);
        let first = l.get(what, listing).await.unwrap();
        l.gone(what, "c1_a").await;
        l.gone(what, "not-listed").await;
        l.gone("iam.ListOpenIDConnectProviders", "c1_b").await;
        let served = l.get(what, listing).await.unwrap();
        assert_eq!(*served, ["c1_b", "c2_a"], "served without the deleted name");
        assert_eq!(l.made(), 1, "served from the one listing");
        assert_eq!(*first, ["c1_a", "c1_b", "c2_a"], "a pass's copy is its own");
    }
}
