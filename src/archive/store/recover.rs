//! Recovering records another process left pending (it stopped between a record and its
//! deletes), and finding out whether an archived object still exists.

use super::*;

/// Of the uids `gone` from `record`, those another record (`others`: record name, uid) also
/// holds: archived again and deleted by a running process, whose record is the one that stays.
fn archived_again<'a>(
    record: &'a RecordRef,
    gone: Vec<String>,
    others: &'a [(String, String)],
) -> impl Iterator<Item = String> + 'a {
    gone.into_iter().filter(move |uid| {
        others
            .iter()
            .any(|(name, u)| u == uid && *name != record.name)
    })
}

impl Archiver {
    /// Settles the records other processes left pending (they stopped between a record and its
    /// deletes): an entry whose object still exists (and is not being deleted) is removed, one
    /// whose object is gone stays; a record whose objects cannot be checked stays pending. This
    /// process's own records are not touched, so it may run while the collector works.
    pub async fn reconcile_pending(&self) -> Result<usize, ArchiveError> {
        let records = self.left_pending().await?;
        let mut resolver = Resolver::default();
        // Each CRD asked about once per pass: a tenant CRD's custom resources share it.
        let mut crds_going: HashMap<String, bool> = HashMap::new();
        let mut settled = 0;
        for (record, entries) in records {
            if self
                .settle_left_pending(&record, &entries, &mut resolver, &mut crds_going)
                .await
            {
                settled += 1;
            }
        }
        Ok(settled)
    }

    /// This collector's pending records that another process wrote, with their entries.
    async fn left_pending(&self) -> Result<Vec<(RecordRef, Vec<ArchiveEntry>)>, ArchiveError> {
        let selector = format!(
            "{LABEL_ARCHIVE}=true,{LABEL_STATE}={PENDING},{LABEL_COLLECTOR}={},{LABEL_WRITER}!={}",
            self.collector, self.writer
        );
        let lp = ListParams::default().labels(&selector);
        let mut records: Vec<(RecordRef, Vec<ArchiveEntry>)> = Vec::new();
        for kind in record_kind::BOTH {
            self.call();
            let list = kind
                .api(&self.client, None)
                .list(&lp)
                .await
                .map_err(ArchiveError::List)?;
            records.extend(
                list.items
                    .iter()
                    .map(|o| (record_ref(&o.metadata, kind), kind.entries(o))),
            );
        }
        Ok(records)
    }

    /// Settles one record another process left pending; true when it was settled. Whatever
    /// cannot be told now (an object's existence, the other records) leaves it pending, said in
    /// a warning, for the next start.
    async fn settle_left_pending(
        &self,
        record: &RecordRef,
        entries: &[ArchiveEntry],
        resolver: &mut Resolver,
        crds_going: &mut HashMap<String, bool>,
    ) -> bool {
        let at = format!("{}/{}", record.namespace, record.name);
        let Some(gone_with_crd) = self.gone_with_their_crd(&at, entries, crds_going).await else {
            return false;
        };
        let Some((mut remove, gone)) = self
            .still_there(&at, entries, &gone_with_crd, resolver)
            .await
        else {
            return false;
        };
        // A gone object that another record also holds was archived again and deleted by a
        // running process (which writes its record before its DELETE): that record is the
        // one that stays. Read only now, after the objects were seen gone, so such a record
        // is already there.
        if !gone.is_empty() {
            match self.uids_in_records(&record.namespace, record.kind).await {
                Ok(others) => remove.extend(archived_again(record, gone, &others)),
                Err(e) => {
                    tracing::warn!(record = %at, error = %e, "cannot read the other archive records; this one stays pending");
                    return false;
                }
            }
        }
        match self.finish(record, &remove).await {
            Ok(()) => {
                tracing::info!(record = %at, entries = entries.len(), removed = remove.len(), "settled an archive record a previous process left pending");
                true
            }
            Err(e) => {
                tracing::warn!(record = %at, error = %e, "cannot settle a pending archive record; it stays pending");
                false
            }
        }
    }

    /// Per entry, whether it is a custom resource archived with its CRD whose DELETE took
    /// effect: it went (or is going) with it, even while it still shows, not yet reached by the
    /// API server's cleanup, so its entry is true. None when a CRD cannot be asked about.
    async fn gone_with_their_crd(
        &self,
        at: &str,
        entries: &[ArchiveEntry],
        crds_going: &mut HashMap<String, bool>,
    ) -> Option<Vec<bool>> {
        let mut gone_with_crd = vec![false; entries.len()];
        for (i, e) in entries.iter().enumerate() {
            let Some(crd) = &e.reason.with_crd else {
                continue;
            };
            gone_with_crd[i] = match crds_going.get(crd) {
                Some(&going) => going,
                None => match crd_going(&self.client, crd).await {
                    Ok(going) => *crds_going.entry(crd.clone()).or_insert(going),
                    Err(err) => {
                        tracing::warn!(record = %at, object = %e.label(), error = %err, "cannot tell whether an archived object still exists; its record stays pending");
                        return None;
                    }
                },
            };
        }
        Some(gone_with_crd)
    }

