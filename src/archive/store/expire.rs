//! Expiring records: one deletecollection per namespace and ended expiry bucket, one DELETE per
//! older unbucketed record, and a loop that wakes when the next record falls due.

use super::*;
use crate::engine::leader::Fence;

/// An expiry bucket of one namespace and record kind: (namespace, kind, bucket label).
type Bucket = (String, RecordKind, String);

/// What of the listed records is due now, decided without I/O.
#[derive(Debug, Default, PartialEq)]
struct Due {
    /// Ended buckets, with how many listed records are in each: every record in one has expired,
    /// so it goes with one deletecollection.
    buckets: BTreeMap<Bucket, usize>,
    /// Expired records without a bucket label (written before buckets): one DELETE each.
    singles: Vec<RecordRef>,
    /// When the next record falls due (unix seconds).
    next: Option<i64>,
}

impl Due {
    fn of(listed: &[(ObjectMeta, RecordKind)], now: Timestamp) -> Due {
        let expires_at = |m: &ObjectMeta| {
            m.annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_EXPIRES))
                .and_then(|t| t.parse::<Timestamp>().ok())
        };
        let mut due = Due::default();
        let now_s = now.as_second();
        let mut later = |t: i64| due.next = Some(due.next.map_or(t, |n| n.min(t)));
        let (mut buckets, mut singles) = (BTreeMap::new(), Vec::new());
        for (m, kind) in listed {
            let kind = *kind;
            let bucket = m
                .labels
                .as_ref()
                .and_then(|l| l.get(crate::archive::LABEL_EXPIRY_BUCKET))
                .and_then(|b| b.parse::<i64>().ok().map(|end| (b.clone(), end)));
            match bucket {
                Some((b, end)) if end <= now_s => {
                    let ns = m.namespace.clone().unwrap_or_default();
                    *buckets.entry((ns, kind, b)).or_default() += 1;
                }
                Some((_, end)) => later(end),
                None => match expires_at(m) {
                    Some(t) if t <= now => singles.push(record_ref(m, kind)),
                    Some(t) => later(t.as_second()),
                    None => {}
                },
            }
        }
        due.buckets = buckets;
        due.singles = singles;
        due
    }
}

impl Archiver {
    /// Deletes every record of `namespace` in the ended expiry `bucket` in one call.
    pub(super) async fn delete_bucket(
        &self,
        namespace: &str,
        kind: RecordKind,
        bucket: &str,
    ) -> Result<(), kube::Error> {
        self.call();
        let lp = ListParams::default().labels(&format!(
            "{LABEL_ARCHIVE}=true,{}={bucket}",
            crate::archive::LABEL_EXPIRY_BUCKET
        ));
        kind.api(&self.client, Some(namespace))
            .delete_collection(&DeleteParams::default(), &lp)
            .await
            .map(|_| ())
    }

    /// Deletes every record whose time is up; returns how many.
    pub async fn expire(&self) -> Result<usize, ArchiveError> {
        self.expire_pass().await.map(|p| p.gone)
    }

    /// [`Archiver::expire`], also returning when the next record falls due (unix seconds), so
    /// the loop can wake then rather than up to a whole interval later.
    pub(super) async fn expire_pass(&self) -> Result<Pass, ArchiveError> {
        let started = Instant::now();
        let listed = self.list_records().await?;
        let due = Due::of(&listed, Timestamp::now());
        let (gone, paused) = self.delete_due(due.buckets, due.singles).await;
        self.metrics.expired.inc_by(gone as u64);
        let listed = listed.len();
        self.metrics
            .stored
            .set(i64::try_from(listed.saturating_sub(gone)).unwrap_or(i64::MAX));
        self.metrics.gc_seconds.set(started.elapsed().as_secs_f64());
        if gone > 0 {
            tracing::info!(
                records = gone,
                seconds = started.elapsed().as_secs_f64(),
                "expired archive records deleted"
            );
        }
        Ok(Pass {
            gone,
            next: due.next,
            paused,
        })
    }

    /// Every record in the expiry scope (metadata only), of each kind this archive writes.
    async fn list_records(&self) -> Result<Vec<(ObjectMeta, RecordKind)>, ArchiveError> {
        let lp = ListParams::default().labels(&format!("{LABEL_ARCHIVE}=true"));
        let mut listed: Vec<(ObjectMeta, RecordKind)> = Vec::new();
        for kind in self.record_kinds {
            self.call();
            let list = kind
                .api(&self.client, self.expiry_scope.as_deref())
                .list_metadata(&lp)
                .await
                .map_err(ArchiveError::List)?;
            listed.extend(list.items.into_iter().map(|m| (m.metadata, *kind)));
        }
        Ok(listed)
    }

