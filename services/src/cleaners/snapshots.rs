//! Phase 2, opt-in only (task `ebs-snapshot`, separate from `ebs-volume`: snapshots are backups,
//! and a team may want the volumes gone but their snapshots kept): EBS snapshots the EBS CSI
//! driver took for the cluster's VolumeSnapshots, found by the cluster tag and the driver's mark.
//! Which of those are deleted is `policy::ebs::snapshot`'s.

use super::{CleanCtx, CleanError, Cleaner, Descriptor, Outcome, Target, settle};
use crate::errors::call;
use crate::locate::{describe, tags};
use crate::model::{GcTask, Phase};
use crate::policy::{self, Candidate};
use async_trait::async_trait;

/// Selects the CSI driver's snapshots: opt-in, see the registry's `OPT_IN`.
pub const TASK: GcTask = GcTask::new("ebs-snapshot");

pub use crate::policy::ebs::CSI_SNAPSHOT_TAG;

pub struct Snapshots;

const KIND: &str = "snapshot";

/// With the volumes (order 25): a snapshot depends on nothing the teardown deletes.
pub const DESCRIPTOR: Descriptor = Descriptor {
    task: Some(TASK),
    iam_actions: &["ec2:DescribeSnapshots", "ec2:DeleteSnapshot"],
    ..Descriptor::new("ec2", KIND, Phase::Tagged, 25)
};

#[async_trait]
impl Cleaner for Snapshots {
    type Detail = ();

    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
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
                    policy::ebs::snapshot(&Candidate::tagged(&pairs), ctx.cluster, capa).is_delete()
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
mod calls {
    use super::*;
    use crate::cleaners::test_ctx as ctx;
    use crate::locate::inventory::Inventory;
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
