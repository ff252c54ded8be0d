//! Phase 2, opt-in only (task `ebs-volume`, never part of the default set: CAPA's "Beta"
//! criterion, and data loss is not undoable): EBS volumes the EBS CSI driver created for the
//! cluster, in state `available`, found through `kubernetes.io/cluster/<name>=owned` or the
//! driver's cluster-name tag. Which of those are deleted is `policy::ebs::volume`'s.
//!
//! By default each volume is snapshotted first; the snapshot is tagged with the source volume and
//! the cluster, and its id is reported (an Event on the cluster object). A snapshot left by a pass
//! that crashed before the delete is found by those tags and reused, so a retry makes no second
//! snapshot. A volume's snapshot is point-in-time, so the delete need not wait for it to complete.

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::{ApiFailure, ErrorClass, call};
use crate::locate::{describe, tags};
use crate::model::{GcTask, Phase};
use crate::policy::{self, Candidate};
use async_trait::async_trait;
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};

/// Selects EBS volumes: opt-in, see the registry's `OPT_IN`.
pub const TASK: GcTask = GcTask::new("ebs-volume");

pub use crate::policy::ebs::{CSI_CLUSTER_TAG, CSI_VOLUME_TAG, KUBERNETES_CLUSTER_TAG};

/// On a snapshot: the volume it was taken of.
pub const SOURCE_VOLUME_TAG: &str = "sweeper.dev/source-volume";
/// On a snapshot: the cluster whose teardown took it.
pub const CLUSTER_TAG: &str = "sweeper.dev/cluster";

pub struct Volumes;

const KIND: &str = "volume";

/// With the nodes (order 25): a volume attached to a terminating node becomes available after it.
pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &[
        "ec2:DescribeVolumes",
        // The snapshot taken before the delete (`--external-ebs-snapshot`): looked for, created,
        // and tagged in the same request (tag-on-create needs `CreateTags`, granted in the
        // policy for `CreateSnapshot` only).
        "ec2:DescribeSnapshots",
        "ec2:CreateSnapshot",
        "ec2:CreateTags",
        "ec2:DeleteVolume",
    ],
    ..Descriptor::new("ec2", KIND, Phase::Tagged, 25)
};

