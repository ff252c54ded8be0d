//! Settling records: act on recorded objects ([`Archiver::guarded`]), then mark each record
//! complete without the entries of objects that did not go; retry settles that failed.

use super::*;

impl Archiver {
    /// The one way to act on recorded objects: runs `act` (the DELETE, or the finalizer release,
    /// that `tickets`' entries were written for), then settles every ticket by whether it took
    /// effect, so an entry stays only for an object that went. `took_effect` decides from the
    /// result; when the answer was lost it asks the API server, and when even that fails it
    /// must say true (a record is never lost for an object that may be gone).
    pub async fn guarded<T, E>(
        archive: Option<&Archiver>,
        tickets: &[Ticket],
        act: impl Future<Output = Result<T, E>>,
        took_effect: impl AsyncFnOnce(&Result<T, E>) -> bool,
    ) -> Result<T, E> {
        let result = act.await;
        if let Some(archive) = archive
            && !tickets.is_empty()
        {
            let done = took_effect(&result).await;
            for t in tickets {
                archive.settle(t, done).await;
            }
        }
        result
    }

    /// Reports a recorded item's DELETE: `deleted` false (precondition failed, already gone,
    /// error) removes its entry. When every entry of the record is reported, the record is
    /// settled in one write (complete, false entries removed; deleted if none is left).
    pub async fn settle(&self, ticket: &Ticket, deleted: bool) {
        let ready = {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            let Some(o) = open.get_mut(&ticket.record) else {
                return;
            };
            if !deleted {
                o.remove.push(ticket.uid.clone());
            }
            o.outstanding = o.outstanding.saturating_sub(1);
            if o.outstanding == 0 {
                open.remove(&ticket.record)
            } else {
                None
            }
        };
        if let Some(o) = ready
            && let Err(e) = self.finish(&ticket.record, &o.remove).await
        {
            // Retried before the next batch; failing that, the next start settles it.
            if !e.paused() {
                tracing::warn!(error = %e, "cannot settle an archive record; retrying before the next batch");
            }
            self.unsettled
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((ticket.record.clone(), o.remove));
        }
    }

    /// Retries the failed settles every `every` until `shutdown`.
    pub async fn settle_loop(
        self: std::sync::Arc<Self>,
        every: Duration,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            self.retry_unsettled().await;
        }
    }

    pub(super) async fn retry_unsettled(&self) {
        let todo = std::mem::take(&mut *self.unsettled.lock().unwrap_or_else(|p| p.into_inner()));
        for (record, remove) in todo {
            if self.finish(&record, &remove).await.is_err() {
                self.unsettled
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((record, remove));
            }
        }
    }

    /// Marks `record` complete without the entries of `remove`; deletes it when none is left.
    pub(super) async fn finish(
        &self,
        record: &RecordRef,
        remove: &[String],
    ) -> Result<(), ArchiveError> {
        let err = |source| ArchiveError::Record {
            namespace: record.namespace.clone(),
            name: record.name.clone(),
            source,
        };
        if !remove.is_empty() {
            self.metrics
                .false_entries_removed
                .get_or_create(&self.labels())
                .inc_by(remove.len() as u64);
        }
        let data: BTreeMap<String, Option<String>> = remove
            .iter()
            .map(|u| (ArchiveEntry::key(u), None))
            .collect();
        let patch = serde_json::json!({
            "metadata": {"labels": {LABEL_STATE: COMPLETE}},
            "data": data,
        });
        self.call();
        let left = record
            .kind
            .api(&self.client, Some(&record.namespace))
            .patch(&record.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|o| RecordKind::keys(&o).len());
        let left = match left {
            Ok(n) => n,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(err(e)),
        };
        if left == 0 {
            self.delete_record(record).await.map_err(err)?;
        }
        Ok(())
    }

    pub(super) async fn delete_record(&self, record: &RecordRef) -> Result<(), kube::Error> {
        self.call();
        let r = record
            .kind
            .api(&self.client, Some(&record.namespace))
            .delete(&record.name, &DeleteParams::default())
            .await
            .map(|_| ());
        match r {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            other => other,
        }
    }
}
