//! `BENCH_ONLY=startup` of `make bench-cascade` (issue #26, item 2): with 100,000 objects in the
//! API server, the time from a garbage collector's process start to "graph synced, first
//! dependent classified", for sweeper and for kube-controller-manager's garbage collector, and
//! both processes' RSS at that moment. Prints `BENCH cascade.startup100k` and
//! `BENCH cascade.rss100k`, then `BENCH cascade.startup100k.detail ...` lines.
//!
//! Measured from outside, the same way for both:
//! - the fill: 100,000 ConfigMaps labelled `bench=startup` in four namespaces, 1,000 owners with
//!   99 dependents each (a solid, non-blocking owner reference). Created once with 64 creations
//!   in flight, reused by every run (and by a later invocation with `BENCH_KEEP_FILLER=1`, which
//!   keeps it at the end; otherwise its namespaces are deleted and waited for);
//! - the probe: one more ConfigMap whose owner reference names a UID that does not exist,
//!   created (and seen by a watch of this driver) just before the collector is spawned. It is
//!   listed last (its name sorts after the fill's in the last namespace). Its deletion is "first
//!   dependent classified": both collectors start their workers only once every watched
//!   resource has been listed (sweeper's graph sync; kube-controller-manager's
//!   `WaitForCacheSync` over its monitors), and only a worker deletes it;
//! - at the deletion seen by the watch: the collector's VmRSS (and VmHWM, its peak so far) from
//!   `/proc/<pid>/status`, and its CPU time; then its RSS once stable, as a detail;
//! - after each run the fill is counted: a collector that deleted any of it fails the benchmark.
//!
//! `BENCH_STARTUP_RUNS` runs (default 3) of each collector, alternating which goes first;
//! medians, with min-max in the detail lines. Sweeper runs as in the unthrottled comparison
//! (`--archive none`, `--kube-api-qps 0`), kube-controller-manager with
//! `--controllers garbagecollector` and an effectively unlimited qps. `BENCH_SCALE` scales the
//! owners (0.01: 10 owners, 1,000 objects).

use crate::stats::{median, min_max};
use crate::{Gc, LIMITS, cpu_seconds, servers_cpu_seconds, stable_rss, start};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, PartialObjectMeta, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

const NAMESPACES: usize = 4;
const OWNERS: usize = 1000;
const PER_OWNER: usize = 99;
const FILL_LABEL: &str = "bench=startup";
const PROBE_LABEL: &str = "bench=startup-probe";

fn ns_of(owner: usize) -> String {
    format!("bench-startup-{}", owner % NAMESPACES)
}

fn owner_name(owner: usize) -> String {
    format!("own-{owner:04}")
}

fn dependent_name(owner: usize, j: usize) -> String {
    format!("dep-{owner:04}-{j:02}")
}

fn labelled(name: String, label: &str, owner: Option<OwnerReference>) -> ConfigMap {
    let (k, v) = label.split_once('=').unwrap();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name);
    cm.metadata.labels = Some(BTreeMap::from([(k.to_string(), v.to_string())]));
    cm.metadata.owner_references = owner.map(|o| vec![o]);
    cm.data = Some(BTreeMap::from([("k".to_string(), "v".to_string())]));
    cm
}

fn owner_ref(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: name.into(),
        uid: uid.into(),
        block_owner_deletion: Some(false),
        controller: None,
    }
}

/// Until the namespace exists and is not terminating (a previous run's may still be going).
async fn ensure_namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    for _ in 0..600 {
        match api.get_opt(name).await.expect("get namespace") {
            Some(ns) if ns.metadata.deletion_timestamp.is_none() => return,
            Some(_) => tokio::time::sleep(Duration::from_secs(1)).await,
            None => {
                let mut ns = Namespace::default();
                ns.metadata.name = Some(name.into());
                let _ = api.create(&PostParams::default(), &ns).await;
            }
        }
    }
    panic!("namespace {name} still terminating after 10 minutes");
}

/// Metadata of every ConfigMap matching `selector`, in all namespaces (paged).
async fn list_all(client: &Client, selector: &str) -> Vec<PartialObjectMeta<ConfigMap>> {
    let api: Api<ConfigMap> = Api::all(client.clone());
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().labels(selector).limit(10_000);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list_metadata(&lp).await.expect("list configmaps");
        out.extend(page.items);
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return out;
        }
    }
}

