//! Expiring records: one deletecollection per namespace and ended expiry bucket, one DELETE per
//! older unbucketed record, and a loop that wakes when the next record falls due.

use super::*;

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
        self.expire_pass().await.map(|(gone, _)| gone)
    }

    /// [`Archiver::expire`], also returning when the next record falls due (unix seconds), so
    /// the loop can wake then rather than up to a whole interval later.
    pub(super) async fn expire_pass(&self) -> Result<(usize, Option<i64>), ArchiveError> {
        let started = Instant::now();
        let now = Timestamp::now();
        let lp = ListParams::default().labels(&format!("{LABEL_ARCHIVE}=true"));
        let expires_at = |m: &ObjectMeta| {
            m.annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_EXPIRES))
                .and_then(|t| t.parse::<Timestamp>().ok())
        };
        let mut gone = 0;
        let kinds = self.record_kinds;
        let mut listed: Vec<(ObjectMeta, RecordKind)> = Vec::new();
        for kind in kinds {
            self.call();
            let list = kind
                .api(&self.client, self.expiry_scope.as_deref())
                .list_metadata(&lp)
                .await
                .map_err(ArchiveError::List)?;
            listed.extend(list.items.into_iter().map(|m| (m.metadata, *kind)));
        }
        // Records that carry an expiry bucket go with one deletecollection per namespace and
        // ended bucket (every record in it has expired); older records without the label, one
        // DELETE each.
        let mut buckets: BTreeMap<(String, RecordKind, String), usize> = BTreeMap::new();
        let mut singles: Vec<RecordRef> = Vec::new();
        let now_s = now.as_second();
        let mut next_due: Option<i64> = None;
        let mut later = |t: i64| next_due = Some(next_due.map_or(t, |n| n.min(t)));
        for (m, kind) in &listed {
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
        for ((namespace, kind, bucket), n) in buckets {
            match self.delete_bucket(&namespace, kind, &bucket).await {
                Ok(()) => gone += n,
                Err(e) => {
                    tracing::warn!(namespace = %namespace, bucket = %bucket, error = %e, "cannot delete an expired archive bucket; retrying next pass")
                }
            }
        }
        for r in singles {
            match self.delete_record(&r).await {
                Ok(()) => gone += 1,
                Err(e) => {
                    tracing::warn!(record = %format!("{}/{}", r.namespace, r.name), error = %e, "cannot delete an expired archive record; retrying next pass")
                }
            }
        }
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
        Ok((gone, next_due))
    }

    /// Runs [`Archiver::expire`] now and every `every` until `shutdown`, and as soon as the next
    /// record falls due when that is sooner.
    pub async fn expire_loop(
        self: std::sync::Arc<Self>,
        every: Duration,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        loop {
            let wait = match self.expire_pass().await {
                Ok((_, Some(due))) => {
                    let now = Timestamp::now().as_millisecond();
                    // A little past the second it falls due in, so the pass sees it due.
                    let until = due.saturating_mul(1000).saturating_add(50);
                    Duration::from_millis(u64::try_from(until - now).unwrap_or(0)).min(every)
                }
                Ok((_, None)) => every,
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
