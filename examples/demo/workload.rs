//! The workload cluster `demo-wl` as the management cluster sees it: a CAPI `Cluster` and the
//! `AWSCluster` it owns (owner reference and `cluster.x-k8s.io/cluster-name` label, as CAPI sets
//! them), with external GC enabled the way `sweeper gc enable` does. Deleting the Cluster lets
//! the cascade collector delete the AWSCluster, whose finalizer holds it until the external
//! collector has torn down every AWS resource.

use crate::aws_world::{self, AwsRes};
use crate::kube_util::{self, DEMO_LABEL, Res, labels};
use crate::step::{Item, Observation, StepState};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::DeleteParams;
use kube::{Api, Client, Resource, ResourceExt};
use sweeper::api::capa::{
    AWSCluster, AWSClusterSpec, Cluster, ClusterSpec, NetworkSpec, ObjectRef, VpcSpec,
};
use sweeper_aws::phases::AwsClients;

pub const NS: &str = "sweeper-demo";
const FINALIZER: &str = "sweeper.dev/external-resource-gc";
const GC_ANNOTATION: &str = "aws.cluster.x-k8s.io/external-resource-gc";

pub async fn create(c: &Client, vpc_id: &str) -> Res<()> {
    let name = aws_world::CLUSTER;
    kube_util::create_namespace(c, NS, &[(DEMO_LABEL, "workload")]).await?;
    let cluster = Cluster::new(
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
    let cluster = kube_util::create(&Api::<Cluster>::namespaced(c.clone(), NS), &cluster).await?;
    let mut infra = AWSCluster::new(
        name,
        AWSClusterSpec {
            // sweeper's own credentials (no CAPA identity) in the demo's LocalStack region.
            identity_ref: None,
            region: Some("us-east-1".into()),
            network: Some(NetworkSpec {
                vpc: Some(VpcSpec {
                    id: Some(vpc_id.into()),
                }),
            }),
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
    kube_util::create(&Api::<AWSCluster>::namespaced(c.clone(), NS), &infra).await?;
    Ok(())
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

/// Deletes the CAPI Cluster; the cascade takes the AWSCluster with it.
pub async fn delete(c: &Client) -> Res<()> {
    Api::<Cluster>::namespaced(c.clone(), NS)
        .delete(aws_world::CLUSTER, &DeleteParams::background())
        .await
        .map_err(|e| format!("delete Cluster {}: {e}", aws_world::CLUSTER))?;
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
            let cond = i.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == "ExternalResourcesDeleted")
                    .and_then(|c| c.reason.clone())
            });
            format!(
                "AWSCluster held by finalizer; {left} AWS left{}",
                cond.map(|r| format!(" ({r})")).unwrap_or_default()
            )
        }
        (Some(_), Some(_)) => "Cluster deleting; cascade to AWSCluster".into(),
        (None, Some(_)) => "Cluster gone; the cascade queues its AWSCluster".into(),
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