#[async_trait]
impl Cleaner for Volumes {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
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
                        policy::ebs::volume(&Candidate::tagged(&pairs), ctx.cluster, capa)
                            .is_delete()
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
            kind: crate::errors::FailureKind::Other,
        })
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, CLOUD_KEY, assert_calls, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::create_snapshot::CreateSnapshotOutput;
    use aws_sdk_ec2::operation::delete_volume::DeleteVolumeOutput;
    use aws_sdk_ec2::operation::describe_snapshots::DescribeSnapshotsOutput;
    use aws_sdk_ec2::operation::describe_volumes::DescribeVolumesOutput;
    use aws_sdk_ec2::types::Volume;

    fn volume(id: &str, tags: &[(&str, &str)]) -> Volume {
        let mut b = Volume::builder().volume_id(id);
        for (k, v) in tags {
            b = b.tags(tag(k, v));
        }
        b.build()
    }

    #[tokio::test]
    async fn available_csi_volumes_of_the_cluster_are_targets_and_look_alikes_are_not() {
        let csi = (CSI_VOLUME_TAG, "pvc-1");
        let by_cloud_tag = mock!(Client::describe_volumes)
            .match_requests(|r| {
                filter_is(r.filters(), &format!("tag:{CLOUD_KEY}"), &["owned"])
                    && filter_is(r.filters(), "status", &["available"])
            })
            .then_output(move || {
                DescribeVolumesOutput::builder()
                    .volumes(volume(
                        "vol-a",
                        &[(CLOUD_KEY, "owned"), csi, (CSI_CLUSTER_TAG, "c1")],
                    ))
                    // A server that ignored the filter: CAPA's, another cluster's, not the CSI's.
                    .volumes(volume(
                        "vol-capa",
                        &[(CAPA_KEY, "owned"), csi, (CSI_CLUSTER_TAG, "c1")],
                    ))
                    .volumes(volume("vol-c1b", &[csi, (CSI_CLUSTER_TAG, "c1-b")]))
                    .volumes(volume(
                        "vol-static",
                        &[(CLOUD_KEY, "owned"), (CSI_CLUSTER_TAG, "c1")],
                    ))
                    .build()
            });
        let by_csi_tag = mock!(Client::describe_volumes)
            .match_requests(|r| {
                filter_is(r.filters(), &format!("tag:{CSI_CLUSTER_TAG}"), &["c1"])
                    && filter_is(r.filters(), "status", &["available"])
            })
            .then_output(move || {
                DescribeVolumesOutput::builder()
                    .volumes(volume("vol-a", &[csi, (CSI_CLUSTER_TAG, "c1")]))
                    .volumes(volume("vol-b", &[csi, (KUBERNETES_CLUSTER_TAG, "c1")]))
                    .build()
            });
        let c = mocked::in_order(&[&by_cloud_tag, &by_csi_tag]);
        let inv = Inventory::default();
        let found = Volumes.discover(&ctx(&c, &inv)).await.unwrap();
        assert_eq!(
            found.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["vol-a", "vol-b"]
        );
    }

    #[tokio::test]
    async fn with_snapshots_on_a_volume_is_snapshotted_before_its_delete() {
        let earlier = mock!(Client::describe_snapshots)
            .match_requests(|r| {
                filter_is(r.filters(), &format!("tag:{SOURCE_VOLUME_TAG}"), &["vol-a"])
                    && filter_is(r.filters(), &format!("tag:{CLUSTER_TAG}"), &["c1"])
            })
            .then_output(|| DescribeSnapshotsOutput::builder().build());
        let create = mock!(Client::create_snapshot)
            .match_requests(|r| r.volume_id() == Some("vol-a"))
            .then_output(|| {
                CreateSnapshotOutput::builder()
                    .snapshot_id("snap-1")
                    .build()
            });
        let delete = mock!(Client::delete_volume)
            .match_requests(|r| r.volume_id() == Some("vol-a"))
            .then_output(|| DeleteVolumeOutput::builder().build());
        let c = mocked::in_order(&[&earlier, &create, &delete]);
        let inv = Inventory::default();
        let cx = CleanCtx {
            snapshot_volumes: true,
            ..ctx(&c, &inv)
        };
        let out = Volumes.delete(&cx, &Target::plain("vol-a")).await.unwrap();
        assert!(
            matches!(&out, Outcome::DeletedWith(n) if n.contains("snap-1")),
            "{out:?}"
        );
        assert_calls(&create, 1, "CreateSnapshot");
    }

    #[tokio::test]
    async fn an_earlier_passs_snapshot_is_reused_and_without_snapshots_none_is_asked() {
        let earlier = mock!(Client::describe_snapshots).then_output(|| {
            DescribeSnapshotsOutput::builder()
                .snapshots(
                    aws_sdk_ec2::types::Snapshot::builder()
                        .snapshot_id("snap-0")
                        .build(),
                )
                .build()
        });
        let delete =
            mock!(Client::delete_volume).then_output(|| DeleteVolumeOutput::builder().build());
        let delete_plain =
            mock!(Client::delete_volume).then_output(|| DeleteVolumeOutput::builder().build());
        // No CreateSnapshot rule: a second snapshot would panic the mock.
        let c = mocked::in_order(&[&earlier, &delete, &delete_plain]);
        let inv = Inventory::default();
        let cx = CleanCtx {
            snapshot_volumes: true,
            ..ctx(&c, &inv)
        };
        let out = Volumes.delete(&cx, &Target::plain("vol-a")).await.unwrap();
        assert!(
            matches!(&out, Outcome::DeletedWith(n) if n.contains("snap-0")),
            "{out:?}"
        );
        let out = Volumes
            .delete(&ctx(&c, &inv), &Target::plain("vol-b"))
            .await
            .unwrap();
        assert_eq!(out, Outcome::Deleted);
        assert_calls(&delete_plain, 1, "DeleteVolume without a snapshot");
    }
}
