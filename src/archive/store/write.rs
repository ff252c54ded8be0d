//! Writing records: read what is to be deleted (batched lists, a short cache), write pending
//! records before any delete.

use super::*;

impl Archiver {
    /// Reads the items that were not read yet, writes pending records for those to archive, and
    /// says per item (same order) what to do.
    pub async fn record(&self, items: Vec<Item>) -> Vec<Prepared> {
        if !self.settings.mode.is_on() {
            return items.iter().map(|_| Prepared::Unrecorded).collect();
        }
        self.retry_unsettled().await;
        let objects = self.read(&items).await;
        let now = Timestamp::now().to_string();
        // Each item's answer, or the resourceVersion it is to be archived at (its ticket's
        // DELETE precondition) while its record is not written yet.
        let mut steps: Vec<Step> = Vec::with_capacity(items.len());
        // (namespace, kind) -> [(item index, entry json)]
        let mut groups: BTreeMap<(String, RecordKind), Vec<(usize, String)>> = BTreeMap::new();
        for (i, (item, read)) in items.iter().zip(objects).enumerate() {
            match self.judge(item, read, &now).await {
                Judgement::Answer(p) => steps.push(Step::Answered(p)),
                Judgement::Archive { rv, json } => {
                    let namespace = match (&item.namespace, item.in_sweeper_namespace) {
                        (Some(ns), false) => ns.clone(),
                        _ => self.settings.namespace.clone(),
                    };
                    groups
                        .entry((namespace, RecordKind::of(item.is_secret())))
                        .or_default()
                        .push((i, json));
                    steps.push(Step::Unwritten { rv });
                }
            }
        }
        for ((namespace, kind), entries) in groups {
            for chunk in chunks(entries) {
                let written = self.write_chunk(&items, &namespace, kind, &chunk).await;
                for (i, _) in chunk {
                    let Step::Unwritten { rv } = &mut steps[i] else {
                        continue;
                    };
                    let answer = match &written {
                        Ok(record) => Prepared::Recorded(Ticket {
                            record: record.clone(),
                            uid: items[i].uid.clone(),
                            resource_version: std::mem::take(rv),
                        }),
                        Err(e) => Prepared::Failed(e.clone()),
                    };
                    steps[i] = Step::Answered(answer);
                }
            }
        }
        steps
            .into_iter()
            .map(|s| match s {
                Step::Answered(p) => p,
                // Every item to archive is in exactly one chunk, so none is left unwritten; were
                // one left, it is not deleted now and is looked at again.
                Step::Unwritten { .. } => Prepared::Changed,
            })
            .collect()
    }

    /// What to do with one item, once read: an answer now, or an entry to write.
    async fn judge(
        &self,
        item: &Item,
        read: Result<Option<Value>, ArchiveError>,
        now: &str,
    ) -> Judgement {
        let object = match read {
            Err(e) => return Judgement::Answer(Prepared::Failed(e.into())),
            Ok(None) => return Judgement::Answer(Prepared::Changed),
            Ok(Some(o)) => o,
        };
        let uid = object["metadata"]["uid"].as_str().unwrap_or_default();
        let rv = object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if uid != item.uid || item.expect_rv.as_ref().is_some_and(|e| *e != rv) {
            return Judgement::Answer(Prepared::Changed);
        }
        let labels: BTreeMap<String, String> =
            serde_json::from_value(object["metadata"]["labels"].clone()).unwrap_or_default();
        if !self.settings.mode.selects(&labels) {
            self.skip("not_selected");
            return Judgement::Answer(Prepared::Unrecorded);
        }
        let entry = ArchiveEntry {
            api_version: item.resource.api_version.clone(),
            kind: item.resource.kind.clone(),
            namespace: item.namespace.clone(),
            name: item.name.clone(),
            uid: item.uid.clone(),
            resource_version: rv.clone(),
            deleted_by: format!("sweeper-{}", self.collector),
            reason: item.reason.clone(),
            archived_at: now.to_string(),
            object: strip(object),
        };
        let json = serde_json::to_string(&entry).unwrap_or_default();
        if json.len() > self.settings.max_object_bytes {
            self.skip("too_large");
            let note = format!(
                "not archived: {} bytes is over the archive's cap of {} bytes (--archive-max-object-bytes); deleted without a record",
                json.len(),
                self.settings.max_object_bytes
            );
            tracing::warn!(object = %entry.label(), "{note}");
            self.events
                .emit(&item.reference(), EventType::Warning, "NotArchived", note)
                .await;
            return Judgement::Answer(Prepared::Unrecorded);
        }
        Judgement::Archive { rv, json }
    }