    /// Asks the API server about the entries not gone with their CRD: the uids of those that
    /// still exist (their entries go) and of those gone. None when one cannot be told.
    async fn still_there(
        &self,
        at: &str,
        entries: &[ArchiveEntry],
        gone_with_crd: &[bool],
        resolver: &mut Resolver,
    ) -> Option<(Vec<String>, Vec<String>)> {
        let ask: Vec<&ArchiveEntry> = entries
            .iter()
            .zip(gone_with_crd)
            .filter(|(_, gone)| !**gone)
            .map(|(e, _)| e)
            .collect();
        let mut answers = resolver.exist(&self.client, &ask).await.into_iter();
        let mut remove = Vec::new();
        let mut gone = Vec::new();
        for (e, &with_crd) in entries.iter().zip(gone_with_crd) {
            let exists = if with_crd {
                Ok(false)
            } else {
                answers.next().unwrap_or(Ok(true))
            };
            match exists {
                Ok(true) => remove.push(e.uid.clone()),
                Ok(false) => gone.push(e.uid.clone()),
                // Cannot tell: the record stays pending for the next start to settle.
                Err(err) => {
                    tracing::warn!(record = %at, object = %e.label(), error = %err, "cannot tell whether an archived object still exists; its record stays pending");
                    return None;
                }
            }
        }
        Some((remove, gone))
    }

    /// `(record name, uid)` of every entry of this collector's records in `namespace`.
    pub(super) async fn uids_in_records(
        &self,
        namespace: &str,
        kind: RecordKind,
    ) -> Result<Vec<(String, String)>, ArchiveError> {
        let lp = ListParams::default().labels(&format!(
            "{LABEL_ARCHIVE}=true,{LABEL_COLLECTOR}={}",
            self.collector
        ));
        self.call();
        let records = kind
            .api(&self.client, Some(namespace))
            .list(&lp)
            .await
            .map_err(ArchiveError::List)?;
        Ok(records
            .items
            .iter()
            .flat_map(|o| {
                RecordKind::keys(o)
                    .into_iter()
                    .filter_map(|k| k.strip_suffix(".json").map(String::from))
                    .map(|u| (o.name_any(), u))
            })
            .collect())
    }
}

/// Whether the CRD `name` is gone or being deleted.
async fn crd_going(client: &Client, name: &str) -> Result<bool, ArchiveError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    match Api::<CustomResourceDefinition>::all(client.clone())
        .get_metadata_opt(name)
        .await
    {
        Ok(Some(m)) => Ok(m.metadata.deletion_timestamp.is_some()),
        Ok(None) => Ok(true),
        Err(source) => Err(ArchiveError::Crd {
            name: name.to_string(),
            source,
        }),
    }
}

/// Maps an entry's apiVersion and kind to its resource, with discovery (cached per kind).
#[derive(Default)]
pub struct Resolver {
    known: HashMap<(String, String), Option<(ApiResource, bool)>>,
}

impl Resolver {
    pub async fn resolve(
        &mut self,
        client: &Client,
        api_version: &str,
        kind: &str,
    ) -> Option<(ApiResource, bool)> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(k) = self.known.get(&key) {
            return k.clone();
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let found = kube::discovery::pinned_kind(client, &gvk)
            .await
            .ok()
            .map(|(ar, caps)| (ar, caps.scope == kube::discovery::Scope::Namespaced));
        // Only a resolved kind is remembered: a failed discovery call must not read as "not
        // served" for the rest of the run.
        if found.is_some() {
            self.known.insert(key, found.clone());
        }
        found
    }