/// Creates `objects` (namespace, ConfigMap) with 64 creations in flight (an existing one is fine).
async fn create_all(client: &Client, objects: Vec<(String, ConfigMap)>) {
    let objects = objects
        .into_iter()
        .map(|(ns, cm)| (Api::<ConfigMap>::namespaced(client.clone(), &ns), cm))
        .collect();
    crate::objects::create_each(objects, 64).await;
}

/// Deletes `objects` (namespace, name) with 64 deletions in flight (a missing one is fine).
async fn delete_all(client: &Client, objects: Vec<(String, String)>) {
    let objects = objects
        .into_iter()
        .map(|(ns, name)| (Api::<ConfigMap>::namespaced(client.clone(), &ns), name))
        .collect();
    crate::objects::delete_each(objects, 64).await;
}

/// Makes the fill exactly `owners` owners with [`PER_OWNER`] dependents each: creates what is
/// missing, deletes what is beyond, and replaces a dependent whose reference is not its owner's
/// current UID (it would be dangling: collected, and the fill broken). Leftover probes go too.
/// Returns the seconds spent and the objects created.
async fn ensure_fill(client: &Client, owners: usize) -> (f64, usize) {
    let t = Instant::now();
    for n in 0..NAMESPACES {
        ensure_namespace(client, &ns_of(n)).await;
    }
    let probes: Vec<(String, String)> = list_all(client, PROBE_LABEL)
        .await
        .into_iter()
        .map(|p| (p.namespace().unwrap_or_default(), p.name_any()))
        .collect();
    delete_all(client, probes).await;

    let have = list_all(client, FILL_LABEL).await;
    let mut existing: HashMap<(String, String), (String, Option<String>)> = have
        .into_iter()
        .map(|o| {
            let owner_uid = o.owner_references().first().map(|r| r.uid.clone());
            (
                (o.namespace().unwrap_or_default(), o.name_any()),
                (o.uid().unwrap_or_default(), owner_uid),
            )
        })
        .collect();
    // Owners first: dependents need their UIDs.
    let missing_owners: Vec<(String, ConfigMap)> = (0..owners)
        .filter(|&i| !existing.contains_key(&(ns_of(i), owner_name(i))))
        .map(|i| (ns_of(i), labelled(owner_name(i), FILL_LABEL, None)))
        .collect();
    let mut created = missing_owners.len();
    if !missing_owners.is_empty() {
        eprintln!("startup: creating {} owners", missing_owners.len());
        create_all(client, missing_owners).await;
        for o in list_all(client, FILL_LABEL).await {
            if o.owner_references().is_empty() {
                existing.insert(
                    (o.namespace().unwrap_or_default(), o.name_any()),
                    (o.uid().unwrap_or_default(), None),
                );
            }
        }
    }
    let mut wanted: HashMap<(String, String), ()> = HashMap::new();
    let mut stale = Vec::new();
    let mut create = Vec::new();
    for i in 0..owners {
        let ns = ns_of(i);
        let (owner_uid, _) = existing[&(ns.clone(), owner_name(i))].clone();
        wanted.insert((ns.clone(), owner_name(i)), ());
        for j in 0..PER_OWNER {
            let key = (ns.clone(), dependent_name(i, j));
            wanted.insert(key.clone(), ());
            match existing.get(&key) {
                Some((_, Some(uid))) if *uid == owner_uid => {}
                found => {
                    if found.is_some() {
                        stale.push(key.clone());
                    }
                    let oref = owner_ref(&owner_name(i), &owner_uid);
                    create.push((ns.clone(), labelled(key.1, FILL_LABEL, Some(oref))));
                }
            }
        }
    }
    let beyond: Vec<(String, String)> = existing
        .keys()
        .filter(|k| !wanted.contains_key(*k))
        .cloned()
        .collect();
    if !beyond.is_empty() || !stale.is_empty() {
        eprintln!(
            "startup: deleting {} objects beyond {owners} owners and {} with a stale owner",
            beyond.len(),
            stale.len()
        );
        delete_all(client, beyond.into_iter().chain(stale).collect()).await;
    }
    created += create.len();
    if !create.is_empty() {
        eprintln!(
            "startup: creating {} dependents (64 in flight)",
            create.len()
        );
        for chunk in create.chunks(10_000) {
            create_all(client, chunk.to_vec()).await;
        }
    }
    (t.elapsed().as_secs_f64(), created)
}