    /// Writes one record holding `chunk`'s entries in `namespace` (or, refused there, in
    /// sweeper's).
    async fn write_chunk(
        &self,
        items: &[Item],
        namespace: &str,
        kind: RecordKind,
        chunk: &[(usize, String)],
    ) -> Result<RecordRef, ArchiveFailure> {
        let tenant = chunk
            .first()
            .and_then(|(i, _)| items[*i].reason.tenant.clone());
        let data: BTreeMap<String, String> = chunk
            .iter()
            .map(|(i, json)| (ArchiveEntry::key(&items[*i].uid), json.clone()))
            .collect();
        let mut written = self
            .create(namespace, kind, tenant.clone(), data.clone())
            .await;
        // A namespace being deleted (403) or out of quota (403/422) takes no record; the object
        // must still go (a foreground owner there would hold its namespace open): its record goes
        // to sweeper's namespace.
        if let Err(e) = &written
            && e.refused_by_namespace()
            && namespace != self.settings.namespace
        {
            tracing::info!(namespace = %namespace, error = %e, "record refused in the object's namespace; writing it in sweeper's");
            written = self
                .create(&self.settings.namespace, kind, tenant, data)
                .await;
        }
        match written {
            Ok(record) => {
                self.metrics.records.get_or_create(&self.labels()).inc();
                self.metrics
                    .objects
                    .get_or_create(&self.labels())
                    .inc_by(chunk.len() as u64);
                self.open
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(record.clone())
                    .or_default()
                    .outstanding += chunk.len();
                Ok(record)
            }
            Err(e) => {
                if !e.paused() {
                    tracing::warn!(error = %e, "cannot write an archive record; the objects are not deleted now");
                }
                Err(e.into())
            }
        }
    }

    pub(super) fn skip(&self, reason: &str) {
        self.metrics
            .skipped
            .get_or_create(&SkipLabels {
                collector: self.collector.into(),
                reason: reason.into(),
            })
            .inc();
    }

