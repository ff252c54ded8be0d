//! `make bench-tenant`: 50 tenants x 200 cluster-scoped objects over four kinds (namespaces left
//! out, so the namespace controller's pace does not hide ours), unlabelled as KubeZoo makes them;
//! tear one tenant down with the default `index` strategy and one with `scan`, timing the
//! teardown passes and counting the objects listed. Both must be complete: afterwards nothing
//! named `<id>-` is left. Prints `BENCH tenant.*` lines last.
//!
//! Then the same tenant (200 objects) torn down in a cluster of 10,000 and one of 100,000
//! cluster-scoped objects (`tenant.teardown10k`, `tenant.teardown100k`): the rest is filler, other
//! tenants' objects of the same four kinds (`fl0000-role-0`, ...), created once with 64 creations
//! in flight and reused (the 100k filler is the 10k one plus 450 more tenants); only the measured
//! tenant's objects are recreated for every run, each strategy `BENCH_TENANT_RUNS` times (default
//! 5, alternating which goes first), medians printed. Every run must leave nothing named `<id>-`,
//! and afterwards every filler object and 100 decoys named `<id>0-...` (what a prefix without the
//! separator would take) must still be there. The filler is deleted at the end unless
//! `BENCH_KEEP_FILLER=1` (a later run then reuses it).
//!
//! `BENCH_ONLY=base` runs only the first part, `teardown10k` / `teardown100k` one cluster size,
//! `teardown` both (with the growth line), `restart` only the restart after a kill mid-teardown
//! (`tenant.restart`, examples/support/restart.rs; it runs `SWEEPER_BIN`).
#[path = "support/objects.rs"]
mod objects;
#[path = "support/proc.rs"]
mod proc;
#[path = "support/restart.rs"]
mod restart;
#[path = "support/stats.rs"]
mod stats;
use futures::StreamExt;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client};
use stats::{median, min_max};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use sweeper::config::TenantGcStrategy;
use sweeper::engine::name_index::{IndexWatches, NameIndex};
use sweeper::tenant::id::TenantId;
use sweeper::tenant::metrics::TenantMetrics;
use sweeper::tenant::pass::{PassSettings, pass};

const TENANTS: usize = 50;
const PER_KIND: usize = 50; // x 4 kinds = 200 per tenant

/// KubeZoo labels none of the objects it creates for a tenant: neither do we here, so the
/// strategies are measured finding what users have.
fn labels(_id: &str) -> Option<BTreeMap<String, String>> {
    None
}

fn gadgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bench.sweeper.dev", "v1", "Gadget"),
        "gadgets",
    )
}

