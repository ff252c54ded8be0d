//! Phase 2, opt-in only (task `ebs-volume`, never part of the default set: CAPA's "Beta"
//! criterion, and data loss is not undoable): EBS volumes the EBS CSI driver created for the
//! cluster, in state `available`. A volume is a target only when it carries the driver's own mark
//! `CSIVolumeName` and names the cluster in `KubernetesCluster=<name>` or
//! `ebs.csi.aws.com/cluster-name=<name>` (the driver with `--k8s-tag-cluster-id`); it is found
//! through `kubernetes.io/cluster/<name>=owned` or the driver's cluster-name tag, and never when
//! CAPA owns it. A volume `in-use` is never a target; neither is an owned volume without the
//! driver's mark (an in-tree or hand-made volume: whose data it holds is not known).
//!
//! By default each volume is snapshotted first; the snapshot is tagged with the source volume and
//! the cluster, and its id is reported (an Event on the cluster object). A snapshot left by a pass
//! that crashed before the delete is found by those tags and reused, so a retry makes no second
//! snapshot. A volume's snapshot is point-in-time, so the delete need not wait for it to complete.

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::aws::discovery::{describe, tags};
use crate::aws::errors::{ApiFailure, ErrorClass, call};
use crate::aws::model::GcTask;
use async_trait::async_trait;
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};

/// Selects EBS volumes: opt-in, see the registry's `OPT_IN`.
pub const TASK: GcTask = GcTask::new("ebs-volume");

/// The EBS CSI driver's cluster tag (with `--k8s-tag-cluster-id=<name>`).
pub const CSI_CLUSTER_TAG: &str = "ebs.csi.aws.com/cluster-name";
/// The EBS CSI driver's mark on a volume it created for a PersistentVolume.
pub const CSI_VOLUME_TAG: &str = "CSIVolumeName";
/// The cluster tag the EBS CSI driver (and the in-tree provider) put on a volume.
pub const KUBERNETES_CLUSTER_TAG: &str = "KubernetesCluster";

/// Whether a volume with these tags is one the CSI driver made for `cluster` (see the module
/// doc), never CAPA's.
pub fn is_cluster_csi_volume(tags: &[(&str, &str)], cluster: &str, capa_key: &str) -> bool {
    let names_cluster = tags
        .iter()
        .any(|(k, v)| (*k == KUBERNETES_CLUSTER_TAG || *k == CSI_CLUSTER_TAG) && *v == cluster);
    tags::has_key(tags.iter().copied(), CSI_VOLUME_TAG)
        && names_cluster
        && !tags::is_owned(tags.iter().copied(), capa_key)
}
/// On a snapshot: the volume it was taken of.
pub const SOURCE_VOLUME_TAG: &str = "sweeper.dev/source-volume";
/// On a snapshot: the cluster whose teardown took it.
pub const CLUSTER_TAG: &str = "sweeper.dev/cluster";

pub struct Volumes;

const KIND: &str = "volume";

#[async_trait]
impl Cleaner for Volumes {
    type Detail = ();

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        // With the nodes: a volume attached to a terminating node becomes available after it.
        25
    }
    fn task(&self) -> Option<GcTask> {
        Some(TASK)
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        let capa = ctx.capa_key();
        let available = tags::ec2_filter("status", &["available".to_string()]);
        let mut ids = std::collections::BTreeMap::new();
        for owner in [
            tags::ec2_tag_filter(&tags::cloud_key(ctx.cluster), tags::OWNED),
            tags::ec2_tag_filter(CSI_CLUSTER_TAG, ctx.cluster),
        ] {
            let (owner, available, capa) = (&owner, &available, &capa);
            let found = describe::all_pages(|token| async move {
                let page = call("ec2.DescribeVolumes", || {
                    ctx.clients
                        .ec2
                        .describe_volumes()
                        .filters(owner.clone())
                        .filters(available.clone())
                        .set_next_token(token.clone())
                        .send()
                })
                .await
                .map_err(CleanError::discover(KIND, "DescribeVolumes"))?;
                let ids: Vec<(String, Vec<(String, String)>)> = page
                    .volumes()
                    .iter()
                    .filter(|v| {
                        let pairs: Vec<_> = tags::ec2_pairs(v.tags()).collect();
                        is_cluster_csi_volume(&pairs, ctx.cluster, capa)
                    })
                    .filter_map(|v| {
                        let tags = tags::ec2_pairs(v.tags())
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect();
                        Some((v.volume_id()?.to_string(), tags))
                    })
                    .collect();
                Ok((ids, page.next_token().map(str::to_string)))
            })
            .await?;
            ids.extend(found);
        }
        Ok(ids
            .into_iter()
            .map(|(id, tags)| {
                Target::plain(id).with_tags(tags.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            })
            .collect())
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let snapshot = if ctx.snapshot_volumes {
            match snapshot(ctx, &t.id).await {
                Ok(s) => Some(s),
                // Not deleted without its snapshot: gone, retried, or an error, like a delete.
                Err(f) => return settle::<()>(Err(f), KIND, &t.id, "CreateSnapshot"),
            }
        } else {
            None
        };
        let res = call("ec2.DeleteVolume", || {
            ctx.clients.ec2.delete_volume().volume_id(&t.id).send()
        })
        .await;
        match (settle(res, KIND, &t.id, "DeleteVolume")?, snapshot) {
            (Outcome::Deleted, Some(snap)) => Ok(Outcome::DeletedWith(format!(
                "EBS volume {} deleted after snapshot {snap}",
                t.id
            ))),
            (o, _) => Ok(o),
        }
    }
}

