//! `sweeper uninstall` (issue 24): pauses every collector and removes every finalizer sweeper
//! owns from live objects, deleting nothing and keeping the archive; objects deleted afterwards
//! go at once. Against CAPA's own AWSCluster (upstream CRDs) and a Tenant, with a real AWS
//! resource of the cluster in LocalStack that must survive.
//!
//! The uninstall acts cluster-wide (as it must: it cannot know which objects a test owns), so
//! `make test` runs this binary on its own, after the others (scripts/test.sh).

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use std::time::Duration;
use support::aws::{clients, network, sg, sg_exists, tagged};
use support::capa::{gone, has_finalizer, template_cluster, upstream_crds};
use support::conformance;
use support::sweeper::{Sweeper, cli, eventually};
use support::tenant;
use support::{TestScope, unique_name};

const T: Duration = Duration::from_secs(90);

async fn archive_records(c: &kube::Client) -> usize {
    Api::<ConfigMap>::all(c.clone())
        .list_metadata(&ListParams::default().labels("sweeper.dev/archive=true"))
        .await
        .unwrap()
        .items
        .len()
}

#[tokio::test]
#[ignore = "needs the test environment and acts cluster-wide: run by `make test` on its own"]
async fn uninstall_releases_sweepers_finalizers_and_deletes_nothing() {
    let Some(_dir) = conformance::fixtures() else {
        return;
    };
    let mut scope = TestScope::new("uninst").await;
    let ns = scope.namespace().await;
    let c = scope.client.clone();
    // sweeper's Tenant CRD, then CAPA's own CRDs in place of sweeper's.
    support::objects::install_sweeper_crds(&c).await;
    upstream_crds(&c).await;
    let aws = clients().await;
    let name = unique_name("uni");
    let net = network(&aws).await;
    let owned_sg = sg(
        &aws,
        &net.vpc,
        &format!("{name}-svc"),
        &tagged(&format!("kubernetes.io/cluster/{name}"), "owned"),
    )
    .await;
    let infra = template_cluster(&c, &ns, &name, |_| {}).await;
    let (tid, _) = tenant::ids();
    tenant::tenant(&c, &tid).await;

    // The pause switch in the test's namespace, so no other sweeper is paused.
    let gc = Sweeper::start(&[
        "--feature-gates",
        "CascadeGC=true,TenantGC=true,ExternalResourceGC=true",
        "--namespace",
        &ns,
    ])
    .await;
    assert!(
        eventually(T, || has_finalizer(&infra, &name)).await,
        "external finalizer taken"
    );
    assert!(
        eventually(T, || tenant::has_finalizer(&c, &tid)).await,
        "tenant finalizer taken"
    );
    let records_before = archive_records(&c).await;

    let (ok, out, err) = cli(&["uninstall", "-n", &ns, "--dry-run"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(&format!(
            "would release AWSCluster {ns}/{name}: sweeper.dev/external-resource-gc"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("would release Tenant {tid}: kubezoo.io/tenant")),
        "{out}"
    );
    assert!(
        has_finalizer(&infra, &name).await,
        "a dry run changes nothing"
    );
    assert!(
        tenant::has_finalizer(&c, &tid).await,
        "a dry run changes nothing"
    );

    let (ok, out, err) = cli(&["uninstall", "-n", &ns]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(&format!("released AWSCluster {ns}/{name}")),
        "{out}"
    );
    assert!(out.contains(&format!("released Tenant {tid}")), "{out}");
    assert!(
        !has_finalizer(&infra, &name).await,
        "the external finalizer is gone"
    );
    assert!(
        !tenant::has_finalizer(&c, &tid).await,
        "the tenant finalizer is gone"
    );
    // Deleted nothing: both objects live on, not deleting, the AWS resource and the archive too.
    let o = infra.get(&name).await.expect("the AWSCluster still exists");
    assert!(o.metadata.deletion_timestamp.is_none());
    assert!(tenant::exists(&Api::<sweeper::api::tenant::Tenant>::all(c.clone()), &tid).await);
    assert!(sg_exists(&aws, &owned_sg).await, "no AWS resource deleted");
    assert!(
        archive_records(&c).await >= records_before,
        "the archive is kept"
    );
    Api::<ConfigMap>::namespaced(c.clone(), &ns)
        .get("sweeper-pause")
        .await
        .expect("the pause switch is written");
    for collector in ["cascade", "tenant", "external"] {
        let series = format!("sweeper_paused{{collector=\"{collector}\"}}");
        assert!(
            eventually(T, || async { gc.metric(&series).await == 1.0 }).await,
            "the running sweeper sees {collector} paused"
        );
    }

    // Deleted afterwards, they go at once: the paused sweeper adds nothing back.
    infra.delete(&name, &Default::default()).await.unwrap();
    tenant::delete_tenant(&c, &tid).await;
    assert!(
        eventually(Duration::from_secs(10), || gone(&infra, &name)).await,
        "the AWSCluster goes at once"
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            !tenant::exists(&Api::<sweeper::api::tenant::Tenant>::all(c.clone()), &tid).await
        })
        .await,
        "the Tenant goes at once"
    );
    assert!(
        sg_exists(&aws, &owned_sg).await,
        "still no AWS resource deleted"
    );

    // Idempotent: a second run finds nothing of these left and succeeds.
    let (ok, out, err) = cli(&["uninstall", "-n", &ns]);
    assert!(ok, "{out}{err}");
    assert!(!out.contains(&name) && !out.contains(&tid), "{out}");
    drop(gc);
}
