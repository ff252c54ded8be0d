//! `sweeper archive list` and `sweeper restore`: read the records as the caller, pick what to
//! bring back, and roll it forward.
//!
//! Rolling forward, not back: objects are created anew (new uids), owners first, and each
//! dependent's ownerReferences are re-pointed to its restored owner's new uid. An owner that is
//! not in the restore but exists again (same kind, namespace and name) is pointed to instead; one
//! that is neither is dropped from the references (reported), or the restored dependent would be
//! garbage at once. An object that exists again is skipped and reported, never overwritten.
//! Everything runs as the caller's identity, so RBAC decides what they may read and create: a
//! caller who may not list Secrets gets no Secret records, and is told so.

use super::record_kind::RecordKind;
use super::store::Resolver;
use super::{ArchiveEntry, LABEL_ARCHIVE};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// What stops reading or choosing from the archive, or restoring one object (whose label the
/// progress line prints before the reason).
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("cannot list archive records ({kind}): {source}")]
    List {
        kind: RecordKind,
        #[source]
        source: kube::Error,
    },
    #[error("{gvk:?} is not group/version/kind (e.g. apps/v1/Deployment, v1/ConfigMap)")]
    NotAKind { gvk: String },
    #[error("nothing in the archive matches {selection:?}{}", suffix(notes))]
    NothingMatches {
        selection: Selection,
        notes: Vec<String>,
    },
    #[error("its owner ({owner}) could not be restored")]
    OwnerFailed { object: String, owner: String },
    #[error("kind {api_version} {kind} is not served")]
    NotServed { api_version: String, kind: String },
    #[error("{why}: refused")]
    Refused {
        object: String,
        why: Box<RestoreError>,
    },
    #[error(
        "the record places it in namespace {namespace}, but {api_version} {kind} is cluster-scoped"
    )]
    PlacedButClusterScoped {
        namespace: String,
        api_version: String,
        kind: String,
    },
    #[error("the record has no namespace, but {api_version} {kind} is namespaced")]
    UnplacedButNamespaced { api_version: String, kind: String },
    #[error("the archived object is named {archived}, not {name}")]
    Renamed { archived: Value, name: String },
    #[error("the archived object is in namespace {archived}, not {namespace}")]
    Moved { archived: Value, namespace: String },
    #[error("cannot read: {source}")]
    Read {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("archived object unreadable: {source}")]
    Unreadable {
        object: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{source}")]
    Create {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("the archived object is not a JSON object")]
    NotAnObject { object: String },
    #[error("the archived object has no metadata")]
    NoMetadata { object: String },
}

/// What the records held that the caller may read, newest entry per uid, and what could not be
/// read (e.g. Secret records, for a caller who may not list Secrets).
#[derive(Debug, Default)]
pub struct Archive {
    pub entries: Vec<ArchiveEntry>,
    /// `namespace/name` of the record of each entry (same order).
    pub records: Vec<String>,
    pub notes: Vec<String>,
}

/// Says which keys of record `at` hold no entry it can read.
fn unreadable(notes: &mut Vec<String>, at: &str, keys: &[String]) {
    if !keys.is_empty() {
        notes.push(format!(
            "record {at}: {} value(s) are not archive entries and cannot be restored: {}",
            keys.len(),
            keys.join(", ")
        ));
    }
}