    pub(super) async fn create(
        &self,
        namespace: &str,
        kind: RecordKind,
        tenant: Option<String>,
        data: BTreeMap<String, String>,
    ) -> Result<RecordRef, ArchiveError> {
        let name = format!(
            "sweeper-archive-{}-{}-{:04x}",
            self.collector,
            Timestamp::now().as_millisecond(),
            rand_u16()
        );
        let mut labels = BTreeMap::from([
            (LABEL_ARCHIVE.to_string(), "true".to_string()),
            (LABEL_STATE.to_string(), PENDING.to_string()),
            (LABEL_COLLECTOR.to_string(), self.collector.to_string()),
            (LABEL_WRITER.to_string(), self.writer.clone()),
        ]);
        if let Some(t) = tenant {
            labels.insert(LABEL_TENANT.into(), t);
        }
        let expires = crate::archive::expires_after(Timestamp::now(), self.settings.ttl);
        labels.insert(
            crate::archive::LABEL_EXPIRY_BUCKET.into(),
            crate::archive::expiry_bucket(expires, self.settings.ttl),
        );
        let metadata = ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                ANNOTATION_EXPIRES.to_string(),
                expires.to_string(),
            )])),
            ..Default::default()
        };
        let err = |source| ArchiveError::Record {
            namespace: namespace.into(),
            name: name.clone(),
            source,
        };
        self.call();
        kind.api(&self.client, Some(namespace))
            .create(&PostParams::default(), &kind.object(metadata, data))
            .await
            .map_err(err)?;
        Ok(RecordRef {
            namespace: namespace.into(),
            name,
            kind,
        })
    }

    /// The full objects of `items` (None: not found), reading what is not given or cached.
    pub(super) async fn read(&self, items: &[Item]) -> Vec<Result<Option<Value>, ArchiveError>> {
        let mut out: Vec<Option<Result<Option<Value>, ArchiveError>>> =
            std::iter::repeat_with(|| None).take(items.len()).collect();
        // (api resource key, namespace) -> indexes still to read
        let mut groups: BTreeMap<(String, Option<String>), Vec<usize>> = BTreeMap::new();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            for (i, item) in items.iter().enumerate() {
                if let Some(o) = &item.object {
                    out[i] = Some(Ok(Some(o.clone())));
                } else if let Some(o) = item
                    .expect_rv
                    .as_deref()
                    .and_then(|rv| cache.take(&item.uid, rv))
                {
                    out[i] = Some(Ok(Some(o)));
                } else {
                    let key = format!("{}/{}", item.resource.api_version, item.resource.plural);
                    let ns = item.namespace.clone().filter(|_| item.namespaced);
                    groups.entry((key, ns)).or_default().push(i);
                }
            }
        }
        for ((_, ns), idx) in groups {
            let first = &items[idx[0]];
            let api: Api<DynamicObject> = match &ns {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &first.resource),
                None => Api::all_with(self.client.clone(), &first.resource),
            };
            let results = self.read_group(&api, items, &idx).await;
            for (i, r) in idx.into_iter().zip(results) {
                out[i] = Some(r);
            }
        }
        out.into_iter().map(|o| o.unwrap_or(Ok(None))).collect()
    }

    /// Reads the `idx` items of one resource and namespace: a GET each, or a list when its pages
    /// cost fewer calls than the GETs left.
    pub(super) async fn read_group(
        &self,
        api: &Api<DynamicObject>,
        items: &[Item],
        idx: &[usize],
    ) -> Vec<Result<Option<Value>, ArchiveError>> {
        let mut found: HashMap<String, Value> = HashMap::new();
        let wanted: HashMap<&str, usize> =
            idx.iter().map(|i| (items[*i].uid.as_str(), *i)).collect();
        if idx.len() > 1 {
            let mut lp = ListParams::default().limit(PAGE);
            loop {
                self.call();
                let page = match api.list(&lp).await {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::debug!(error = %e, "archive list failed; reading one by one");
                        break;
                    }
                };
                let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
                let remaining = page.metadata.remaining_item_count;
                {
                    let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                    for o in page.items {
                        let uid = o.uid().unwrap_or_default();
                        let v = serde_json::to_value(&o).unwrap_or(Value::Null);
                        if wanted.contains_key(uid.as_str()) {
                            found.insert(uid, v);
                        } else {
                            let rv = o.resource_version().unwrap_or_default();
                            cache.put(uid, rv, v);
                        }
                    }
                }
                let missing = wanted.len() - found.len();
                let Some(token) = next else { break };
                if missing == 0 {
                    break;
                }
                // Go on only while the pages left cost no more than a GET per missing object.
                let pages_left = remaining
                    .map(|r| (r.max(0) as u64).div_ceil(u64::from(PAGE)))
                    .unwrap_or(u64::MAX);
                if pages_left > missing as u64 {
                    break;
                }
                lp = lp.continue_token(&token);
            }
        }
        let mut out = Vec::with_capacity(idx.len());
        for i in idx {
            let item = &items[*i];
            if let Some(v) = found.remove(&item.uid) {
                out.push(Ok(Some(v)));
                continue;
            }
            self.call();
            match api.get_opt(&item.name).await {
                Ok(Some(o)) => out.push(Ok(Some(serde_json::to_value(&o).unwrap_or(Value::Null)))),
                Ok(None) => out.push(Ok(None)),
                Err(source) => out.push(Err(ArchiveError::Read {
                    object: crate::engine::meta::object_label(
                        &item.resource.kind,
                        item.namespace.as_deref(),
                        &item.name,
                    ),
                    source,
                })),
            }
        }
        out
    }
}

/// One item's way through [`Archiver::record`].
enum Step {
    Answered(Prepared),
    /// To be archived at `rv` once its record is written.
    Unwritten {
        rv: String,
    },
}

/// What [`Archiver::judge`] found for one item.
enum Judgement {
    Answer(Prepared),
    Archive { rv: String, json: String },
}

/// Splits a group's entries into records of at most [`RECORD_BYTES`].
pub(super) fn chunks(entries: Vec<(usize, String)>) -> Vec<Vec<(usize, String)>> {
    let mut out: Vec<Vec<(usize, String)>> = Vec::new();
    let mut size = 0;
    for e in entries {
        if out.is_empty() || size + e.1.len() > RECORD_BYTES {
            out.push(Vec::new());
            size = 0;
        }
        size += e.1.len();
        if let Some(last) = out.last_mut() {
            last.push(e);
        }
    }
    out
}