/// The snapshot of `volume` this teardown took (an earlier pass's, found by its tags), or a new
/// one.
async fn snapshot(ctx: &CleanCtx<'_>, volume: &str) -> Result<String, ApiFailure> {
    let found = call("ec2.DescribeSnapshots", || {
        ctx.clients
            .ec2
            .describe_snapshots()
            .owner_ids("self")
            .filters(tags::ec2_tag_filter(SOURCE_VOLUME_TAG, volume))
            .filters(tags::ec2_tag_filter(CLUSTER_TAG, ctx.cluster))
            .send()
    })
    .await?;
    if let Some(id) = found.snapshots().iter().find_map(|s| s.snapshot_id()) {
        return Ok(id.to_string());
    }
    let tag = |k: &str, v: &str| Tag::builder().key(k).value(v).build();
    let made = call("ec2.CreateSnapshot", || {
        ctx.clients
            .ec2
            .create_snapshot()
            .volume_id(volume)
            .description(format!(
                "sweeper: volume {volume} of cluster {} before deleting it",
                ctx.cluster
            ))
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::Snapshot)
                    .tags(tag(SOURCE_VOLUME_TAG, volume))
                    .tags(tag(CLUSTER_TAG, ctx.cluster))
                    .build(),
            )
            .send()
    })
    .await?;
    made.snapshot_id()
        .map(str::to_string)
        .ok_or_else(|| ApiFailure {
            class: ErrorClass::Fatal,
            code: None,
            message: "CreateSnapshot returned no snapshot id".into(),
            throttling: false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_volumes_the_csi_driver_made_for_the_cluster_are_targets() {
        let capa = tags::capa_key("c1");
        let owned = ("kubernetes.io/cluster/c1", "owned");
        let mark = (CSI_VOLUME_TAG, "pvc-1234");
        let k8s = (KUBERNETES_CLUSTER_TAG, "c1");
        let csi = (CSI_CLUSTER_TAG, "c1");
        assert!(is_cluster_csi_volume(&[owned, mark, k8s], "c1", &capa));
        assert!(is_cluster_csi_volume(&[mark, csi], "c1", &capa));
        assert!(
            !is_cluster_csi_volume(&[owned, k8s], "c1", &capa),
            "no CSIVolumeName: not the driver's"
        );
        assert!(
            !is_cluster_csi_volume(&[owned, mark], "c1", &capa),
            "the cluster is not named"
        );
        assert!(
            !is_cluster_csi_volume(&[mark, (KUBERNETES_CLUSTER_TAG, "c1-b")], "c1", &capa),
            "a cluster whose name extends ours"
        );
        assert!(
            !is_cluster_csi_volume(&[mark, ("ebs.csi.aws.com/cluster", "true")], "c1", &capa),
            "the driver's generic tag names no cluster"
        );
        assert!(!is_cluster_csi_volume(
            &[owned, mark, k8s, (capa.as_str(), "owned")],
            "c1",
            &capa
        ));
    }
}
