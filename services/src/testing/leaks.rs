//! Builders for the leftovers issue #34 added to phase 2, as the benchmarks put them in their
//! workloads: Karpenter's instance profiles, the EBS CSI driver's volumes and snapshots, and
//! external-dns records.
//! Like `build`'s top level they panic on a failed call, naming it: a half-built world would make
//! the figures meaningless.

use super::build::cloud;
use super::build::fallible::ec2_tags;
use crate::model::AwsClients;
use aws_sdk_ec2::types::ResourceType;
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
        .tag_specifications(ec2_tags(ResourceType::Snapshot, &tags))
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateSnapshot of {volume}: {e:?}"))
        .snapshot_id()
        .unwrap_or_else(|| panic!("CreateSnapshot of {volume}: no id"))
        .to_string()
}

/// A public hosted zone `domain` (LocalStack: any name); its id without `/hostedzone/`.
pub async fn hosted_zone(c: &AwsClients, domain: &str) -> String {
    c.route53
        .create_hosted_zone()
        .name(domain)
        .caller_reference(domain)
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateHostedZone {domain}: {e:?}"))
        .hosted_zone()
        .unwrap_or_else(|| panic!("CreateHostedZone {domain}: no zone"))
        .id()
        .trim_start_matches("/hostedzone/")
        .to_string()
}

/// The load balancers' DNS names, by ARN (v2 load balancers, 20 per call).
pub async fn lb_dns_names(c: &AwsClients, arns: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in arns.chunks(20) {
        let page = c
            .elbv2
            .describe_load_balancers()
            .set_load_balancer_arns(Some(chunk.to_vec()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("DescribeLoadBalancers: {e:?}"));
        out.extend(
            page.load_balancers()
                .iter()
                .filter_map(|l| l.dns_name().map(str::to_string)),
        );
    }
    out
}

/// What external-dns makes for a Service of load balancer `lb_dns` in `zone`: an alias `A`
/// record `name` and its TXT companion `a-<name>` (the newer format) saying
/// `external-dns/owner=<owner>`; both in one change batch, as external-dns writes them.
pub async fn external_dns_pair(c: &AwsClients, zone: &str, name: &str, lb_dns: &str, owner: &str) {
    use aws_sdk_route53::types::{
        AliasTarget, Change, ChangeAction, ChangeBatch, ResourceRecord, ResourceRecordSet, RrType,
    };
    let alias = ResourceRecordSet::builder()
        .name(name)
        .r#type(RrType::A)
        .alias_target(
            AliasTarget::builder()
                .hosted_zone_id("Z35SXDOTRQ7X7K")
                .dns_name(format!("dualstack.{lb_dns}."))
                .evaluate_target_health(true)
                .build()
                .expect("alias target"),
        )
        .build()
        .expect("alias record");
    let value = format!(
        "\"heritage=external-dns,external-dns/owner={owner},external-dns/resource=service/default/{}\"",
        name.split('.').next().unwrap_or("svc")
    );
    let txt = ResourceRecordSet::builder()
        .name(format!("a-{name}"))
        .r#type(RrType::Txt)
        .ttl(300)
        .resource_records(ResourceRecord::builder().value(value).build().expect("txt"))
        .build()
        .expect("txt record");
    let change = |set| {
        Change::builder()
            .action(ChangeAction::Create)
            .resource_record_set(set)
            .build()
            .expect("change")
    };
    c.route53
        .change_resource_record_sets()
        .hosted_zone_id(zone)
        .change_batch(
            ChangeBatch::builder()
                .changes(change(alias))
                .changes(change(txt))
                .build()
                .expect("batch"),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("ChangeResourceRecordSets {name}: {e:?}"));
}
