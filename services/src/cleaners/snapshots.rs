//! Phase 2, opt-in only (task `ebs-snapshot`, separate from `ebs-volume`: snapshots are backups,
//! and a team may want the volumes gone but their snapshots kept): EBS snapshots the EBS CSI
//! driver took for the cluster's VolumeSnapshots. A snapshot is a target only when it carries
//! both `kubernetes.io/cluster/<name>=owned` (the driver's `--k8s-tag-cluster-id`) and
//! `CSIVolumeSnapshotName` (the driver's own mark). `ebs.csi.aws.com/cluster=true` says nothing
//! about which cluster and is never enough; the snapshots sweeper itself takes of volumes before
//! deleting them carry neither tag and stay.

use super::{CleanCtx, CleanError, Cleaner, Outcome, Target, settle};
use crate::discovery::{describe, tags};
use crate::errors::call;
use crate::model::GcTask;
use async_trait::async_trait;

/// Selects the CSI driver's snapshots: opt-in, see the registry's `OPT_IN`.
pub const TASK: GcTask = GcTask::new("ebs-snapshot");

/// The EBS CSI driver's tag on a snapshot it took for a VolumeSnapshot.
pub const CSI_SNAPSHOT_TAG: &str = "CSIVolumeSnapshotName";

pub struct Snapshots;

const KIND: &str = "snapshot";

/// Whether a snapshot with these tags is the cluster's CSI snapshot: owned by `cluster` and
/// marked by the CSI driver, never CAPA's.
pub fn is_cluster_csi_snapshot(tags: &[(&str, &str)], cluster: &str, capa_key: &str) -> bool {
    tags::is_owned(tags.iter().copied(), &tags::cloud_key(cluster))
        && tags::has_key(tags.iter().copied(), CSI_SNAPSHOT_TAG)
        && !tags::is_owned(tags.iter().copied(), capa_key)
}

#[async_trait]
impl Cleaner for Snapshots {
    type Detail = ();

    fn service(&self) -> &'static str {
        "ec2"
    }
    fn kind(&self) -> &'static str {
        KIND
    }
    fn order(&self) -> u32 {
        // With the volumes: a snapshot depends on nothing the teardown deletes.
        25
    }
    fn task(&self) -> Option<GcTask> {
        Some(TASK)
    }

    async fn discover(&self, ctx: &CleanCtx<'_>) -> Result<Vec<Target<Self::Detail>>, CleanError> {
        let capa = ctx.capa_key();
        let owned = tags::ec2_tag_filter(&tags::cloud_key(ctx.cluster), tags::OWNED);
        let marked = tags::ec2_filter("tag-key", &[CSI_SNAPSHOT_TAG.to_string()]);
        let (owned, marked, capa) = (&owned, &marked, &capa);
        describe::all_pages(|token| async move {
            let page = call("ec2.DescribeSnapshots", || {
                ctx.clients
                    .ec2
                    .describe_snapshots()
                    .owner_ids("self")
                    .filters(owned.clone())
                    .filters(marked.clone())
                    .set_next_token(token.clone())
                    .send()
            })
            .await
            .map_err(CleanError::discover(KIND, "DescribeSnapshots"))?;
            // The filters ask the server; the rule is checked here too, so a server that ignores
            // a filter (an emulator) cannot widen what is deleted.
            let found = page
                .snapshots()
                .iter()
                .filter(|s| {
                    let pairs: Vec<_> = tags::ec2_pairs(s.tags()).collect();
                    is_cluster_csi_snapshot(&pairs, ctx.cluster, capa)
                })
                .filter_map(|s| {
                    let id = s.snapshot_id()?;
                    Some(Target::plain(id).with_tags(tags::ec2_pairs(s.tags())))
                })
                .collect();
            Ok((found, page.next_token().map(str::to_string)))
        })
        .await
    }

    async fn delete(&self, ctx: &CleanCtx<'_>, t: &Target) -> Result<Outcome, CleanError> {
        let res = call("ec2.DeleteSnapshot", || {
            ctx.clients.ec2.delete_snapshot().snapshot_id(&t.id).send()
        })
        .await;
        settle(res, KIND, &t.id, "DeleteSnapshot")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_clusters_owned_csi_snapshots_are_targets() {
        let capa = tags::capa_key("c1");
        let owned = ("kubernetes.io/cluster/c1", "owned");
        let csi = (CSI_SNAPSHOT_TAG, "snapshot-1234");
        assert!(is_cluster_csi_snapshot(&[owned, csi], "c1", &capa));
        assert!(
            !is_cluster_csi_snapshot(&[owned], "c1", &capa),
            "without CSIVolumeSnapshotName: a snapshot someone else took"
        );
        assert!(
            !is_cluster_csi_snapshot(&[("kubernetes.io/cluster/c1", "shared"), csi], "c1", &capa),
            "shared is not owned"
        );
        assert!(
            !is_cluster_csi_snapshot(&[("kubernetes.io/cluster/c1-b", "owned"), csi], "c1", &capa),
            "a cluster whose name extends ours"
        );
        assert!(
            !is_cluster_csi_snapshot(&[("ebs.csi.aws.com/cluster", "true"), csi], "c1", &capa),
            "the driver's generic tag names no cluster"
        );
        assert!(
            !is_cluster_csi_snapshot(&[owned, csi, (capa.as_str(), "owned")], "c1", &capa),
            "never CAPA's"
        );
    }
}