    /// Deletes the ended buckets (one call each, counting the records listed in them) and the
    /// expired unbucketed records; returns how many records went, and whether the collector's
    /// pause refused any delete. A failure is retried next pass.
    async fn delete_due(
        &self,
        buckets: BTreeMap<Bucket, usize>,
        singles: Vec<RecordRef>,
    ) -> (usize, bool) {
        let (mut gone, mut paused) = (0, false);
        let mut refused_by_pause = |e: &kube::Error| {
            let p = crate::engine::client::refused_by_pause(e);
            paused |= p;
            p
        };
        for ((namespace, kind, bucket), n) in buckets {
            match self.delete_bucket(&namespace, kind, &bucket).await {
                Ok(()) => gone += n,
                Err(e) if refused_by_pause(&e) => {
                    tracing::info!(namespace = %namespace, bucket = %bucket, error = %e, "expired archive bucket kept while paused; deleted on resume")
                }
                Err(e) => {
                    tracing::warn!(namespace = %namespace, bucket = %bucket, error = %e, "cannot delete an expired archive bucket; retrying next pass")
                }
            }
        }
        for r in singles {
            match self.delete_record(&r).await {
                Ok(()) => gone += 1,
                Err(e) if refused_by_pause(&e) => {
                    tracing::info!(record = %format!("{}/{}", r.namespace, r.name), error = %e, "expired archive record kept while paused; deleted on resume")
                }
                Err(e) => {
                    tracing::warn!(record = %format!("{}/{}", r.namespace, r.name), error = %e, "cannot delete an expired archive record; retrying next pass")
                }
            }
        }
        (gone, paused)
    }

    /// Runs [`Archiver::expire`] every `every` until `shutdown`, and as soon as the next record
    /// falls due when that is sooner; never while `fence`'s collector is paused. Its pause flag
    /// reads paused until the switch is first read, so the first pass waits for that read: a pass
    /// before it had its deletes refused and waited a whole interval (up to 5 minutes) for the
    /// next (CI, 2026-12-05). A pass whose deletes a pause refused runs again on resume.
    pub async fn expire_loop(
        self: std::sync::Arc<Self>,
        every: Duration,
        fence: Fence,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = fence.resumed() => {}
            }
            let wait = match self.expire_pass().await {
                // The next loop waits for the resume; the second only keeps a pause this fence
                // does not see from turning the loop into a spin.
                Ok(Pass { paused: true, .. }) => PAUSED_RETRY,
                Ok(Pass {
                    next: Some(due), ..
                }) => {
                    let now = Timestamp::now().as_millisecond();
                    // A little past the second it falls due in, so the pass sees it due.
                    let until = due.saturating_mul(1000).saturating_add(50);
                    Duration::from_millis(u64::try_from(until - now).unwrap_or(0)).min(every)
                }
                Ok(Pass { next: None, .. }) => every,
                Err(e) => {
                    tracing::warn!(error = %e, "archive expiry pass failed; retrying next pass");
                    every
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// How soon a pass a pause refused is tried again once the fence lets it.
const PAUSED_RETRY: Duration = Duration::from_secs(1);

/// What one expiry pass did.
pub(super) struct Pass {
    /// Records deleted.
    gone: usize,
    /// When the next record falls due (unix seconds).
    next: Option<i64>,
    /// Whether the collector's pause refused a delete: the pass runs again on resume.
    paused: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, bucket: Option<i64>, expires: Option<i64>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: bucket.map(|b| {
                BTreeMap::from([(
                    crate::archive::LABEL_EXPIRY_BUCKET.to_string(),
                    b.to_string(),
                )])
            }),
            annotations: expires.map(|t| {
                let t = Timestamp::from_second(t).unwrap().to_string();
                BTreeMap::from([(ANNOTATION_EXPIRES.to_string(), t)])
            }),
            ..Default::default()
        }
    }

    /// What, the records listed, ended buckets, expired singles, when the next falls due.
    type Case = (
        &'static str,
        Vec<(ObjectMeta, RecordKind)>,
        usize,
        usize,
        Option<i64>,
    );

    #[test]
    fn ended_buckets_and_expired_records_are_due_the_rest_says_when() {
        let now = Timestamp::from_second(1_000).unwrap();
        let cm = RecordKind::ConfigMap;
        let cases: Vec<Case> = vec![
            ("nothing listed", vec![], 0, 0, None),
            (
                "two records in one ended bucket: one call",
                vec![
                    (meta("a", Some(900), None), cm),
                    (meta("b", Some(900), None), cm),
                ],
                1,
                0,
                None,
            ),
            (
                "a bucket ending now is due",
                vec![(meta("a", Some(1_000), None), cm)],
                1,
                0,
                None,
            ),
            (
                "a later bucket is not, and says when",
                vec![
                    (meta("a", Some(1_500), None), cm),
                    (meta("b", Some(1_200), None), cm),
                ],
                0,
                0,
                Some(1_200),
            ),
            (
                "an unbucketed record goes alone when expired",
                vec![
                    (meta("a", None, Some(999)), cm),
                    (meta("b", None, Some(1_100)), cm),
                ],
                0,
                1,
                Some(1_100),
            ),
            (
                "a record with neither never expires",
                vec![(meta("a", None, None), cm)],
                0,
                0,
                None,
            ),
        ];
        for (what, listed, buckets, singles, next) in cases {
            let due = Due::of(&listed, now);
            assert_eq!(due.buckets.len(), buckets, "{what}");
            assert_eq!(due.singles.len(), singles, "{what}");
            assert_eq!(due.next, next, "{what}");
        }
        let two = Due::of(
            &[
                (meta("a", Some(900), None), cm),
                (meta("b", Some(900), None), cm),
            ],
            now,
        );
        assert_eq!(two.buckets.values().copied().collect::<Vec<_>>(), vec![2]);
    }
}