/// Deletes the fill's namespaces and waits until they are gone (the environment's namespace
/// controller empties them), so what runs next does not share the server with the deletion.
async fn drop_fill(client: &Client) {
    let api: Api<Namespace> = Api::all(client.clone());
    for n in 0..NAMESPACES {
        let _ = api.delete(&ns_of(n), &DeleteParams::default()).await;
    }
    for _ in 0..900 {
        let mut left = 0;
        for n in 0..NAMESPACES {
            if api
                .get_opt(&ns_of(n))
                .await
                .expect("get namespace")
                .is_some()
            {
                left += 1;
            }
        }
        if left == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!("startup: the fill's namespaces were not gone after 15 minutes");
}

/// VmRSS and VmHWM (the peak so far) of a process, in bytes.
fn rss_and_peak(pid: u32) -> (u64, u64) {
    use crate::proc::status_bytes;
    (status_bytes(pid, "VmRSS:"), status_bytes(pid, "VmHWM:"))
}

/// One collector's start-up.
#[derive(Clone, Copy)]
struct Sample {
    seconds: f64,
    rss: u64,
    peak: u64,
    stable: u64,
    cpu: f64,
    servers_cpu: f64,
}

/// Creates the dangling probe, spawns `gc`, and times the probe's deletion (see the module doc).
async fn one_run(client: &Client, gc: Gc, name: &str, fill: usize) -> Sample {
    let ns = ns_of(NAMESPACES - 1);
    let api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.clone(), &ns);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = watcher::watcher(api, cfg).boxed();
    while let Some(ev) = stream.try_next().await.expect("watch") {
        if matches!(ev, Event::InitDone) {
            break;
        }
    }
    // An owner that never existed: a UID no object has.
    let missing = owner_ref(
        "startup-owner-missing",
        &format!(
            "00000000-0000-4000-8000-{:012x}",
            rand::random::<u64>() >> 16
        ),
    );
    let probe = labelled(name.into(), PROBE_LABEL, Some(missing));
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &probe)
        .await
        .expect("create probe");
    loop {
        match stream.try_next().await.expect("watch") {
            Some(Event::Apply(_)) | Some(Event::InitApply(_)) => break,
            Some(_) => {}
            None => panic!("probe watch ended"),
        }
    }
    let servers_before = servers_cpu_seconds();
    let t0 = Instant::now();
    let running = start(gc, LIMITS[1]);
    let pid = running.child.id();
    // Gone: a Delete event, or a relist (the watch was re-established) without the probe.
    let mut present = true;
    let gone = async {
        loop {
            match stream.try_next().await.expect("watch") {
                Some(Event::Delete(_)) => return,
                Some(Event::Init) => present = false,
                Some(Event::InitApply(_)) => present = true,
                Some(Event::InitDone) if !present => return,
                Some(_) => {}
                None => panic!("probe watch ended"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(600), gone)
        .await
        .unwrap_or_else(|_| panic!("{gc:?} did not delete the probe within 10 minutes"));
    let seconds = t0.elapsed().as_secs_f64();
    let (rss, peak) = rss_and_peak(pid);
    let cpu = cpu_seconds(&pid.to_string());
    let servers_cpu = servers_cpu_seconds() - servers_before;
    let stable = stable_rss(pid).await;
    drop(running);
    let left = list_all(client, FILL_LABEL).await.len();
    assert_eq!(
        left,
        fill,
        "{gc:?} deleted {} objects of the fill: the benchmark is broken",
        fill as i64 - left as i64
    );
    let mb = |b: u64| b as f64 / 1e6;
    eprintln!(
        "startup {gc:?}: probe deleted {seconds:.2}s after spawn; RSS {:.0} MB (peak {:.0}, stable {:.0}); CPU {cpu:.2}s; etcd+apiserver CPU {servers_cpu:.2}s; fill intact ({left})",
        mb(rss),
        mb(peak),
        mb(stable)
    );
    Sample {
        seconds,
        rss,
        peak,
        stable,
        cpu,
        servers_cpu,
    }
}

/// The start-up part: `BENCH cascade.startup100k`, `cascade.rss100k` and detail lines.
pub async fn part(client: &Client, scale: f64) -> Vec<String> {
    let owners = ((OWNERS as f64 * scale).round() as usize).max(1);
    let fill = owners * (1 + PER_OWNER);
    let runs: usize = std::env::var("BENCH_STARTUP_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let (took, created) = ensure_fill(client, owners).await;
    let have = list_all(client, FILL_LABEL).await.len();
    assert_eq!(have, fill, "the fill is not as made");
    eprintln!("startup: fill of {fill} objects ready ({created} created in {took:.0}s)");
    // Let the server settle after creating (its watch cache, etcd's compaction).
    if created > 0 {
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    let tag = rand::random::<u32>() % 0xffff;
    let mut sweeper = Vec::new();
    let mut kcm = Vec::new();
    for r in 0..runs {
        let order = if r % 2 == 0 {
            [Gc::Sweeper, Gc::Kcm]
        } else {
            [Gc::Kcm, Gc::Sweeper]
        };
        for gc in order {
            let name = format!("zz-probe-{tag:04x}-{r}-{gc:?}").to_lowercase();
            let s = one_run(client, gc, &name, fill).await;
            match gc {
                Gc::Sweeper => sweeper.push(s),
                Gc::Kcm => kcm.push(s),
            }
            // The killed collector's watches end; let the server settle before the next.
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    }
    if std::env::var("BENCH_KEEP_FILLER").as_deref() == Ok("1") {
        eprintln!("BENCH_KEEP_FILLER=1: the start-up fill is kept for the next run");
    } else {
        let t = Instant::now();
        drop_fill(client).await;
        eprintln!("startup: fill deleted in {:.0}s", t.elapsed().as_secs_f64());
    }

    fn of(v: &[Sample], f: impl Fn(&Sample) -> f64) -> Vec<f64> {
        v.iter().map(f).collect()
    }
    fn mb(b: u64) -> f64 {
        b as f64 / 1e6
    }
    let (s_time, k_time) = (of(&sweeper, |s| s.seconds), of(&kcm, |s| s.seconds));
    let (s_rss, k_rss) = (of(&sweeper, |s| mb(s.rss)), of(&kcm, |s| mb(s.rss)));
    let ((st_lo, st_hi), (kt_lo, kt_hi)) = (min_max(&s_time), min_max(&k_time));
    let ((sr_lo, sr_hi), (kr_lo, kr_hi)) = (min_max(&s_rss), min_max(&k_rss));
    let (s, k) = (median(&s_time), median(&k_time));
    let (sr, kr) = (median(&s_rss), median(&k_rss));
    vec![
        format!(
            "BENCH cascade.startup100k sweeper={s:.2} kcm={k:.2} ratio={:.2} unit=s",
            k / s
        ),
        format!(
            "BENCH cascade.rss100k sweeper={sr:.1} kcm={kr:.1} ratio={:.2} unit=MB",
            sr / kr
        ),
        format!(
            "BENCH cascade.startup100k.detail time runs={runs} objects={fill} sweeper_min={st_lo:.2} sweeper_max={st_hi:.2} kcm_min={kt_lo:.2} kcm_max={kt_hi:.2} unit=s"
        ),
        format!(
            "BENCH cascade.startup100k.detail rss sweeper_min={sr_lo:.1} sweeper_max={sr_hi:.1} kcm_min={kr_lo:.1} kcm_max={kr_hi:.1} sweeper_peak={:.1} kcm_peak={:.1} sweeper_stable={:.1} kcm_stable={:.1} unit=MB",
            median(&of(&sweeper, |s| mb(s.peak))),
            median(&of(&kcm, |s| mb(s.peak))),
            median(&of(&sweeper, |s| mb(s.stable))),
            median(&of(&kcm, |s| mb(s.stable)))
        ),
        // CPU seconds until the probe was gone: the collector's own, and etcd + kube-apiserver's
        // in the same window (serving its lists and watches).
        format!(
            "BENCH cascade.startup100k.detail cpu sweeper={:.2} kcm={:.2} servers_sweeper={:.2} servers_kcm={:.2} unit=s",
            median(&of(&sweeper, |s| s.cpu)),
            median(&of(&kcm, |s| s.cpu)),
            median(&of(&sweeper, |s| s.servers_cpu)),
            median(&of(&kcm, |s| s.servers_cpu))
        ),
    ]
}