/// Reads every record in `namespace` (None: all namespaces) the caller may read.
///
/// Only entries whose record is where sweeper writes it are trusted: a namespaced object's
/// (cascade) entry in its own namespace (or in `sweeper_namespace`, where it goes when its own
/// namespace refuses it), a cluster-scoped object's or a tenant teardown's in
/// `sweeper_namespace`. Anyone who may create ConfigMaps in a namespace could forge a record
/// there; this way a forged record can name objects of that namespace only (which `--dry-run`
/// shows before anything is created), never a cluster-scoped one such as a ClusterRoleBinding.
pub async fn load(
    client: &Client,
    namespace: Option<&str>,
    sweeper_namespace: &str,
) -> Result<Archive, RestoreError> {
    // The external collector's audit records carry the archive label (they expire with the
    // archive) but hold AWS resources, which nothing can restore: not listed.
    let lp = ListParams::default().labels(&format!(
        "{LABEL_ARCHIVE}=true,{}!=external",
        super::LABEL_COLLECTOR
    ));
    let mut all: Vec<(ArchiveEntry, String)> = Vec::new();
    let mut notes = Vec::new();
    for kind in super::record_kind::BOTH {
        match kind.api(client, namespace).list(&lp).await {
            Ok(list) => {
                for o in list.items {
                    let at = format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
                    let (entries, bad) = kind.read(&o);
                    unreadable(&mut notes, &at, &bad);
                    all.extend(entries.into_iter().map(|e| (e, at.clone())));
                }
            }
            Err(kube::Error::Api(s)) if s.code == 403 && kind == RecordKind::Secret => {
                notes.push(format!(
                    "Secret records not read: you may not list Secrets{} ({})",
                    namespace.map(|n| format!(" in {n}")).unwrap_or_default(),
                    s.message
                ))
            }
            Err(source) => return Err(RestoreError::List { kind, source }),
        }
    }
    let before = all.len();
    all.retain(|(e, at)| {
        trusted(
            e,
            at.split('/').next().unwrap_or_default(),
            sweeper_namespace,
        )
    });
    if all.len() < before {
        notes.push(format!(
            "{} entries ignored: their record is not where sweeper writes it (the object's own namespace, or {sweeper_namespace} for cluster-scoped objects and tenants)",
            before - all.len()
        ));
    }
    // Newest entry per uid (a crash can leave an object archived twice until it is settled).
    all.sort_by(|a, b| b.0.archived_at.cmp(&a.0.archived_at));
    let mut seen = HashSet::new();
    all.retain(|(e, _)| seen.insert(e.uid.clone()));
    all.sort_by(|a, b| {
        (&a.0.archived_at, &a.0.namespace, &a.0.name).cmp(&(
            &b.0.archived_at,
            &b.0.namespace,
            &b.0.name,
        ))
    });
    let (entries, records) = all.into_iter().unzip();
    Ok(Archive {
        entries,
        records,
        notes,
    })
}

/// Whether an entry found in a record in `record_ns` is where sweeper writes it (see [`load`]).
fn trusted(e: &ArchiveEntry, record_ns: &str, sweeper_namespace: &str) -> bool {
    match (&e.namespace, &e.reason.tenant) {
        // A namespace that refused a record (being deleted, over quota) sends it to sweeper's
        // namespace, which is trusted for everything.
        (Some(ns), None) => record_ns == ns || record_ns == sweeper_namespace,
        _ => record_ns == sweeper_namespace,
    }
}

/// What to restore.
#[derive(Clone, Debug)]
pub enum Selection {
    /// One object: `group/version/kind` (`v1/ConfigMap` for the core group), namespace, name.
    Object {
        gvk: String,
        namespace: Option<String>,
        name: String,
    },
    /// The owner with this uid (when archived) and every dependent collected because of it,
    /// transitively.
    CascadeOf(String),
    /// Everything a tenant teardown deleted.
    Tenant(String),
}

/// `group/version/kind` → (apiVersion, kind).
fn split_gvk(gvk: &str) -> Option<(String, String)> {
    let (av, kind) = gvk.rsplit_once('/')?;
    (!av.is_empty() && !kind.is_empty()).then(|| (av.to_string(), kind.to_string()))
}

/// The entries `sel` names, in the order they must be created.
pub fn select(archive: &Archive, sel: &Selection) -> Result<Vec<ArchiveEntry>, RestoreError> {
    let entries = &archive.entries;
    let chosen: Vec<ArchiveEntry> = match sel {
        Selection::Object {
            gvk,
            namespace,
            name,
        } => {
            let (av, kind) =
                split_gvk(gvk).ok_or_else(|| RestoreError::NotAKind { gvk: gvk.clone() })?;
            // Newest last: archive entries are sorted by time.
            entries
                .iter()
                .rev()
                .find(|e| {
                    e.api_version == av
                        && e.kind == kind
                        && e.name == *name
                        && e.namespace.as_deref() == namespace.as_deref()
                })
                .cloned()
                .into_iter()
                .collect()
        }
        Selection::CascadeOf(root) => {
            let mut set: HashSet<String> = HashSet::from([root.clone()]);
            loop {
                let before = set.len();
                for e in entries {
                    if e.owner_uids().iter().any(|u| set.contains(u)) {
                        set.insert(e.uid.clone());
                    }
                }
                if set.len() == before {
                    break;
                }
            }
            entries
                .iter()
                .filter(|e| set.contains(&e.uid))
                .cloned()
                .collect()
        }
        Selection::Tenant(id) => entries
            .iter()
            .filter(|e| e.reason.tenant.as_deref() == Some(id.as_str()))
            .cloned()
            .collect(),
    };
    if chosen.is_empty() {
        return Err(RestoreError::NothingMatches {
            selection: sel.clone(),
            notes: archive.notes.clone(),
        });
    }
    Ok(order(chosen))
}