async fn install_gadget_crd(c: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gadgets.bench.sweeper.dev"},
        "spec": {"group": "bench.sweeper.dev", "scope": "Cluster",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    let _ = crds.create(&PostParams::default(), &crd).await;
    let est = kube::runtime::wait::await_condition(
        crds,
        "gadgets.bench.sweeper.dev",
        kube::runtime::wait::conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(60), est)
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
}

async fn create_tenant_objects(c: &Client, id: &str) {
    let pp = PostParams::default();
    let ok = |r: Result<(), kube::Error>| match r {
        Ok(()) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create: {e}"),
    };
    futures::stream::iter(0..PER_KIND)
        .map(|i| {
            let (c, pp) = (c.clone(), pp.clone());
            let id = id.to_string();
            async move {
                let mut cr = ClusterRole::default();
                cr.metadata.name = Some(format!("{id}-role-{i}"));
                cr.metadata.labels = labels(&id);
                let r1 = Api::<ClusterRole>::all(c.clone())
                    .create(&pp, &cr)
                    .await
                    .map(|_| ());
                let crb = ClusterRoleBinding {
                    metadata: kube::api::ObjectMeta {
                        name: Some(format!("{id}-binding-{i}")),
                        labels: labels(&id),
                        ..Default::default()
                    },
                    role_ref: RoleRef {
                        api_group: "rbac.authorization.k8s.io".into(),
                        kind: "ClusterRole".into(),
                        name: format!("{id}-role-{i}"),
                    },
                    subjects: None,
                };
                let r2 = Api::<ClusterRoleBinding>::all(c.clone())
                    .create(&pp, &crb)
                    .await
                    .map(|_| ());
                let mut pc = PriorityClass {
                    value: 1000,
                    ..Default::default()
                };
                pc.metadata.name = Some(format!("{id}-prio-{i}"));
                pc.metadata.labels = labels(&id);
                let r3 = Api::<PriorityClass>::all(c.clone())
                    .create(&pp, &pc)
                    .await
                    .map(|_| ());
                let ar = gadgets();
                let mut g = DynamicObject::new(&format!("{id}-gadget-{i}"), &ar);
                g.metadata.labels = labels(&id);
                let r4 = Api::<DynamicObject>::all_with(c.clone(), &ar)
                    .create(&pp, &g)
                    .await
                    .map(|_| ());
                [r1, r2, r3, r4]
            }
        })
        .buffer_unordered(16)
        .for_each(|rs| async move {
            for r in rs {
                ok(r);
            }
        })
        .await;
}

async fn teardown(
    c: &Client,
    id: &str,
    strategy: TenantGcStrategy,
    index: &NameIndex,
) -> (f64, u64) {
    let id = TenantId::parse(id, None).unwrap();
    let delete_concurrency = std::env::var("BENCH_DELETE_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let settings = PassSettings {
        strategy,
        scan_kinds: vec![],
        dry_run: false,
        delete_concurrency,
        // Both strategies would pay the same archive cost; this compares finding objects.
        archive: None,
    };
    let metrics = TenantMetrics::default();
    let t0 = Instant::now();
    // Discovery is part of every real pass's input; it is refreshed by the service anyway, so it
    // is done once here, outside the timing, for both strategies alike.
    let resources = sweeper::engine::discovery::discover_deletable(c)
        .await
        .unwrap()
        .resources;
    let t0 = t0.max(Instant::now());
    let mut listed = 0;
    let mut since = None;
    for _ in 0..100 {
        let t = Instant::now();
        let r = pass(c, &id, &resources, &settings, &metrics, index, since).await;
        eprintln!(
            "  {strategy:?} pass: {:.3}s, {} deleted, {} listed, done={}",
            t.elapsed().as_secs_f64(),
            r.deleted,
            r.listed,
            r.done
        );
        since = r.since;
        listed += r.listed;
        if r.done {
            return (t0.elapsed().as_secs_f64(), listed);
        }
        assert!(r.errors.is_empty(), "teardown errors: {:?}", r.errors);
    }
    panic!("teardown of {id} did not finish");
}

/// Objects of the tenant still there, of one of the four kinds (a full list: outside timings).
async fn count_left(c: &Client, id: &str) -> usize {
    Api::<ClusterRole>::all(c.clone())
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|r| {
            r.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(&format!("{id}-")))
        })
        .count()
}

