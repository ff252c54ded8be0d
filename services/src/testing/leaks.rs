//! Builders for the leftovers issue #34 added to phase 2, as the benchmarks put them in their
//! workloads: Karpenter's instance profiles, the EBS CSI driver's volumes and snapshots, and
//! external-dns records; and issue #44's CAPA leftovers (the EventBridgeInstanceState pair).
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

/// CAPA's EventBridgeInstanceState pair for Cluster API Cluster `n`, as CAPA builds it (queue,
/// disabled rule, the rule's target, the queue's policy: `pkg/cloud/services/instancestate/`),
/// with `policy` instead of CAPA's when given and the rule targeting `target_arn` instead of the
/// queue when given. Returns (queue URL, queue ARN, rule ARN).
pub async fn instance_state_pair(
    c: &AwsClients,
    n: &str,
    policy: Option<&str>,
    target_arn: Option<&str>,
) -> (String, String, String) {
    use crate::policy::instance_state as capa;
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let (queue, rule) = (capa::queue_name(n), capa::rule_name(n));
    let url = c
        .sqs
        .create_queue()
        .queue_name(&queue)
        .attributes(A::ReceiveMessageWaitTimeSeconds, "20")
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateQueue {queue}: {e:?}"))
        .queue_url
        .unwrap_or_default();
    let queue_arn = c
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(A::QueueArn)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GetQueueAttributes {queue}: {e:?}"))
        .attributes
        .and_then(|mut a| a.remove(&A::QueueArn))
        .unwrap_or_default();
    let pattern = r#"{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"],"detail":{"state":["shutting-down","terminated"]}}"#;
    let rule_arn = c
        .events
        .put_rule()
        .name(&rule)
        .event_pattern(pattern)
        .state(aws_sdk_eventbridge::types::RuleState::Disabled)
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutRule {rule}: {e:?}"))
        .rule_arn
        .unwrap_or_default();
    let target = aws_sdk_eventbridge::types::Target::builder()
        .id(&queue)
        .arn(target_arn.unwrap_or(&queue_arn))
        .build()
        .unwrap_or_else(|e| panic!("target {queue}: {e:?}"));
    c.events
        .put_targets()
        .rule(&rule)
        .targets(target)
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutTargets {rule}: {e:?}"));
    let policy = policy
        .map(str::to_string)
        .unwrap_or_else(|| capa::capa_policy(n, &queue_arn, &rule_arn));
    c.sqs
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(A::Policy, policy)
        .send()
        .await
        .unwrap_or_else(|e| panic!("SetQueueAttributes {queue}: {e:?}"));
    (url, queue_arn, rule_arn)
}

/// A Secrets Manager secret `name` tagged `tags`, as CAPA stores a chunk of a machine's user
/// data. Returns its ARN.
pub async fn bootstrap_secret(c: &AwsClients, name: &str, tags: &[(&str, &str)]) -> String {
    let tags = tags.iter().map(|(k, v)| {
        aws_sdk_secretsmanager::types::Tag::builder()
            .key(*k)
            .value(*v)
            .build()
    });
    c.secrets
        .create_secret()
        .name(name)
        .secret_binary(aws_smithy_types::Blob::new(b"#cloud-config".to_vec()))
        .set_tags(Some(tags.collect()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateSecret {name}: {e:?}"))
        .arn
        .unwrap_or_default()
}

/// An SSM SecureString parameter `name` tagged `tags`, as CAPA stores a chunk of a machine's
/// user data.
pub async fn bootstrap_parameter(c: &AwsClients, name: &str, tags: &[(&str, &str)]) {
    let tags = tags
        .iter()
        .map(|(k, v)| aws_sdk_ssm::types::Tag::builder().key(*k).value(*v).build());
    c.ssm
        .put_parameter()
        .name(name)
        .value("#cloud-config")
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .set_tags(Some(
            tags.collect::<Result<Vec<_>, _>>()
                .unwrap_or_else(|e| panic!("tags of {name}: {e:?}")),
        ))
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutParameter {name}: {e:?}"));
}

/// A bucket `name` tagged `tags` (none: no tag set), as CAPA's `ReconcileBucket` leaves the
/// bucket `spec.s3Bucket` names (in the clients' region).
pub async fn bootstrap_bucket(c: &AwsClients, name: &str, tags: &[(&str, &str)]) {
    use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration, Tag, Tagging};
    let region = c.s3.config().region().map(|r| r.to_string());
    let mut create = c.s3.create_bucket().bucket(name);
    // us-east-1 takes no location constraint (S3 refuses one naming it).
    if let Some(r) = region.filter(|r| r != "us-east-1") {
        create = create.create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(r.as_str()))
                .build(),
        );
    }
    create
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateBucket {name}: {e:?}"));
    if tags.is_empty() {
        return;
    }
    let set = tags
        .iter()
        .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("tags of {name}: {e:?}"));
    let tagging = Tagging::builder()
        .set_tag_set(Some(set))
        .build()
        .unwrap_or_else(|e| panic!("tagging of {name}: {e:?}"));
    c.s3.put_bucket_tagging()
        .bucket(name)
        .tagging(tagging)
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutBucketTagging {name}: {e:?}"));
}

/// An object `key` in `bucket`, written as CAPA's `Create` writes user data: no tag, no metadata.
pub async fn bootstrap_object(c: &AwsClients, bucket: &str, key: &str) {
    c.s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(aws_sdk_s3::primitives::ByteStream::from_static(
            b"{\"ignition\":{}}",
        ))
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutObject {bucket}/{key}: {e:?}"));
}

/// Whether `key` is in `bucket`.
pub async fn object_exists(c: &AwsClients, bucket: &str, key: &str) -> bool {
    c.s3.head_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .is_ok()
}

/// Whether `bucket` exists.
pub async fn bucket_exists(c: &AwsClients, bucket: &str) -> bool {
    c.s3.head_bucket().bucket(bucket).send().await.is_ok()
}

/// A new random UUID-shaped string (CAPA names bootstrap data with `uuid.NewUUID()`).
pub fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let x = nanos ^ (N.fetch_add(1, Ordering::Relaxed) << 48);
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        (x >> 32) as u32,
        (x >> 16) as u16,
        (x & 0xfff) as u16,
        ((x >> 12) & 0xfff) as u16,
        x & 0xffff_ffff_ffff
    )
}
