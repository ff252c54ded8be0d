//! EBS volumes and snapshots (phase 2, opt-in tasks `ebs-volume` and `ebs-snapshot`: data loss is
//! not undoable). Only what the EBS CSI driver made for the cluster is deleted: its own mark on
//! the resource *and* the cluster named, never CAPA's. An owned volume without the driver's mark
//! (in-tree, or made by hand) is left: whose data it holds is not known. A volume `in-use` is
//! never asked for (the describe filters on `status=available`); the snapshots sweeper itself
//! takes before deleting a volume carry neither of the driver's tags and stay.

use super::{Candidate, Verdict, tags};

/// The EBS CSI driver's cluster tag (with `--k8s-tag-cluster-id=<name>`).
pub const CSI_CLUSTER_TAG: &str = "ebs.csi.aws.com/cluster-name";
/// The EBS CSI driver's mark on a volume it created for a PersistentVolume.
pub const CSI_VOLUME_TAG: &str = "CSIVolumeName";
/// The cluster tag the EBS CSI driver (and the in-tree provider) put on a volume.
pub const KUBERNETES_CLUSTER_TAG: &str = "KubernetesCluster";
/// The EBS CSI driver's tag on a snapshot it took for a VolumeSnapshot.
pub const CSI_SNAPSHOT_TAG: &str = "CSIVolumeSnapshotName";

/// A volume: the driver's `CSIVolumeName`, and `cluster` named in `KubernetesCluster` or
/// `ebs.csi.aws.com/cluster-name` (exactly: `c1-b` is not `c1`).
pub fn volume(c: &Candidate<'_>, cluster: &str, capa_key: &str) -> Verdict {
    let pairs = || c.tags.iter().copied();
    if tags::is_owned(pairs(), capa_key) {
        return Verdict::keep("CAPA-owned: phase 1 or 3 deletes it");
    }
    if !tags::has_key(pairs(), CSI_VOLUME_TAG) {
        return Verdict::foreign("no CSIVolumeName: not the EBS CSI driver's volume");
    }
    let names_cluster = c
        .tags
        .iter()
        .any(|(k, v)| (*k == KUBERNETES_CLUSTER_TAG || *k == CSI_CLUSTER_TAG) && *v == cluster);
    if !names_cluster {
        return Verdict::foreign("the EBS CSI driver's, for another cluster");
    }
    Verdict::Delete
}

/// A snapshot: `kubernetes.io/cluster/<cluster>=owned` (the driver's `--k8s-tag-cluster-id`) and
/// the driver's `CSIVolumeSnapshotName`; `ebs.csi.aws.com/cluster=true` names no cluster.
pub fn snapshot(c: &Candidate<'_>, cluster: &str, capa_key: &str) -> Verdict {
    let pairs = || c.tags.iter().copied();
    if tags::is_owned(pairs(), capa_key) {
        return Verdict::keep("CAPA-owned: phase 1 or 3 deletes it");
    }
    if !tags::is_owned(pairs(), &tags::cloud_key(cluster)) {
        return Verdict::foreign("not owned by the cluster");
    }
    if !tags::has_key(pairs(), CSI_SNAPSHOT_TAG) {
        return Verdict::foreign("no CSIVolumeSnapshotName: a snapshot someone else took");
    }
    Verdict::Delete
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::table::{self, Want::*};

    #[test]
    fn only_volumes_the_csi_driver_made_for_the_cluster_are_deleted() {
        let capa = tags::capa_key("c1");
        let d = |t: &[(&str, &str)]| volume(&Candidate::tagged(t), "c1", &capa);
        let owned = ("kubernetes.io/cluster/c1", "owned");
        let mark = (CSI_VOLUME_TAG, "pvc-1234");
        let k8s = (KUBERNETES_CLUSTER_TAG, "c1");
        let csi = (CSI_CLUSTER_TAG, "c1");
        table::check(&[
            (
                d(&[owned, mark, k8s]),
                Delete,
                "owned, marked, KubernetesCluster",
            ),
            (d(&[mark, csi]), Delete, "marked, the driver's cluster-name"),
            (
                d(&[owned, k8s]),
                Foreign,
                "no CSIVolumeName: not the driver's",
            ),
            (d(&[owned, mark]), Foreign, "the cluster is not named"),
            (
                d(&[mark, (KUBERNETES_CLUSTER_TAG, "c1-b")]),
                Foreign,
                "a cluster whose name extends ours",
            ),
            (
                d(&[mark, (CSI_CLUSTER_TAG, "c1-b")]),
                Foreign,
                "another cluster, the driver's tag",
            ),
            (
                d(&[mark, ("ebs.csi.aws.com/cluster", "true")]),
                Foreign,
                "the driver's generic tag names no cluster",
            ),
            (
                d(&[owned, mark, k8s, (capa.as_str(), "owned")]),
                Keep,
                "never CAPA's",
            ),
            (
                d(&[(capa.as_str(), "owned"), mark, csi]),
                Keep,
                "CAPA's, found by the driver's tag",
            ),
            (
                d(&[owned, csi]),
                Foreign,
                "a static volume: owned, named, no mark",
            ),
        ]);
    }

    #[test]
    fn only_the_clusters_owned_csi_snapshots_are_deleted() {
        let capa = tags::capa_key("c1");
        let d = |t: &[(&str, &str)]| snapshot(&Candidate::tagged(t), "c1", &capa);
        let owned = ("kubernetes.io/cluster/c1", "owned");
        let csi = (CSI_SNAPSHOT_TAG, "snapshot-1234");
        table::check(&[
            (d(&[owned, csi]), Delete, "owned and marked"),
            (
                d(&[owned]),
                Foreign,
                "without CSIVolumeSnapshotName: a snapshot someone else took",
            ),
            (
                d(&[("kubernetes.io/cluster/c1", "shared"), csi]),
                Foreign,
                "shared is not owned",
            ),
            (
                d(&[("kubernetes.io/cluster/c1-b", "owned"), csi]),
                Foreign,
                "a cluster whose name extends ours",
            ),
            (
                d(&[("ebs.csi.aws.com/cluster", "true"), csi]),
                Foreign,
                "the driver's generic tag names no cluster",
            ),
            (
                d(&[owned, csi, (capa.as_str(), "owned")]),
                Keep,
                "never CAPA's",
            ),
            (
                d(&[
                    ("sweeper.dev/source-volume", "vol-1"),
                    ("sweeper.dev/cluster", "c1"),
                ]),
                Foreign,
                "sweeper's own snapshot of a volume",
            ),
        ]);
    }
}