    /// [`Resolver::exists`] for each of `entries` (same order), with a list instead of a GET
    /// each where the entries of one kind and namespace are several and its pages cost fewer
    /// calls than the GETs (the first page's `remainingItemCount` tells, as for the archive's
    /// reads): a process killed mid-teardown leaves one pending record of hundreds of entries,
    /// and its successor settled it with a GET per entry, through the rate limit its own
    /// deletes needed.
    pub async fn exist(
        &mut self,
        client: &Client,
        entries: &[&ArchiveEntry],
    ) -> Vec<Result<bool, ArchiveError>> {
        let mut out: Vec<Option<Result<bool, ArchiveError>>> = std::iter::repeat_with(|| None)
            .take(entries.len())
            .collect();
        let mut groups: BTreeMap<(String, String, Option<String>), Vec<usize>> = BTreeMap::new();
        for (i, e) in entries.iter().enumerate() {
            let key = (e.api_version.clone(), e.kind.clone(), e.namespace.clone());
            groups.entry(key).or_default().push(i);
        }
        for ((api_version, kind, namespace), idx) in groups {
            if idx.len() < 2 {
                continue;
            }
            let Some((ar, namespaced)) = self.resolve(client, &api_version, &kind).await else {
                continue; // exists() says "not served" for each
            };
            let api: Api<DynamicObject> = match (&namespace, namespaced) {
                (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &ar),
                _ => Api::all_with(client.clone(), &ar),
            };
            let uids: Vec<&str> = idx.iter().map(|i| entries[*i].uid.as_str()).collect();
            if let Some(listed) = list_uids(&api, &uids).await {
                for i in idx {
                    out[i] = listed.get(&entries[i].uid).map(|exists| Ok(*exists));
                }
            }
        }
        let mut answers = Vec::with_capacity(entries.len());
        for (e, known) in entries.iter().zip(out) {
            answers.push(match known {
                Some(a) => a,
                None => self.exists(client, e).await,
            });
        }
        answers
    }

    /// Whether the entry's object exists now with its uid and is not being deleted (Err: cannot
    /// tell). An object held by finalizers after a DELETE counts as deleted.
    pub async fn exists(
        &mut self,
        client: &Client,
        e: &ArchiveEntry,
    ) -> Result<bool, ArchiveError> {
        let Some((ar, namespaced)) = self.resolve(client, &e.api_version, &e.kind).await else {
            // The kind is not served any more: nothing of it exists.
            return Ok(false);
        };
        let api: Api<DynamicObject> = match (&e.namespace, namespaced) {
            (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &ar),
            _ => Api::all_with(client.clone(), &ar),
        };
        match api.get_opt(&e.name).await {
            Ok(Some(o)) => Ok(o.uid().as_deref() == Some(e.uid.as_str())
                && o.metadata.deletion_timestamp.is_none()),
            Ok(None) => Ok(false),
            Err(source) => Err(ArchiveError::Exists {
                object: e.label(),
                source,
            }),
        }
    }
}

/// What a list of `api` says of `uids`: per uid, whether its object exists and is not being
/// deleted; a uid absent from a complete list is gone (or its name taken by another object).
/// Where the list stops early (its pages would cost more calls than a GET per uid not seen yet)
/// or fails, only the uids it saw are answered; `None` when it answered none. The others are
/// read alone.
async fn list_uids(api: &Api<DynamicObject>, uids: &[&str]) -> Option<HashMap<String, bool>> {
    let wanted: std::collections::HashSet<&str> = uids.iter().copied().collect();
    let mut exists: HashMap<String, bool> = HashMap::new();
    let mut lp = ListParams::default().limit(PAGE);
    loop {
        let page = match api.list_metadata(&lp).await {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(error = %e, "listing to settle a pending record failed; reading one by one");
                break;
            }
        };
        let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
        let pages_left = page
            .metadata
            .remaining_item_count
            .map(|r| (r.max(0) as u64).div_ceil(u64::from(PAGE)))
            .unwrap_or(u64::MAX);
        for m in page.items {
            let uid = m.metadata.uid.unwrap_or_default();
            if wanted.contains(uid.as_str()) {
                exists.insert(uid, m.metadata.deletion_timestamp.is_none());
            }
        }
        let Some(token) = next else {
            // Complete: a uid not seen is gone.
            for u in &wanted {
                exists.entry(u.to_string()).or_insert(false);
            }
            break;
        };
        if pages_left > (wanted.len() - exists.len()) as u64 {
            break;
        }
        lp = lp.continue_token(&token);
    }
    (!exists.is_empty()).then_some(exists)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gone_object_stays_only_in_the_record_that_archived_it_again() {
        let record = RecordRef {
            namespace: "ns".into(),
            name: "old".into(),
            kind: RecordKind::ConfigMap,
        };
        let others = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(n, u)| (n.to_string(), u.to_string()))
                .collect()
        };
        // Gone uids, the other records' (name, uid), what is removed from this record.
        type Case = (
            &'static [&'static str],
            Vec<(String, String)>,
            &'static [&'static str],
        );
        let cases: [Case; 4] = [
            // Nobody else holds it: its entry stays here.
            (&["a"], others(&[("old", "a")]), &[]),
            // A newer record holds it too: removed from this one.
            (&["a"], others(&[("old", "a"), ("new", "a")]), &["a"]),
            // Only the other uid was archived again.
            (&["a", "b"], others(&[("new", "b")]), &["b"]),
            (&[], others(&[("new", "b")]), &[]),
        ];
        for (gone, others, want) in cases {
            let gone: Vec<String> = gone.iter().map(|s| s.to_string()).collect();
            let got: Vec<String> = archived_again(&record, gone.clone(), &others).collect();
            assert_eq!(got, want, "{gone:?} / {others:?}");
        }
    }
}