/// Creation order: every owner before its dependents and every CRD before its custom resources
/// (a topological order); among objects free to go, CRDs first, then namespaces, then
/// cluster-scoped objects, then namespaced ones, then the archive's order. A Namespace owned by a
/// cluster-scoped custom resource thus waits for its owner's CRD and its owner, instead of being
/// created first and losing its owner reference. An owner cycle (possible in the wild) is broken
/// at the first of its members in that order. No recursion: any depth or size is fine.
pub fn order(entries: Vec<ArchiveEntry>) -> Vec<ArchiveEntry> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = entries.len();
    let by_uid: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.uid.as_str(), i))
        .collect();
    let crds = CrdIndex::of(&entries);
    // Edges: what must exist first -> what needs it.
    let mut needs: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut waiting_on = vec![0usize; n];
    for (i, e) in entries.iter().enumerate() {
        let mut before: Vec<usize> = e
            .owner_uids()
            .iter()
            .filter_map(|u| by_uid.get(u.as_str()).copied())
            .collect();
        if let Some(crd) = crds.serving(e) {
            before.push(crd);
        }
        before.sort_unstable();
        before.dedup();
        for j in before.into_iter().filter(|&j| j != i) {
            needs[j].push(i);
            waiting_on[i] += 1;
        }
    }
    let rank = |e: &ArchiveEntry| match (e.api_version.as_str(), e.kind.as_str(), &e.namespace) {
        (
            "apiextensions.k8s.io/v1" | "apiextensions.k8s.io/v1beta1",
            "CustomResourceDefinition",
            _,
        ) => 0u8,
        ("v1", "Namespace", _) => 1,
        (_, _, None) => 2,
        _ => 3,
    };
    let ranks: Vec<u8> = entries.iter().map(rank).collect();
    let mut ready: BinaryHeap<Reverse<(u8, usize)>> = (0..n)
        .filter(|&i| waiting_on[i] == 0)
        .map(|i| Reverse((ranks[i], i)))
        .collect();
    // Everything in (rank, archive order), for breaking cycles: a cursor passes each once.
    let mut by_key: Vec<usize> = (0..n).collect();
    by_key.sort_by_key(|&i| (ranks[i], i));
    let mut cursor = 0;
    let mut done = vec![false; n];
    let mut out: Vec<usize> = Vec::with_capacity(n);
    while out.len() < n {
        let next = match ready.pop() {
            Some(Reverse((_, i))) => i,
            // Only cycles are left: take the first of what remains.
            None => {
                while cursor < n && done[by_key[cursor]] {
                    cursor += 1;
                }
                match by_key.get(cursor) {
                    Some(&i) => i,
                    None => break,
                }
            }
        };
        if done[next] {
            continue;
        }
        done[next] = true;
        out.push(next);
        for &d in &needs[next] {
            waiting_on[d] = waiting_on[d].saturating_sub(1);
            if waiting_on[d] == 0 && !done[d] {
                ready.push(Reverse((ranks[d], d)));
            }
        }
    }
    let mut slots: Vec<Option<ArchiveEntry>> = entries.into_iter().map(Some).collect();
    out.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// The CRDs among a restore's entries by the (group, kind) they serve, read from the archived
/// CRDs' specs once, so that finding an entry's CRD is a lookup, not a scan of every entry.
struct CrdIndex<'a>(HashMap<(&'a str, &'a str), usize>);