/// The index as `sweeper run` keeps it, built from the same discovery; waits until every
/// cluster-scoped kind has been listed once. Returns it with its watches, the time it took and
/// the objects it holds (its one-off cost, paid at start-up, not per teardown).
async fn start_index(c: &Client) -> (NameIndex, IndexWatches, f64, usize) {
    let t = Instant::now();
    let resources = sweeper::engine::discovery::discover_deletable(c)
        .await
        .unwrap()
        .resources;
    let index = NameIndex::default();
    let mut watches = IndexWatches::new(c.clone(), index.clone());
    watches.reconcile(&resources);
    let cluster_scoped: Vec<_> = resources.iter().filter(|r| !r.namespaced).collect();
    for _ in 0..600 {
        if cluster_scoped
            .iter()
            .all(|r| index.with_prefix(r, "").is_ok())
        {
            return (
                index.clone(),
                watches,
                t.elapsed().as_secs_f64(),
                index.len(),
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the name index did not sync in 60 s");
}

/// The first part: 50 tenants of 200, one torn down each way. `BENCH tenant.teardown`,
/// `tenant.listed` and `tenant.index_sync` lines.
async fn base(c: &Client) -> Vec<String> {
    let c = c.clone();
    let run: u32 = rand::random::<u32>() % 0xfff;
    let ids: Vec<String> = (0..TENANTS).map(|i| format!("b{run:03x}{i:02}")).collect();
    let t0 = Instant::now();
    futures::stream::iter(ids.iter())
        .for_each_concurrent(4, |id| create_tenant_objects(&c, id))
        .await;
    eprintln!(
        "created {} tenants x {} objects in {:.0}s",
        TENANTS,
        PER_KIND * 4,
        t0.elapsed().as_secs_f64()
    );
    let (index, _watches, sync_s, indexed) = start_index(&c).await;
    eprintln!("index synced: {indexed} cluster-scoped objects in {sync_s:.2}s");

    // How the time splits: finding alone, per strategy (no deletes).
    {
        let id = TenantId::parse(&ids[0], None).unwrap();
        let resources = sweeper::engine::discovery::discover_deletable(&c)
            .await
            .unwrap()
            .resources;
        for strategy in [TenantGcStrategy::Index, TenantGcStrategy::Scan] {
            let t = Instant::now();
            let inv =
                sweeper::tenant::inventory::find(&c, &id, &resources, strategy, &[], &index).await;
            eprintln!(
                "find {strategy:?}: {:.3}s, {} listed, {} found",
                t.elapsed().as_secs_f64(),
                inv.listed,
                inv.objects.len() + inv.crds.len()
            );
        }
        // The index's last check on a teardown that deleted nothing and began after the index's
        // epoch: no kind has moved past the revision, so every kind is listed. (A teardown that
        // began before the epoch, as after a restart, lists none: engine::name_index.)
        let since = sweeper::engine::name_index::current_revision(&c).await;
        let t = Instant::now();
        let check =
            sweeper::tenant::inventory::confirm(&c, &id, &resources, &[], &index, since, &[]).await;
        eprintln!(
            "index's last check with no kind fresh: {:.3}s, {} listed, {} found",
            t.elapsed().as_secs_f64(),
            check.listed,
            check.objects.len() + check.crds.len()
        );
    }
    let (index_s, index_listed) = teardown(&c, &ids[0], TenantGcStrategy::Index, &index).await;
    assert_eq!(count_left(&c, &ids[0]).await, 0, "index teardown complete");
    create_tenant_objects(&c, &ids[0]).await; // same population for the second run
    let (scan_s, scan_listed) = teardown(&c, &ids[0], TenantGcStrategy::Scan, &index).await;
    assert_eq!(count_left(&c, &ids[0]).await, 0, "scan teardown complete");
    assert_eq!(
        count_left(&c, &ids[1]).await,
        PER_KIND,
        "other tenants untouched"
    );
    eprintln!(
        "index: {index_s:.2}s, {index_listed} listed; scan: {scan_s:.2}s, {scan_listed} listed"
    );

    // Clean up the rest through the same code path.
    for id in &ids[1..] {
        teardown(&c, id, TenantGcStrategy::Index, &index).await;
    }
    vec![
        format!(
            "BENCH tenant.teardown index={index_s:.3} scan={scan_s:.3} ratio={:.2} unit=s",
            scan_s / index_s
        ),
        // Listed per teardown; the index's own start-up list is reported on its own line. The
        // ratio's denominator is at least 1 (the index strategy may list nothing at all).
        format!(
            "BENCH tenant.listed index={index_listed} scan={scan_listed} ratio={:.2} unit=objects",
            scan_listed as f64 / index_listed.max(1) as f64
        ),
        format!("BENCH tenant.index_sync objects={indexed} seconds={sync_s:.3} unit=once"),
    ]
}

/// The four kinds, as one dynamic API each (filler, decoys and the completeness checks).
#[derive(Clone, Copy, Debug)]
enum Kind {
    Role,
    Binding,
    Prio,
    Gadget,
}

const KINDS: [Kind; 4] = [Kind::Role, Kind::Binding, Kind::Prio, Kind::Gadget];

/// Labels the filler so it can be counted and removed; the strategies find by name, not label.
const FILLER_LABEL: &str = "bench.sweeper.dev/filler";
const DECOY_LABEL: &str = "bench.sweeper.dev/decoy";

impl Kind {
    fn part(self) -> &'static str {
        match self {
            Kind::Role => "role",
            Kind::Binding => "binding",
            Kind::Prio => "prio",
            Kind::Gadget => "gadget",
        }
    }

    fn resource(self) -> ApiResource {
        match self {
            Kind::Role => ApiResource::erase::<ClusterRole>(&()),
            Kind::Binding => ApiResource::erase::<ClusterRoleBinding>(&()),
            Kind::Prio => ApiResource::erase::<PriorityClass>(&()),
            Kind::Gadget => gadgets(),
        }
    }

    fn api(self, c: &Client) -> Api<DynamicObject> {
        Api::all_with(c.clone(), &self.resource())
    }

    /// `<owner>-<part>-<i>`, shaped as `create_tenant_objects` makes them, labelled `label`.
    fn object(self, owner: &str, i: usize, label: &str) -> DynamicObject {
        let mut o = DynamicObject::new(&format!("{owner}-{}-{i}", self.part()), &self.resource());
        o.metadata.labels = Some(BTreeMap::from([(label.to_string(), "true".to_string())]));
        match self {
            Kind::Binding => {
                o.data = serde_json::json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole", "name": format!("{owner}-role-{i}")}})
            }
            Kind::Prio => o.data = serde_json::json!({"value": 1000}),
            Kind::Role | Kind::Gadget => {}
        }
        o
    }

    /// Names of this kind's objects carrying `selector` (all of them for `None`).
    async fn names(self, c: &Client, selector: Option<&str>) -> Vec<String> {
        let lp = match selector {
            Some(s) => ListParams::default().labels(s),
            None => ListParams::default(),
        };
        self.api(c)
            .list_metadata(&lp)
            .await
            .expect("list")
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect()
    }
}

/// Creates `objects` with at most 64 creations in flight (an existing one is fine).
async fn create_all(c: &Client, objects: Vec<(Kind, DynamicObject)>) {
    let objects = objects.into_iter().map(|(k, o)| (k.api(c), o)).collect();
    objects::create_each(objects, 64).await;
}

/// Deletes `objects` with at most 64 deletions in flight (a missing one is fine).
async fn delete_all(c: &Client, objects: Vec<(Kind, String)>) {
    let objects = objects
        .into_iter()
        .map(|(k, name)| (k.api(c), name))
        .collect();
    objects::delete_each(objects, 64).await;
}

fn filler_id(t: usize) -> String {
    format!("fl{t:04}")
}

/// Makes the filler exactly `tenants` tenants of 200 (`fl0000` ...): creates what is missing,
/// deletes tenants beyond. Returns the time spent creating/deleting and how many were created.
async fn ensure_filler(c: &Client, tenants: usize) -> (f64, usize) {
    let t = Instant::now();
    let selector = format!("{FILLER_LABEL}=true");
    let mut create = Vec::new();
    let mut remove = Vec::new();
    for k in KINDS {
        let have: std::collections::HashSet<String> =
            k.names(c, Some(&selector)).await.into_iter().collect();
        for name in &have {
            let tenant: Option<usize> = name.get(2..6).and_then(|n| n.parse().ok());
            if tenant.is_none_or(|t| t >= tenants) {
                remove.push((k, name.clone()));
            }
        }
        for t in 0..tenants {
            for i in 0..PER_KIND {
                let o = k.object(&filler_id(t), i, FILLER_LABEL);
                if !have.contains(o.metadata.name.as_deref().unwrap()) {
                    create.push((k, o));
                }
            }
        }
    }
    let created = create.len();
    if !remove.is_empty() {
        eprintln!(
            "filler: deleting {} objects beyond {tenants} tenants",
            remove.len()
        );
        delete_all(c, remove).await;
    }
    if created > 0 {
        eprintln!("filler: creating {created} objects (64 in flight)");
        create_all(c, create).await;
    }
    (t.elapsed().as_secs_f64(), created)
}

/// Filler objects on the server (all four kinds).
async fn count_filler(c: &Client) -> usize {
    let mut n = 0;
    for k in KINDS {
        n += k
            .names(c, Some(&format!("{FILLER_LABEL}=true")))
            .await
            .len();
    }
    n
}

/// Objects of the four kinds whose name starts with `prefix` (full lists: outside timings).
async fn count_prefix(c: &Client, prefix: &str) -> usize {
    let mut n = 0;
    for k in KINDS {
        n += k
            .names(c, None)
            .await
            .iter()
            .filter(|name| name.starts_with(prefix))
            .count();
    }
    n
}

/// Until the index holds the tenant's 200 objects: both strategies start from the same state.
async fn wait_indexed(c: &Client, index: &NameIndex, id: &str) {
    let resources = sweeper::engine::discovery::discover_deletable(c)
        .await
        .unwrap()
        .resources;
    let plurals: Vec<String> = KINDS.iter().map(|k| k.resource().plural).collect();
    let kinds: Vec<_> = resources
        .iter()
        .filter(|r| !r.namespaced && plurals.contains(&r.resource.plural))
        .collect();
    let prefix = format!("{id}-");
    for _ in 0..600 {
        let held: usize = kinds
            .iter()
            .map(|r| index.with_prefix(r, &prefix).map(|v| v.len()).unwrap_or(0))
            .sum();
        if held == PER_KIND * 4 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the index never held tenant {id}'s objects");
}

fn rss_mib(pid: &str) -> u64 {
    pid.trim()
        .parse()
        .map_or(0, |pid| proc::status_bytes(pid, "VmRSS:") >> 20)
}

/// etcd's and kube-apiserver's resident memory (from the environment's pid files), for the log.
fn servers_memory() -> String {
    let Ok(state) = std::env::var("SWEEPER_TEST_ENV") else {
        return "servers' memory unknown (SWEEPER_TEST_ENV not set)".into();
    };
    ["etcd", "kube-apiserver"]
        .iter()
        .map(|s| {
            let pid = std::fs::read_to_string(format!("{state}/run/{s}.pid")).unwrap_or_default();
            format!("{s} RSS {} MiB", rss_mib(&pid))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

struct Scaled {
    name: &'static str,
    objects: usize,
    index: Vec<f64>,
    scan: Vec<f64>,
    index_listed: Vec<f64>,
    scan_listed: Vec<f64>,
}

impl Scaled {
    fn line(&self) -> String {
        let (index, scan) = (median(&self.index), median(&self.scan));
        let ((imin, imax), (smin, smax)) = (min_max(&self.index), min_max(&self.scan));
        format!(
            "BENCH tenant.{} index={index:.3} scan={scan:.3} ratio={:.2} runs={} index_min={imin:.3} index_max={imax:.3} scan_min={smin:.3} scan_max={smax:.3} index_listed={:.0} scan_listed={:.0} objects={} unit=s",
            self.name,
            scan / index,
            self.index.len(),
            median(&self.index_listed),
            median(&self.scan_listed),
            self.objects
        )
    }
}

/// The measured tenant torn down `runs` times each way in a cluster of `total` cluster-scoped
/// objects of the four kinds (filler to `total - 200`, then the tenant).
async fn scaled(c: &Client, name: &'static str, total: usize, runs: usize) -> Scaled {
    let filler_tenants = total / (PER_KIND * 4) - 1;
    let (took, created) = ensure_filler(c, filler_tenants).await;
    eprintln!(
        "{name}: filler of {filler_tenants} tenants ready ({created} created in {took:.0}s); {}",
        servers_memory()
    );
    // A tenant id sharing `fl00` with filler tenants `fl0000`..`fl0099`; its decoys start with
    // the id itself (`<id>0-role-0`): all must survive.
    let id = format!(
        "fl00{}{}",
        (b'a' + rand::random::<u8>() % 26) as char,
        (b'a' + rand::random::<u8>() % 26) as char
    );
    let decoy_owner = format!("{id}0");
    let decoys: Vec<(Kind, DynamicObject)> = KINDS
        .iter()
        .flat_map(|&k| (0..25).map(move |i| (k, i)))
        .map(|(k, i)| (k, k.object(&decoy_owner, i, DECOY_LABEL)))
        .collect();
    let decoy_names: Vec<(Kind, String)> = decoys
        .iter()
        .map(|(k, o)| (*k, o.metadata.name.clone().unwrap()))
        .collect();
    create_all(c, decoys).await;
    let (index, _watches, sync_s, indexed) = start_index(c).await;
    eprintln!("{name}: index synced: {indexed} cluster-scoped objects in {sync_s:.2}s");
    let mut out = Scaled {
        name,
        objects: indexed + PER_KIND * 4,
        index: vec![],
        scan: vec![],
        index_listed: vec![],
        scan_listed: vec![],
    };
    for run in 0..runs {
        let order = if run % 2 == 0 {
            [TenantGcStrategy::Index, TenantGcStrategy::Scan]
        } else {
            [TenantGcStrategy::Scan, TenantGcStrategy::Index]
        };
        for strategy in order {
            create_tenant_objects(c, &id).await;
            wait_indexed(c, &index, &id).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let (s, listed) = teardown(c, &id, strategy, &index).await;
            assert_eq!(
                count_prefix(c, &format!("{id}-")).await,
                0,
                "{strategy:?} teardown complete"
            );
            eprintln!("{name} run {run}: {strategy:?} {s:.3}s, {listed} listed");
            let (t, l) = match strategy {
                TenantGcStrategy::Index => (&mut out.index, &mut out.index_listed),
                _ => (&mut out.scan, &mut out.scan_listed),
            };
            t.push(s);
            l.push(listed as f64);
        }
    }
    // Must NOT delete: every filler object (tenants `fl00..` share the id's first four
    // characters) and the decoys named `<id>0-...`.
    assert_eq!(
        count_filler(c).await,
        filler_tenants * PER_KIND * 4,
        "filler untouched"
    );
    assert_eq!(
        count_prefix(c, &decoy_owner).await,
        decoy_names.len(),
        "decoys untouched"
    );
    delete_all(c, decoy_names).await;
    eprintln!("{}; {}", out.line(), servers_memory());
    out
}

#[tokio::main]
async fn main() {
    sweeper::install_crypto_provider();
    let c = Client::try_default()
        .await
        .expect("kube client (KUBECONFIG)");
    install_gadget_crd(&c).await;
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let runs: usize = std::env::var("BENCH_TENANT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let wants = |part: &str| only.is_empty() || only == part;
    let mut lines = Vec::new();
    if wants("base") {
        lines.extend(base(&c).await);
    }
    let small = if wants("teardown10k") || only == "teardown" {
        Some(scaled(&c, "teardown10k", 10_000, runs).await)
    } else {
        None
    };
    let large = if wants("teardown100k") || only == "teardown" {
        Some(scaled(&c, "teardown100k", 100_000, runs).await)
    } else {
        None
    };
    if wants("restart") {
        lines.extend(restart::part(&c, runs).await);
    }
    if small.is_none() && large.is_none() && !wants("base") && !wants("restart") {
        panic!("BENCH_ONLY={only}: expected base, teardown10k, teardown100k, teardown or restart");
    }
    lines.extend(small.iter().chain(&large).map(Scaled::line));
    if let (Some(s), Some(l)) = (&small, &large) {
        lines.push(format!(
            "BENCH tenant.teardown.growth index={:.2} scan={:.2} unit=x",
            median(&l.index) / median(&s.index),
            median(&l.scan) / median(&s.scan)
        ));
    }
    if small.is_some() || large.is_some() {
        if std::env::var("BENCH_KEEP_FILLER").as_deref() == Ok("1") {
            eprintln!("BENCH_KEEP_FILLER=1: filler kept for the next run");
        } else {
            let (took, _) = ensure_filler(&c, 0).await;
            eprintln!("filler deleted in {took:.0}s");
        }
    }
    lines.iter().for_each(|l| println!("{l}"));
}
