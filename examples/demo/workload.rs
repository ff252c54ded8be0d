//! The workload cluster `demo-wl` as the management cluster sees it: a CAPI `Cluster` and the
//! `AWSCluster` it owns (owner reference and `cluster.x-k8s.io/cluster-name` label, as CAPI sets
//! them), with external GC enabled the way `sweeper gc enable` does.
//!
//! Deleting it goes in Cluster API's order: the Cluster carries Cluster API's finalizer, its
//! delete is followed by the AWSCluster's, and the Cluster goes once the AWSCluster is gone,
//! which the AWSCluster's finalizers hold until the external collector has torn down every AWS
//! resource (and CAPA's controller its network, where it runs). Cluster API's Cluster controller
//! does not run here; the demo does its part (`delete`). Its order matters to CAPA: CAPA's
//! AWSCluster reconcile reads the owner Cluster first and fails while it is missing, so an
//! AWSCluster whose Cluster went first would keep CAPA's finalizer for ever.
//!
//! Where CAPA's own AWSCluster controller runs (the default environment: CAPA's CRDs, webhooks
//! and scripts/go/capa-manager, started by scripts/demo.sh with its `ExternalResourceGC` gate
//! off, the hand-over's end state of docs/capa.md), the AWSCluster asks for a managed VPC and
//! CAPA builds it; on the 1.20 fallback it names the VPC the demo built in CAPA's stead.

use crate::aws_world::{self, AwsRes};
use crate::kube_util::{self, DEMO_LABEL, Res, labels};
use crate::step::{Item, Observation, StepState};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use sweeper::api::capa::{
    AWSCluster, AWSClusterSpec, Cluster, ClusterSpec, NetworkSpec, ObjectRef, VpcSpec,
};
use sweeper_aws::phases::AwsClients;

pub const NS: &str = "sweeper-demo";
const FINALIZER: &str = "sweeper.dev/external-resource-gc";
/// CAPA's own finalizer on an AWSCluster (infrav1.ClusterFinalizer).
const CAPA_FINALIZER: &str = "awscluster.infrastructure.cluster.x-k8s.io";
const GC_ANNOTATION: &str = "aws.cluster.x-k8s.io/external-resource-gc";
/// Cluster API's finalizer on a Cluster (clusterv1.ClusterFinalizer).
const CAPI_FINALIZER: &str = "cluster.cluster.x-k8s.io";
/// How long CAPA's controller may take to make the AWSCluster ready (about 6 s measured in
/// LocalStack, docs/capa.md; the manager's start and first sync come on top).
const CAPA_BUILD: Duration = Duration::from_secs(120);

/// Who builds the cluster's network.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Network<'a> {
    /// CAPA's own controller: a managed VPC.
    Capa,
    /// The demo did, in CAPA's stead: this VPC.
    Demo(&'a str),
}