impl<'a> CrdIndex<'a> {
    fn of(entries: &'a [ArchiveEntry]) -> Self {
        let mut index = HashMap::new();
        for (i, c) in entries.iter().enumerate() {
            if c.kind != "CustomResourceDefinition" {
                continue;
            }
            let spec = &c.object["spec"];
            if let (Some(group), Some(kind)) =
                (spec["group"].as_str(), spec["names"]["kind"].as_str())
            {
                // The first wins, as a scan in archive order would find it.
                index.entry((group, kind)).or_insert(i);
            }
        }
        CrdIndex(index)
    }

    /// The index of the CRD that serves `e`'s kind.
    fn serving(&self, e: &ArchiveEntry) -> Option<usize> {
        let group = e.api_version.rsplit_once('/')?.0;
        self.0.get(&(group, e.kind.as_str())).copied()
    }
}

/// How a restore went.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RestoreSummary {
    pub restored: usize,
    pub skipped: usize,
    pub failed: usize,
}

/// Creates `entries` (already ordered) as the client's identity; one progress line per object
/// on `out`. `dry_run` creates nothing and prints the plan.
pub async fn restore(
    client: &Client,
    entries: &[ArchiveEntry],
    dry_run: bool,
    out: &mut dyn FnMut(String),
) -> RestoreSummary {
    let mut run = Run {
        client,
        entries,
        dry_run,
        resolver: Resolver::default(),
        new_uids: HashMap::new(),
        in_plan: entries.iter().map(|e| e.uid.as_str()).collect(),
        crds: CrdIndex::of(entries),
        failed: HashSet::new(),
        unserved: HashSet::new(),
    };
    let mut summary = RestoreSummary::default();
    for e in entries {
        match run.one(e).await {
            Ok(Done::Restored(line)) => {
                summary.restored += 1;
                out(line);
            }
            Ok(Done::Skipped(line)) => {
                summary.skipped += 1;
                out(line);
            }
            // The one failure arm: reported, counted, and remembered so its dependents are not
            // created either.
            Err(why) => {
                out(format!("failed    {}: {why}", e.label()));
                run.failed.insert(e.uid.clone());
                summary.failed += 1;
            }
        }
    }
    out(format!(
        "{}: {} restored, {} skipped (exist again), {} failed",
        if dry_run { "plan" } else { "done" },
        summary.restored,
        summary.skipped,
        summary.failed
    ));
    summary
}

/// One restore's state across its entries.
struct Run<'a> {
    client: &'a Client,
    entries: &'a [ArchiveEntry],
    dry_run: bool,
    resolver: Resolver,
    /// Archived uid -> the uid its object has now (created, or existing again).
    new_uids: HashMap<String, String>,
    in_plan: HashSet<&'a str>,
    crds: CrdIndex<'a>,
    /// Objects of this restore that could not be created: their dependents are not created
    /// either (they would come back without their owner, and never be collected).
    failed: HashSet<String>,
    /// Kinds already waited for in vain.
    unserved: HashSet<(String, String)>,
}

/// What became of one entry (a failure is the `Err` of [`Run::one`], its reason).
enum Done {
    /// Created, or would be in a dry run: the progress line.
    Restored(String),
    /// Exists again: not overwritten.
    Skipped(String),
}

