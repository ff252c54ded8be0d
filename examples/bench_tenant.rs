//! `make bench-tenant`: 50 tenants x 200 cluster-scoped objects over four kinds (namespaces left
//! out, so the namespace controller's pace does not hide ours), unlabelled as KubeZoo makes them;
//! tear one tenant down with the default `index` strategy and one with `scan`, timing the
//! teardown passes and counting the objects listed. Both must be complete: afterwards nothing
//! named `<id>-` is left. Prints `BENCH tenant.*` lines last.

use futures::StreamExt;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use sweeper::engine::name_index::{IndexWatches, NameIndex};
use sweeper::tenant::id::TenantId;
use sweeper::tenant::inventory::Strategy;
use sweeper::tenant::metrics::TenantMetrics;
use sweeper::tenant::teardown::{TeardownSettings, pass};

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

async fn teardown(c: &Client, id: &str, strategy: Strategy, index: &NameIndex) -> (f64, u64) {
    let id = TenantId::parse(id, None).unwrap();
    let delete_concurrency = std::env::var("BENCH_DELETE_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let settings = TeardownSettings {
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

#[tokio::main]
async fn main() {
    sweeper::install_crypto_provider();
    let c = Client::try_default()
        .await
        .expect("kube client (KUBECONFIG)");
    install_gadget_crd(&c).await;
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
        for strategy in [Strategy::Index, Strategy::Scan] {
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
        // The index's last check on a teardown that deleted nothing: no kind has moved past the
        // revision, so every kind is listed (what a pass after a restart pays once).
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
    let (index_s, index_listed) = teardown(&c, &ids[0], Strategy::Index, &index).await;
    assert_eq!(count_left(&c, &ids[0]).await, 0, "index teardown complete");
    create_tenant_objects(&c, &ids[0]).await; // same population for the second run
    let (scan_s, scan_listed) = teardown(&c, &ids[0], Strategy::Scan, &index).await;
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
        teardown(&c, id, Strategy::Index, &index).await;
    }
    println!(
        "BENCH tenant.teardown index={index_s:.3} scan={scan_s:.3} ratio={:.2} unit=s",
        scan_s / index_s
    );
    // Listed per teardown; the index's own start-up list is reported on its own line. The ratio's
    // denominator is at least 1 (the index strategy may list nothing at all).
    println!(
        "BENCH tenant.listed index={index_listed} scan={scan_listed} ratio={:.2} unit=objects",
        scan_listed as f64 / index_listed.max(1) as f64
    );
    println!("BENCH tenant.index_sync objects={indexed} seconds={sync_s:.3} unit=once");
}
