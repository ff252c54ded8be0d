//! Builders for the leftovers issue #34 added to phase 2, as the benchmarks put them in their
//! workloads: Karpenter's instance profiles and the EBS CSI driver's volumes and snapshots.
//! Like `build`'s top level they panic on a failed call, naming it: a half-built world would make
//! the figures meaningless.

use super::build::cloud;
use crate::model::AwsClients;
use aws_sdk_ec2::types::{ResourceType, Tag as Ec2Tag, TagSpecification};
use aws_sdk_iam::types::Tag as IamTag;

/// EC2 may assume it: the trust policy of a Karpenter node role.
const EC2_TRUST: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;

/// A node role `name` (the user's: a teardown removes it from profiles and never deletes it).
pub async fn node_role(c: &AwsClients, name: &str) {
    c.iam
        .create_role()
        .role_name(name)
        .assume_role_policy_document(EC2_TRUST)
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateRole {name}: {e:?}"));
}

/// A Karpenter instance profile of `cluster` as Karpenter makes it since August 2025: name
/// `<cluster>_<suffix>`, path `/karpenter/<region>/<cluster>/<uid>/`, the cluster, EC2NodeClass
/// and region tags, holding `role`. Returns its name.
pub async fn karpenter_profile(
    c: &AwsClients,
    cluster: &str,
    suffix: &str,
    region: &str,
    role: &str,
) -> String {
    let name = format!("{cluster}_{suffix}");
    let (owned_key, owned) = cloud(cluster, "owned");
    let tags = [
        (owned_key.as_str(), owned.as_str()),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("topology.kubernetes.io/region", region),
    ];
    let mut req = c
        .iam
        .create_instance_profile()
        .instance_profile_name(&name)
        .path(format!("/karpenter/{region}/{cluster}/uid-{suffix}/"));
    for (k, v) in tags {
        req = req.tags(IamTag::builder().key(k).value(v).build().expect("tag"));
    }
    req.send()
        .await
        .unwrap_or_else(|e| panic!("CreateInstanceProfile {name}: {e:?}"));
    c.iam
        .add_role_to_instance_profile()
        .instance_profile_name(&name)
        .role_name(role)
        .send()
        .await
        .unwrap_or_else(|e| panic!("AddRoleToInstanceProfile {name}: {e:?}"));
    name
}

fn spec(ty: ResourceType, tags: &[(String, String)]) -> TagSpecification {
    tags.iter()
        .fold(
            TagSpecification::builder().resource_type(ty),
            |s, (k, v)| s.tags(Ec2Tag::builder().key(k).value(v).build()),
        )
        .build()
}

/// The tags the EBS CSI driver (with `--k8s-tag-cluster-id`) puts on the volume of
/// PersistentVolume `pv` of `cluster`.
pub fn csi_volume_tags(cluster: &str, pv: &str) -> Vec<(String, String)> {
    vec![
        cloud(cluster, "owned"),
        ("KubernetesCluster".into(), cluster.into()),
        ("CSIVolumeName".into(), pv.into()),
        ("ebs.csi.aws.com/cluster".into(), "true".into()),
    ]
}

/// An `available` EBS volume the CSI driver made for `cluster`'s PersistentVolume `pv`; its id.
pub async fn csi_volume(c: &AwsClients, cluster: &str, pv: &str) -> String {
    super::build::volume(c, &csi_volume_tags(cluster, pv)).await
}

/// A snapshot of `volume` the CSI driver made for `cluster`'s VolumeSnapshot `name`; its id.
pub async fn csi_snapshot(c: &AwsClients, cluster: &str, volume: &str, name: &str) -> String {
    let tags = [
        cloud(cluster, "owned"),
        ("CSIVolumeSnapshotName".into(), name.into()),
    ];
    c.ec2
        .create_snapshot()
        .volume_id(volume)
        .tag_specifications(spec(ResourceType::Snapshot, &tags))
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateSnapshot of {volume}: {e:?}"))
        .snapshot_id()
        .unwrap_or_else(|| panic!("CreateSnapshot of {volume}: no id"))
        .to_string()
}