impl Run<'_> {
    async fn one(&mut self, e: &ArchiveEntry) -> Result<Done, RestoreError> {
        let label = e.label();
        if let Some(owner) = e
            .owner_uids()
            .into_iter()
            .find(|u| self.in_plan.contains(u.as_str()) && self.failed.contains(u))
        {
            return Err(RestoreError::OwnerFailed {
                object: label,
                owner,
            });
        }
        let kind = (e.api_version.clone(), e.kind.clone());
        let resolved = if self.unserved.contains(&kind) {
            None
        } else {
            resolve_waiting(self.client, &mut self.resolver, e, self.dry_run).await
        };
        let Some((ar, namespaced)) = resolved else {
            self.unserved.insert(kind);
            if self.dry_run
                && let Some(crd) = self.crds.serving(e).map(|i| &self.entries[i].name)
            {
                return Ok(Done::Restored(format!(
                    "would create {label} (once CRD {crd} is restored)"
                )));
            }
            return Err(RestoreError::NotServed {
                api_version: e.api_version.clone(),
                kind: e.kind.clone(),
            });
        };
        // The entry's scope must be the kind's: a record in a namespace (where anyone who may
        // create ConfigMaps could forge one) never makes a cluster-scoped object.
        consistent(e, namespaced).map_err(|why| RestoreError::Refused {
            object: label.clone(),
            why: Box::new(why),
        })?;
        let api: Api<DynamicObject> = match (&e.namespace, namespaced) {
            (Some(ns), true) => Api::namespaced_with(self.client.clone(), ns, &ar),
            _ => Api::all_with(self.client.clone(), &ar),
        };
        if let Some(existing) = api
            .get_opt(&e.name)
            .await
            .map_err(|source| RestoreError::Read {
                object: label.clone(),
                source,
            })?
        {
            let uid = existing.uid().unwrap_or_default();
            self.new_uids.insert(e.uid.clone(), uid.clone());
            return Ok(Done::Skipped(format!(
                "skipped   {label}: exists again (uid {uid}), not overwritten"
            )));
        }
        self.create(&api, e, label).await
    }

    /// Creates the entry's object (gone, and its kind served) through `api`, or says it would.
    async fn create(
        &mut self,
        api: &Api<DynamicObject>,
        e: &ArchiveEntry,
        label: String,
    ) -> Result<Done, RestoreError> {
        let (object, notes) = prepare(self.client, &mut self.resolver, e, &self.new_uids).await?;
        if self.dry_run {
            self.new_uids
                .insert(e.uid.clone(), format!("(new uid of {label})"));
            return Ok(Done::Restored(format!(
                "would create {label}{}",
                suffix(&notes)
            )));
        }
        let obj: DynamicObject =
            serde_json::from_value(object).map_err(|source| RestoreError::Unreadable {
                object: label.clone(),
                source,
            })?;
        let created = api
            .create(&PostParams::default(), &obj)
            .await
            .map_err(|source| RestoreError::Create {
                object: label.clone(),
                source,
            })?;
        self.new_uids
            .insert(e.uid.clone(), created.uid().unwrap_or_default());
        if e.kind == "CustomResourceDefinition" {
            wait_established(self.client, &e.name).await;
        }
        Ok(Done::Restored(format!(
            "restored  {label}{}",
            suffix(&notes)
        )))
    }
}

fn suffix(notes: &[String]) -> String {
    if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join("; "))
    }
}

/// Resolves the entry's kind; a custom resource whose CRD this restore just created may take a
/// few seconds to be served.
async fn resolve_waiting(
    client: &Client,
    resolver: &mut Resolver,
    e: &ArchiveEntry,
    dry_run: bool,
) -> Option<(kube::api::ApiResource, bool)> {
    let tries = if dry_run { 1 } else { 30 };
    for i in 0..tries {
        if i > 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            *resolver = Resolver::default();
        }
        if let Some(r) = resolver.resolve(client, &e.api_version, &e.kind).await {
            return Some(r);
        }
    }
    None
}

/// Whether the entry agrees with itself and with the kind: namespaced exactly when the kind is,
/// and the archived object's own name and namespace the entry's (what is checked for existence
/// and trusted by record location is what gets created).
fn consistent(e: &ArchiveEntry, namespaced: bool) -> Result<(), RestoreError> {
    match (&e.namespace, namespaced) {
        (Some(ns), false) => {
            return Err(RestoreError::PlacedButClusterScoped {
                namespace: ns.clone(),
                api_version: e.api_version.clone(),
                kind: e.kind.clone(),
            });
        }
        (None, true) => {
            return Err(RestoreError::UnplacedButNamespaced {
                api_version: e.api_version.clone(),
                kind: e.kind.clone(),
            });
        }
        _ => {}
    }
    let meta = &e.object["metadata"];
    if meta["name"].as_str() != Some(e.name.as_str()) {
        return Err(RestoreError::Renamed {
            archived: meta["name"].clone(),
            name: e.name.clone(),
        });
    }
    let ns = meta["namespace"].as_str().filter(|s| !s.is_empty());
    if namespaced && ns.is_some() && ns != e.namespace.as_deref() {
        return Err(RestoreError::Moved {
            archived: meta["namespace"].clone(),
            namespace: e.namespace.clone().unwrap_or_default(),
        });
    }
    Ok(())
}