pub async fn create(c: &Client, network: Network<'_>) -> Res<()> {
    let name = aws_world::CLUSTER;
    kube_util::create_namespace(c, NS, &[(DEMO_LABEL, "workload")]).await?;
    let mut cluster = Cluster::new(
        name,
        ClusterSpec {
            infrastructure_ref: Some(ObjectRef {
                api_version: Some("infrastructure.cluster.x-k8s.io/v1beta2".into()),
                api_group: None,
                kind: Some("AWSCluster".into()),
                name: Some(name.into()),
                namespace: Some(NS.into()),
            }),
            control_plane_ref: None,
            paused: None,
        },
    );
    cluster.metadata.finalizers = Some(vec![CAPI_FINALIZER.into()]);
    let cluster = kube_util::create(&Api::<Cluster>::namespaced(c.clone(), NS), &cluster).await?;
    let mut infra = AWSCluster::new(
        name,
        AWSClusterSpec {
            // sweeper's own credentials (no CAPA identity) in the demo's LocalStack region.
            identity_ref: None,
            region: Some("us-east-1".into()),
            network: match network {
                Network::Demo(id) => Some(NetworkSpec {
                    vpc: Some(VpcSpec {
                        id: Some(id.into()),
                    }),
                }),
                Network::Capa => None,
            },
            // No Ignition bucket in the demo.
            s3_bucket: None,
        },
    );
    infra.metadata.labels = labels(&[
        ("cluster.x-k8s.io/cluster-name", name),
        (DEMO_LABEL, "workload"),
    ]);
    infra.metadata.annotations = labels(&[(GC_ANNOTATION, "true")]);
    infra.metadata.owner_references = Some(vec![OwnerReference {
        api_version: Cluster::api_version(&()).into(),
        kind: Cluster::kind(&()).into(),
        name: name.into(),
        uid: cluster.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    let Network::Capa = network else {
        kube_util::create(&Api::<AWSCluster>::namespaced(c.clone(), NS), &infra).await?;
        return Ok(());
    };
    // What CAPA's controller needs of it beyond sweeper's type, as CAPA's cluster template has it:
    // an NLB for the API server, whose DNS name (LocalStack's) resolves nowhere, so CAPA's
    // resolution check is off (`dnsResolutionCheck: None`, which v2.13.0 offers for that).
    let mut infra = serde_json::to_value(&infra)?;
    infra["spec"]["controlPlaneLoadBalancer"] = json!({
        "loadBalancerType": "nlb",
        "healthCheckProtocol": "HTTPS",
        "dnsResolutionCheck": "None",
    });
    let infra: DynamicObject = serde_json::from_value(infra)?;
    dynamic(c)
        .create(&Default::default(), &infra)
        .await
        .map_err(|e| format!("create AWSCluster {name}: {e}"))?;
    Ok(())
}

/// The AWSCluster as a dynamic object (CAPA's fields beyond sweeper's type).
fn dynamic(c: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(c.clone(), NS, &ApiResource::erase::<AWSCluster>(&()))
}

/// Waits until CAPA's controller made the AWSCluster ready; returns how long it took. Fails with
/// the AWSCluster's conditions when it did not within [`CAPA_BUILD`].
pub async fn wait_capa_ready(c: &Client) -> Res<Duration> {
    let t = Instant::now();
    let api = dynamic(c);
    let mut last = Value::Null;
    while t.elapsed() < CAPA_BUILD {
        if let Some(o) = api.get_opt(aws_world::CLUSTER).await? {
            if o.data["status"]["ready"] == json!(true) {
                return Ok(t.elapsed());
            }
            last = o.data["status"]["conditions"].clone();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(format!(
        "CAPA's controller did not make AWSCluster {NS}/{} ready within {}s (conditions: {last}); its log: .state/logs/capa-manager-{NS}.log",
        aws_world::CLUSTER,
        CAPA_BUILD.as_secs()
    )
    .into())
}

/// True once the external collector put its finalizer on the AWSCluster.
pub async fn finalized(c: &Client) -> bool {
    Api::<AWSCluster>::namespaced(c.clone(), NS)
        .get_opt(aws_world::CLUSTER)
        .await
        .ok()
        .flatten()
        .is_some_and(|o| o.finalizers().iter().any(|f| f == FINALIZER))
}

pub fn step(resources: &[AwsRes]) -> StepState {
    let name = aws_world::CLUSTER;
    let mut items = vec![Item::new("Cluster", name), Item::new("AWSCluster", name)];
    let mut sorted: Vec<&AwsRes> = resources.iter().collect();
    sorted.sort_by_key(|r| r.kind);
    items.extend(sorted.into_iter().map(AwsRes::item));
    StepState::new(
        format!("cluster {name}: AWS"),
        items,
        Some(format!("AWSCluster {NS}/{name}")),
    )
}

/// Deletes the CAPI Cluster as a user does, then does what Cluster API's Cluster controller does
/// with it: deletes its AWSCluster and, in the background, releases the Cluster's finalizer once
/// the AWSCluster is gone (it runs until then, or until the demo ends).
pub async fn delete(c: &Client) -> Res<()> {
    let name = aws_world::CLUSTER;
    let clusters = Api::<Cluster>::namespaced(c.clone(), NS);
    clusters
        .delete(name, &DeleteParams::background())
        .await
        .map_err(|e| format!("delete Cluster {name}: {e}"))?;
    Api::<AWSCluster>::namespaced(c.clone(), NS)
        .delete(name, &DeleteParams::background())
        .await
        .map_err(|e| format!("delete AWSCluster {name}: {e}"))?;
    let infra = Api::<AWSCluster>::namespaced(c.clone(), NS);
    tokio::spawn(async move {
        while !kube_util::is_gone(&infra, name).await {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if let Err(e) = release(&clusters, name).await {
            eprintln!("demo: releasing Cluster API's finalizer on Cluster {name}: {e}");
        }
    });
    Ok(())
}

/// Removes Cluster API's finalizer from Cluster `name`, keeping any other (a merge patch with
/// the object's resourceVersion: a concurrent change fails it rather than being overwritten).
async fn release(clusters: &Api<Cluster>, name: &str) -> Res<()> {
    let Some(cluster) = clusters.get_opt(name).await? else {
        return Ok(());
    };
    let rest: Vec<&String> = cluster
        .finalizers()
        .iter()
        .filter(|f| f.as_str() != CAPI_FINALIZER)
        .collect();
    let patch =
        json!({"metadata": {"finalizers": rest, "resourceVersion": cluster.resource_version()}});
    clusters
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

pub async fn observe(c: &Client, aws: &AwsClients, resources: &[AwsRes]) -> Res<Observation> {
    let name = aws_world::CLUSTER;
    let mut obs = Observation::default();
    let cluster = Api::<Cluster>::namespaced(c.clone(), NS)
        .get_metadata_opt(name)
        .await?;
    if cluster.is_none() {
        obs.done.insert(format!("Cluster/{name}"));
    }
    let infra = Api::<AWSCluster>::namespaced(c.clone(), NS)
        .get_opt(name)
        .await?;
    if infra.is_none() {
        obs.done.insert(format!("AWSCluster/{name}"));
    }
    let existing = crate::aws_probe::existing(aws, resources).await;
    let left = existing.iter().filter(|e| **e).count();
    for (r, exists) in resources.iter().zip(existing) {
        if !exists {
            obs.done.insert(r.item().key);
        }
    }
    obs.hint = match (&cluster, &infra) {
        (_, Some(i)) if i.metadata.deletion_timestamp.is_some() => {
            let held: Vec<&str> = i
                .finalizers()
                .iter()
                .filter_map(|f| match f.as_str() {
                    FINALIZER => Some("sweeper"),
                    CAPA_FINALIZER => Some("CAPA"),
                    _ => None,
                })
                .collect();
            let cond = i.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == "ExternalResourcesDeleted")
                    .and_then(|c| c.reason.clone())
            });
            format!(
                "AWSCluster held by {}; {left} AWS left{}",
                held.join(" + "),
                cond.map(|r| format!(" ({r})")).unwrap_or_default()
            )
        }
        (Some(_), Some(_)) => "Cluster deleting; its AWSCluster next".into(),
        (None, Some(_)) => "Cluster gone before its AWSCluster".into(),
        (_, None) => format!("AWSCluster gone; {left} AWS left"),
    };
    Ok(obs)
}

/// Removes the CAPI objects of an earlier run (finalizers released: the AWS side is cleaned by
/// the caller).
pub async fn clean(c: &Client) -> Res<()> {
    let name = aws_world::CLUSTER;
    kube_util::delete_and_release(&Api::<AWSCluster>::namespaced(c.clone(), NS), name).await?;
    kube_util::delete_and_release(&Api::<Cluster>::namespaced(c.clone(), NS), name).await?;
    Ok(())
}