#[cfg(test)]
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::discovery::inventory::Inventory;
    use crate::mocked::{self, CAPA_KEY, CLOUD_KEY, assert_calls, filter_is, mock, tag};
    use aws_sdk_ec2::Client;
    use aws_sdk_ec2::operation::delete_snapshot::DeleteSnapshotOutput;
    use aws_sdk_ec2::operation::describe_snapshots::DescribeSnapshotsOutput;
    use aws_sdk_ec2::types::Snapshot;

    fn snap(id: &str, tags: &[(&str, &str)]) -> Snapshot {
        let mut b = Snapshot::builder().snapshot_id(id);
        for (k, v) in tags {
            b = b.tags(tag(k, v));
        }
        b.build()
    }

    #[tokio::test]
    async fn own_account_csi_snapshots_owned_by_the_cluster_are_targets_and_deleted() {
        let describe = mock!(Client::describe_snapshots)
            .match_requests(|r| {
                r.owner_ids() == ["self"]
                    && filter_is(r.filters(), &format!("tag:{CLOUD_KEY}"), &["owned"])
                    && filter_is(r.filters(), "tag-key", &[CSI_SNAPSHOT_TAG])
            })
            .then_output(|| {
                let csi = (CSI_SNAPSHOT_TAG, "snapcontent-1");
                DescribeSnapshotsOutput::builder()
                    .snapshots(snap("snap-ours", &[(CLOUD_KEY, "owned"), csi]))
                    // What a server ignoring the filters could return: never targets.
                    .snapshots(snap("snap-shared", &[(CLOUD_KEY, "shared"), csi]))
                    .snapshots(snap(
                        "snap-capa",
                        &[(CLOUD_KEY, "owned"), (CAPA_KEY, "owned"), csi],
                    ))
                    .snapshots(snap("snap-manual", &[(CLOUD_KEY, "owned")]))
                    .build()
            });
        let delete = mock!(Client::delete_snapshot)
            .match_requests(|r| r.snapshot_id() == Some("snap-ours"))
            .then_output(|| DeleteSnapshotOutput::builder().build());
        let c = mocked::in_order(&[&describe, &delete]);
        let inv = Inventory::default();
        let cx = ctx(&c, &inv);
        let found = Snapshots.discover(&cx).await.unwrap();
        assert_eq!(
            found.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["snap-ours"]
        );
        assert_eq!(
            Snapshots.delete(&cx, &found[0]).await.unwrap(),
            Outcome::Deleted
        );
        assert_calls(&delete, 1, "DeleteSnapshot");
    }
}