/// The object to create: server-set and deletion state gone, owner references re-pointed (or
/// dropped, with a note saying so).
async fn prepare(
    client: &Client,
    resolver: &mut Resolver,
    e: &ArchiveEntry,
    new_uids: &HashMap<String, String>,
) -> Result<(Value, Vec<String>), RestoreError> {
    let mut object = e.object.clone();
    let mut notes = Vec::new();
    strip_for_create(&mut object, e)?;
    let refs = object["metadata"]
        .get("ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut kept = Vec::new();
    for r in refs {
        if let Some(r) = repoint_owner(client, resolver, e, new_uids, r, &mut notes).await {
            kept.push(r);
        }
    }
    if let Some(m) = object["metadata"].as_object_mut() {
        if kept.is_empty() {
            m.remove("ownerReferences");
        } else {
            m.insert("ownerReferences".into(), Value::Array(kept));
        }
    }
    Ok((object, notes))
}

/// Removes what the server sets and what deletion left (status, the deletion finalizers) from an
/// archived object (of entry `e`); a value that is not an object with metadata cannot be created.
fn strip_for_create(object: &mut Value, e: &ArchiveEntry) -> Result<(), RestoreError> {
    let Some(o) = object.as_object_mut() else {
        return Err(RestoreError::NotAnObject { object: e.label() });
    };
    o.remove("status");
    if !o.get("metadata").is_some_and(Value::is_object) {
        return Err(RestoreError::NoMetadata { object: e.label() });
    }
    if let Some(f) = object["metadata"]
        .get_mut("finalizers")
        .and_then(Value::as_array_mut)
    {
        f.retain(|x| {
            !matches!(
                x.as_str(),
                Some(
                    "foregroundDeletion"
                        | "orphan"
                        | crate::engine::meta::FINALIZER_CASCADE_COMPLETE
                )
            )
        });
    }
    Ok(())
}

/// One owner reference of `e`, as the restored object carries it: to the owner restored here
/// (its new uid), to one that exists again by name (its uid now), or dropped (None) when the
/// owner is neither or the reference is malformed; `notes` says what changed.
async fn repoint_owner(
    client: &Client,
    resolver: &mut Resolver,
    e: &ArchiveEntry,
    new_uids: &HashMap<String, String>,
    mut r: Value,
    notes: &mut Vec<String>,
) -> Option<Value> {
    // A reference that is not an object is malformed: dropped (and said), never indexed into.
    if !r.is_object() {
        notes.push(format!("malformed owner reference {r} dropped"));
        return None;
    }
    let uid = r["uid"].as_str().unwrap_or_default().to_string();
    let kind = r["kind"].as_str().unwrap_or_default().to_string();
    let name = r["name"].as_str().unwrap_or_default().to_string();
    if let Some(new) = new_uids.get(&uid) {
        r["uid"] = Value::String(new.clone());
        return Some(r);
    }
    // Not restored here: an owner that exists again by name is pointed to.
    let av = r["apiVersion"].as_str().unwrap_or_default().to_string();
    let existing = match resolver.resolve(client, &av, &kind).await {
        Some((ar, namespaced)) => {
            let api: Api<DynamicObject> = match (&e.namespace, namespaced) {
                (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &ar),
                _ => Api::all_with(client.clone(), &ar),
            };
            api.get_opt(&name).await.ok().flatten()
        }
        None => None,
    };
    match existing.and_then(|o| o.uid()) {
        Some(u) if u == uid => Some(r),
        Some(u) => {
            notes.push(format!(
                "owner {kind} {name} re-pointed to the existing one ({u})"
            ));
            r["uid"] = Value::String(u);
            Some(r)
        }
        None => {
            notes.push(format!(
                "owner {kind} {name} is gone and not in the archive: reference dropped"
            ));
            None
        }
    }
}

async fn wait_established(client: &Client, name: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for _ in 0..60 {
        let crd = api.get_opt(name).await.ok().flatten();
        let ok = {
            use kube::runtime::wait::{Condition, conditions::is_crd_established};
            is_crd_established().matches_object(crd.as_ref())
        };
        if ok {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The table `sweeper archive list` prints; `since` keeps entries archived at or after it.
pub fn render(archive: &Archive, since: Option<Timestamp>) -> String {
    let mut rows: Vec<[String; 6]> = vec![[
        "ARCHIVED".into(),
        "KIND".into(),
        "OBJECT".into(),
        "UID".into(),
        "REASON".into(),
        "RECORD".into(),
    ]];
    for (e, rec) in archive.entries.iter().zip(&archive.records) {
        if let Some(s) = since
            && e.archived_at.parse::<Timestamp>().is_ok_and(|t| t < s)
        {
            continue;
        }
        rows.push([
            e.archived_at.chars().take(19).collect(),
            format!("{}/{}", e.api_version, e.kind),
            match &e.namespace {
                Some(ns) => format!("{ns}/{}", e.name),
                None => e.name.clone(),
            },
            e.uid.clone(),
            e.reason.to_string(),
            rec.clone(),
        ]);
    }
    let mut widths = [0usize; 6];
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    for n in &archive.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::DeletionReason;
    use serde_json::json;

    fn entry(uid: &str, kind: &str, ns: Option<&str>, owners: &[&str]) -> ArchiveEntry {
        let refs: Vec<Value> = owners
            .iter()
            .map(|o| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": format!("n-{o}"), "uid": o}))
            .collect();
        ArchiveEntry {
            api_version: if kind == "CustomResourceDefinition" {
                "apiextensions.k8s.io/v1".into()
            } else {
                "v1".into()
            },
            kind: kind.into(),
            namespace: ns.map(String::from),
            name: format!("n-{uid}"),
            uid: uid.into(),
            resource_version: "1".into(),
            deleted_by: "sweeper-cascade".into(),
            reason: DeletionReason::default(),
            archived_at: format!("2026-11-23T00:00:0{}Z", uid.len() % 10),
            object: json!({"metadata": {"name": format!("n-{uid}"), "ownerReferences": refs}}),
        }
    }

    #[test]
    fn cascade_of_takes_the_owner_and_every_transitive_dependent_owners_first() {
        let archive = Archive {
            entries: vec![
                entry("c", "ConfigMap", Some("ns"), &["b"]),
                entry("b", "ConfigMap", Some("ns"), &["root"]),
                entry("root", "ConfigMap", Some("ns"), &[]),
                entry("other", "ConfigMap", Some("ns"), &["elsewhere"]),
            ],
            records: vec!["r".into(); 4],
            notes: vec![],
        };
        let picked = select(&archive, &Selection::CascadeOf("root".into())).unwrap();
        let uids: Vec<&str> = picked.iter().map(|e| e.uid.as_str()).collect();
        assert_eq!(uids, vec!["root", "b", "c"]);
        // Without the owner archived (a plain background cascade), its dependents still come.
        let no_root = Archive {
            entries: archive.entries[..2].to_vec(),
            records: vec!["r".into(); 2],
            notes: vec![],
        };
        let picked = select(&no_root, &Selection::CascadeOf("root".into())).unwrap();
        assert_eq!(
            picked.iter().map(|e| e.uid.as_str()).collect::<Vec<_>>(),
            vec!["b", "c"]
        );
        assert!(select(&archive, &Selection::CascadeOf("nobody".into())).is_err());
    }

    #[test]
    fn crds_come_first_then_namespaces_then_cluster_scoped_then_namespaced() {
        let ordered = order(vec![
            entry("cr", "Widget", Some("ns"), &[]),
            entry("role", "ClusterRole", None, &[]),
            entry("ns", "Namespace", None, &[]),
            entry("crd", "CustomResourceDefinition", None, &[]),
        ]);
        let kinds: Vec<&str> = ordered.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            vec![
                "CustomResourceDefinition",
                "Namespace",
                "ClusterRole",
                "Widget"
            ]
        );
    }

    #[test]
    fn owners_and_crds_come_before_what_needs_them_whatever_their_rank() {
        // A Namespace owned by a cluster-scoped custom resource whose CRD is restored too.
        let mut crd = entry("crd", "CustomResourceDefinition", None, &[]);
        crd.object["spec"] = json!({"group": "p.example.com", "names": {"kind": "Project"}});
        let mut project = entry("project", "Project", None, &[]);
        project.api_version = "p.example.com/v1".into();
        let ordered = order(vec![
            entry("ns", "Namespace", None, &["project"]),
            entry("cm", "ConfigMap", Some("ns"), &[]),
            project,
            crd,
        ]);
        let uids: Vec<&str> = ordered.iter().map(|e| e.uid.as_str()).collect();
        assert_eq!(uids, vec!["crd", "project", "ns", "cm"]);
    }

    #[test]
    fn a_long_owner_chain_and_a_large_cycle_are_ordered_without_recursion() {
        let n = 50_000;
        let mut chain: Vec<ArchiveEntry> = (0..n)
            .map(|i| {
                let owner = format!("u{}", (i + 1) % n);
                entry(&format!("u{i}"), "ConfigMap", Some("ns"), &[owner.as_str()])
            })
            .collect();
        chain.reverse();
        let ordered = order(chain);
        assert_eq!(ordered.len(), n);
    }

    #[test]
    fn a_record_whose_scope_or_identity_disagrees_with_the_kind_is_refused() {
        // A forged namespaced record naming a cluster-scoped kind.
        let forged = entry("x", "ClusterRoleBinding", Some("dev"), &[]);
        assert!(
            consistent(&forged, false)
                .unwrap_err()
                .to_string()
                .contains("cluster-scoped")
        );
        let unplaced = entry("y", "ConfigMap", None, &[]);
        assert!(consistent(&unplaced, true).is_err());
        let mut renamed = entry("z", "ConfigMap", Some("ns"), &[]);
        renamed.object["metadata"]["name"] = json!("someone-else");
        assert!(
            consistent(&renamed, true)
                .unwrap_err()
                .to_string()
                .contains("named")
        );
        let mut moved = entry("w", "ConfigMap", Some("ns"), &[]);
        moved.object["metadata"]["namespace"] = json!("kube-system");
        assert!(
            consistent(&moved, true)
                .unwrap_err()
                .to_string()
                .contains("kube-system")
        );
        assert!(consistent(&entry("v", "ConfigMap", Some("ns"), &[]), true).is_ok());
    }

    #[test]
    fn records_are_trusted_only_where_sweeper_writes_them() {
        let namespaced = entry("a", "ConfigMap", Some("shop"), &[]);
        assert!(trusted(&namespaced, "shop", "sweeper-system"));
        assert!(
            trusted(&namespaced, "sweeper-system", "sweeper-system"),
            "moved there when its namespace refused the record"
        );
        assert!(!trusted(&namespaced, "dev", "sweeper-system"));
        let cluster = entry("b", "ClusterRole", None, &[]);
        assert!(trusted(&cluster, "sweeper-system", "sweeper-system"));
        assert!(!trusted(&cluster, "dev", "sweeper-system"), "a forgery");
        let mut tenant = entry("c", "ConfigMap", Some("t1-ns"), &[]);
        tenant.reason.tenant = Some("t1".into());
        assert!(!trusted(&tenant, "t1-ns", "sweeper-system"));
        assert!(trusted(&tenant, "sweeper-system", "sweeper-system"));
    }

    #[test]
    fn an_owner_cycle_does_not_hang_the_order() {
        let ordered = order(vec![
            entry("a", "ConfigMap", Some("ns"), &["b"]),
            entry("b", "ConfigMap", Some("ns"), &["a"]),
        ]);
        assert_eq!(ordered.len(), 2);
    }

    #[test]
    fn one_object_is_found_by_group_version_kind_namespace_and_name() {
        let archive = Archive {
            entries: vec![entry("x", "ConfigMap", Some("ns"), &[])],
            records: vec!["r".into()],
            notes: vec![],
        };
        let sel = Selection::Object {
            gvk: "v1/ConfigMap".into(),
            namespace: Some("ns".into()),
            name: "n-x".into(),
        };
        assert_eq!(select(&archive, &sel).unwrap().len(), 1);
        let wrong_ns = Selection::Object {
            gvk: "v1/ConfigMap".into(),
            namespace: None,
            name: "n-x".into(),
        };
        assert!(select(&archive, &wrong_ns).is_err());
        let bad = Selection::Object {
            gvk: "ConfigMap".into(),
            namespace: None,
            name: "n-x".into(),
        };
        assert!(
            select(&archive, &bad)
                .unwrap_err()
                .to_string()
                .contains("group/version/kind")
        );
    }
}
