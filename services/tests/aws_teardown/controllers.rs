//! Phase 2 beyond the cluster tag: what the AWS Load Balancer Controller, Karpenter and the VPC
//! CNI leave behind (docs/capa.md, "The three phases": who tags what), each beside the twin it
//! must not touch.

use crate::fixtures::*;
use sweeper_aws::phases::{AwsClients, GcTask, PassRequest, teardown_pass};
use sweeper_aws::sdk::ec2::types::{
    RequestLaunchTemplateData, ResourceType, Tag, TagSpecification,
};
use sweeper_aws::sdk::elbv2::types::LoadBalancerTypeEnum;

fn lbc(n: &str) -> Vec<(String, String)> {
    vec![
        ("elbv2.k8s.aws/cluster".into(), n.into()),
        ("ingress.k8s.aws/stack".into(), "default/web".into()),
    ]
}

/// The LB controller's load balancer, target group and backend group in `vpc`.
async fn lbc_set(c: &AwsClients, n: &str, vpc: &str, subnets: &[String], tag: &str) -> [String; 3] {
    let lb = v2_lb(
        c,
        &format!("k8s-{tag}"),
        LoadBalancerTypeEnum::Application,
        subnets,
        &lbc(n),
    )
    .await;
    let tg = crate::fixtures::tg(c, &format!("k8s-{tag}-tg"), vpc, &lbc(n)).await;
    listener(c, &lb, &tg).await;
    let mut sg_tags = lbc(n);
    sg_tags.push(("elbv2.k8s.aws/resource".into(), "backend-sg".into()));
    let sg = sg(c, vpc, &format!("k8s-traffic-{tag}"), &sg_tags).await;
    [lb, tg, sg]
}

async fn check_lbc(alternative: bool) {
    let (c, _rec) = env().await;
    let n = cluster(if alternative { "lbcalt" } else { "lbc" });
    let short = &n[n.len() - 6..];
    let (v, subnets) = byo_network(&c).await;
    let (elsewhere, other_subnets) = byo_network(&c).await;
    let mine = lbc_set(&c, &n, &v, &subnets, &format!("{short}a")).await;
    // A cluster of the same name in another VPC: tagged alike, not ours.
    let twin = lbc_set(&c, &n, &elsewhere, &other_subnets, &format!("{short}b")).await;
    let req = PassRequest {
        alternative_discovery: alternative,
        vpc_ids: vec![v.clone()],
        ..PassRequest::new(&n)
    };
    until_done(&c, &req, 20).await;
    assert!(!v2_exists(&c, &mine[0]).await, "the cluster's ALB");
    assert!(!tg_exists(&c, &mine[1]).await, "the cluster's target group");
    assert!(
        !sg_exists(&c, &mine[2]).await,
        "the cluster's backend group"
    );
    assert!(v2_exists(&c, &twin[0]).await, "the twin's ALB is kept");
    assert!(
        tg_exists(&c, &twin[1]).await,
        "the twin's target group is kept"
    );
    assert!(sg_exists(&c, &twin[2]).await, "the twin's group is kept");

    // Without a known VPC, nothing found by the controller's tag is touched.
    let unknown = PassRequest {
        alternative_discovery: alternative,
        ..PassRequest::new(&n)
    };
    until_done(&c, &unknown, 5).await;
    assert!(v2_exists(&c, &twin[0]).await);
    assert!(sg_exists(&c, &twin[2]).await);
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn lb_controller_resources_go_only_in_the_clusters_vpc() {
    check_lbc(false).await;
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn lb_controller_resources_go_only_in_the_clusters_vpc_with_describe_discovery() {
    check_lbc(true).await;
}

/// The controller-tag queries ask the tagging API for the kinds phase 2 takes from them only; the
/// service must honour the filter (or they would silently find nothing, or everything).
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn a_controller_tag_query_reads_only_the_kinds_phase_2_takes() {
    use sweeper_aws::locate::tagging::{resources_of_types_with_tag, resources_with_tag};
    use sweeper_aws::locate::tags::{CONTROLLER_TAGGED_TYPES, LBC_CLUSTER_TAG};
    let (c, _rec) = env().await;
    let n = cluster("lbctypes");
    let short = &n[n.len() - 6..];
    let (v, subnets) = byo_network(&c).await;
    let set = lbc_set(&c, &n, &v, &subnets, short).await;
    // A kind no cleaner takes from a controller tag.
    tag(&c, &subnets[0], LBC_CLUSTER_TAG, &n).await;
    let ids = |found: sweeper_aws::locate::tagging::TaggedResources| {
        let mut ids: Vec<String> = found.resources.iter().map(|r| r.arn.to_string()).collect();
        ids.sort();
        ids
    };
    let all = ids(resources_with_tag(&c.tagging, LBC_CLUSTER_TAG, &[&n], None)
        .await
        .unwrap());
    let scoped = ids(resources_of_types_with_tag(
        &c.tagging,
        CONTROLLER_TAGGED_TYPES,
        LBC_CLUSTER_TAG,
        &[&n],
        None,
    )
    .await
    .unwrap());
    assert!(
        all.iter()
            .any(|a| a.ends_with(&format!("subnet/{}", subnets[0]))),
        "unscoped, the subnet shows: {all:?}"
    );
    assert_eq!(
        scoped.len(),
        3,
        "the ALB, target group and group: {scoped:?}"
    );
    assert!(scoped.iter().any(|a| *a == set[0]), "the ALB: {scoped:?}");
    assert!(
        scoped.iter().any(|a| *a == set[1]),
        "the target group: {scoped:?}"
    );
    assert!(
        scoped
            .iter()
            .any(|a| a.ends_with(&format!("security-group/{}", set[2]))),
        "the group: {scoped:?}"
    );
}

async fn launch_template(c: &AwsClients, name: &str, tags: &[(String, String)]) -> String {
    let mut spec = TagSpecification::builder().resource_type(ResourceType::LaunchTemplate);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(k).value(v).build());
    }
    c.ec2
        .create_launch_template()
        .launch_template_name(name)
        .launch_template_data(
            RequestLaunchTemplateData::builder()
                .image_id("ami-12345678")
                .build(),
        )
        .tag_specifications(spec.build())
        .send()
        .await
        .unwrap()
        .launch_template()
        .unwrap()
        .launch_template_id()
        .unwrap()
        .to_string()
}

async fn template_exists(c: &AwsClients, id: &str) -> bool {
    c.ec2
        .describe_launch_templates()
        .launch_template_ids(id)
        .send()
        .await
        .is_ok_and(|o| !o.launch_templates().is_empty())
}

/// A Karpenter node: its instance is terminated (and waited for) before its security group is
/// deleted, and its launch template goes; CAPA's instance and another cluster's node stay out of
/// phase 2. With only the `instance` task, the template is kept.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn karpenter_nodes_are_terminated_before_their_group_and_templates_go() {
    let (c, rec) = env().await;
    let n = cluster("karp");
    let (v, subnets) = byo_network(&c).await;
    let mut node_tags = vec![cloud(&n, "owned")];
    node_tags.push(("karpenter.sh/nodepool".into(), "default".into()));
    let node_sg = sg(&c, &v, &format!("{n}-nodes"), &[cloud(&n, "owned")]).await;
    let node = fallible::instance(&c, &subnets[0], &[&node_sg], None, &node_tags)
        .await
        .unwrap();
    let lt = launch_template(&c, &format!("karpenter.k8s.aws/{n}"), &node_tags).await;
    let other = format!("{n}-b");
    let other_node = instance(&c, &subnets[0], &[cloud(&other, "owned")]).await;
    let other_lt = launch_template(
        &c,
        &format!("karpenter.k8s.aws/{other}"),
        &[cloud(&other, "owned")],
    )
    .await;

    // Only the `instance` task: the node goes, the template stays.
    let only_instances = PassRequest {
        tasks: Some(vec!["instance".parse::<GcTask>().unwrap()]),
        ..PassRequest::new(&n)
    };
    until_done(&c, &only_instances, 20).await;
    assert_eq!(instance_state(&c, &node).await, "terminated");
    assert!(template_exists(&c, &lt).await, "not selected: kept");
    assert!(sg_exists(&c, &node_sg).await, "not selected: kept");

    rec.clear();
    let node2 = fallible::instance(&c, &subnets[0], &[&node_sg], None, &node_tags)
        .await
        .unwrap();
    until_done(&c, &PassRequest::new(&n), 20).await;
    assert_eq!(instance_state(&c, &node2).await, "terminated");
    assert!(!template_exists(&c, &lt).await, "the cluster's template");
    assert!(!sg_exists(&c, &node_sg).await);
    let calls = rec.calls();
    assert!(
        first(&calls, "EC2.TerminateInstances") < first(&calls, "EC2.DeleteSecurityGroup"),
        "{calls:?}"
    );
    assert_ne!(
        instance_state(&c, &other_node).await,
        "terminated",
        "another cluster's node"
    );
    assert!(
        template_exists(&c, &other_lt).await,
        "another cluster's template"
    );
}

/// The VPC CNI's leftover interfaces (tagged with the cluster's name, `available`) in the
/// cluster's VPC are deleted; the same tag in another VPC is another cluster's.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn vpc_cni_interfaces_in_the_clusters_vpc_are_deleted() {
    let (c, _rec) = env().await;
    let n = cluster("cni");
    let (v, subnets) = byo_network(&c).await;
    let (elsewhere, other_subnets) = byo_network(&c).await;
    let g = sg(&c, &v, &format!("{n}-pods"), &[]).await;
    let other_g = sg(&c, &elsewhere, &format!("{n}-pods"), &[]).await;
    let mine = eni(&c, &subnets[0], &g).await;
    let twin = eni(&c, &other_subnets[0], &other_g).await;
    for id in [&mine, &twin] {
        tag(&c, id, "cluster.k8s.amazonaws.com/name", &n).await;
        tag(&c, id, "eks:eni:owner", "amazon-vpc-cni").await;
    }
    for alternative in [false, true] {
        let req = PassRequest {
            alternative_discovery: alternative,
            vpc_ids: vec![v.clone()],
            ..PassRequest::new(&n)
        };
        until_done(&c, &req, 20).await;
        assert!(!eni_exists(&c, &mine).await, "alternative={alternative}");
        assert!(eni_exists(&c, &twin).await, "alternative={alternative}");
    }
    assert!(
        sg_exists(&c, &g).await,
        "an untagged group is not the cluster's"
    );
}

async fn snapshots_of(c: &AwsClients, volume: &str) -> Vec<String> {
    c.ec2
        .describe_snapshots()
        .owner_ids("self")
        .filters(
            sweeper_aws::sdk::ec2::types::Filter::builder()
                .name("tag:sweeper.dev/source-volume")
                .values(volume)
                .build(),
        )
        .send()
        .await
        .unwrap()
        .snapshots()
        .iter()
        .filter_map(|s| s.snapshot_id().map(str::to_string))
        .collect()
}

/// The tags the EBS CSI driver puts on a volume it made for cluster `n` (`--k8s-tag-cluster-id`).
fn csi_volume(n: &str) -> Vec<(String, String)> {
    sweeper_aws::testing::leaks::csi_volume_tags(n, &format!("pvc-{n}"))
}

/// EBS volumes are opt-in: kept without the `ebs-volume` task; with it, snapshotted (the id in
/// the report's notes) and then deleted, or deleted outright with snapshots off. An `in-use`
/// volume, another cluster's, and an owned volume the CSI driver did not make are never touched.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn ebs_volumes_only_with_their_task_snapshot_first_and_never_in_use() {
    let (c, _rec) = env().await;
    let n = cluster("ebs");
    let (_v, subnets) = byo_network(&c).await;
    let owned = volume(&c, &csi_volume(&n)).await;
    let csi = volume(
        &c,
        &[
            ("ebs.csi.aws.com/cluster-name".into(), n.clone()),
            ("CSIVolumeName".into(), "pvc-x".into()),
        ],
    )
    .await;
    let in_use = volume(&c, &csi_volume(&n)).await;
    let not_csi = volume(&c, &[cloud(&n, "owned")]).await;
    let node = instance(&c, &subnets[0], &[]).await;
    c.ec2
        .attach_volume()
        .volume_id(&in_use)
        .instance_id(&node)
        .device("/dev/sdf")
        .send()
        .await
        .unwrap();
    let other = volume(&c, &csi_volume(&format!("{n}-b"))).await;

    until_done(&c, &PassRequest::new(&n), 10).await;
    for v in [&owned, &csi, &in_use, &other] {
        assert!(
            volume_exists(&c, v).await,
            "no task, no volume deleted: {v}"
        );
    }

    let with_task = PassRequest {
        tasks: Some(vec!["ebs-volume".parse::<GcTask>().unwrap()]),
        ..PassRequest::new(&n)
    };
    let reports = until_done(&c, &with_task, 10).await;
    assert!(!volume_exists(&c, &owned).await);
    assert!(!volume_exists(&c, &csi).await);
    assert!(volume_exists(&c, &in_use).await, "in use: never touched");
    assert!(volume_exists(&c, &other).await, "another cluster's");
    assert!(
        volume_exists(&c, &not_csi).await,
        "owned, but not marked by the CSI driver: whose data it holds is unknown"
    );
    let notes: Vec<&String> = reports
        .iter()
        .flat_map(|r| r.phases.iter().flat_map(|p| &p.notes))
        .collect();
    for v in [&owned, &csi] {
        let snaps = snapshots_of(&c, v).await;
        assert_eq!(snaps.len(), 1, "one snapshot of {v}: {snaps:?}");
        assert!(
            notes
                .iter()
                .any(|n| n.contains(v.as_str()) && n.contains(&snaps[0])),
            "the snapshot id is reported: {notes:?}"
        );
    }

    let bare = volume(&c, &csi_volume(&n)).await;
    let no_snapshot = PassRequest {
        ebs_snapshot: false,
        ..with_task
    };
    until_done(&c, &no_snapshot, 10).await;
    assert!(!volume_exists(&c, &bare).await);
    assert!(snapshots_of(&c, &bare).await.is_empty(), "snapshots off");
}

/// EBS snapshots are an opt-in of their own (`ebs-snapshot`): the CSI driver's snapshots of the
/// cluster (`kubernetes.io/cluster/<n>=owned` and `CSIVolumeSnapshotName`) go with the task and
/// only with it; a look-alike without the driver's mark, another cluster's, and the snapshot
/// sweeper takes of a volume before deleting it stay.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn ebs_snapshots_only_with_their_own_task_and_only_the_csi_drivers() {
    let (c, _rec) = env().await;
    let n = cluster("snap");
    let source = volume(&c, &[("Name".into(), format!("{n}-source"))]).await;
    let snapshot = |tags: Vec<(String, String)>| {
        let (c, source) = (&c, &source);
        async move {
            let mut spec = sweeper_aws::sdk::ec2::types::TagSpecification::builder()
                .resource_type(sweeper_aws::sdk::ec2::types::ResourceType::Snapshot);
            for (k, v) in tags {
                spec = spec.tags(
                    sweeper_aws::sdk::ec2::types::Tag::builder()
                        .key(k)
                        .value(v)
                        .build(),
                );
            }
            c.ec2
                .create_snapshot()
                .volume_id(source)
                .tag_specifications(spec.build())
                .send()
                .await
                .unwrap()
                .snapshot_id()
                .unwrap()
                .to_string()
        }
    };
    let csi_tags = |cluster: &str| {
        vec![
            cloud(cluster, "owned"),
            (
                "CSIVolumeSnapshotName".into(),
                format!("snapshot-{cluster}"),
            ),
        ]
    };
    let ours = snapshot(csi_tags(&n)).await;
    let unmarked = snapshot(vec![cloud(&n, "owned")]).await;
    let other = snapshot(csi_tags(&format!("{n}-b"))).await;
    let vol = volume(&c, &csi_volume(&n)).await;

    until_done(&c, &PassRequest::new(&n), 10).await;
    let exists = |id: String| {
        let c = &c;
        async move {
            !c.ec2
                .describe_snapshots()
                .filters(
                    sweeper_aws::sdk::ec2::types::Filter::builder()
                        .name("snapshot-id")
                        .values(id)
                        .build(),
                )
                .send()
                .await
                .unwrap()
                .snapshots()
                .is_empty()
        }
    };
    assert!(exists(ours.clone()).await, "no task: kept");

    let volumes_only = PassRequest {
        tasks: Some(vec!["ebs-volume".parse::<GcTask>().unwrap()]),
        ..PassRequest::new(&n)
    };
    until_done(&c, &volumes_only, 10).await;
    assert!(!volume_exists(&c, &vol).await);
    assert!(
        exists(ours.clone()).await,
        "the volume task leaves snapshots"
    );
    let taken = snapshots_of(&c, &vol).await;
    assert_eq!(taken.len(), 1, "sweeper snapshotted the volume first");

    let with_task = PassRequest {
        tasks: Some(vec!["ebs-snapshot".parse::<GcTask>().unwrap()]),
        ..PassRequest::new(&n)
    };
    until_done(&c, &with_task, 10).await;
    assert!(!exists(ours).await, "the cluster's CSI snapshot goes");
    assert!(
        exists(unmarked).await,
        "without CSIVolumeSnapshotName: kept"
    );
    assert!(exists(other).await, "another cluster's: kept");
    assert!(
        exists(taken[0].clone()).await,
        "the backup sweeper took of a deleted volume is not the driver's: kept"
    );
}

/// A Karpenter-style instance profile `name` at `path` with `tags`, holding `role`; its ARN.
async fn instance_profile(
    c: &AwsClients,
    name: &str,
    path: &str,
    tags: &[(&str, &str)],
    role: &str,
) -> String {
    let mut req = c
        .iam
        .create_instance_profile()
        .instance_profile_name(name)
        .path(path);
    for (k, v) in tags {
        req = req.tags(
            sweeper_aws::sdk::iam::types::Tag::builder()
                .key(*k)
                .value(*v)
                .build()
                .unwrap(),
        );
    }
    let arn = req
        .send()
        .await
        .unwrap()
        .instance_profile
        .unwrap()
        .arn()
        .to_string();
    c.iam
        .add_role_to_instance_profile()
        .instance_profile_name(name)
        .role_name(role)
        .send()
        .await
        .unwrap();
    arn
}

async fn profile_exists(c: &AwsClients, name: &str) -> bool {
    match c
        .iam
        .get_instance_profile()
        .instance_profile_name(name)
        .send()
        .await
    {
        Ok(_) => true,
        Err(e) => {
            let text = format!("{e:?}");
            assert!(
                text.contains("NoSuchEntity") || text.contains("NotFound"),
                "{text}"
            );
            false
        }
    }
}

/// Karpenter's instance profiles of the cluster (name `<n>_<hash>`, the cluster, EC2NodeClass and
/// region tags, the cluster's path or `/`) go, their role removed first and kept; the look-alikes
/// stay: the same cluster name's profile in another region, one without the region tag, another
/// cluster's. A profile a live instance runs with waits until the instance is gone.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn karpenters_instance_profiles_go_and_their_look_alikes_stay() {
    let (c, rec) = env().await;
    let n = cluster("kip");
    let region = c.ec2.config().region().unwrap().to_string();
    let role = format!("{n}-node-role");
    c.iam
        .create_role()
        .role_name(&role)
        .assume_role_policy_document(
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#,
        )
        .send()
        .await
        .unwrap();
    let owned = format!("kubernetes.io/cluster/{n}");
    let class = ("karpenter.k8s.aws/ec2nodeclass", "default");
    let here = ("topology.kubernetes.io/region", region.as_str());
    let ours_tags = [(owned.as_str(), "owned"), class, here];
    let path = format!("/karpenter/{region}/{n}/uid-1/");
    instance_profile(&c, &format!("{n}_1001"), &path, &ours_tags, &role).await;
    instance_profile(&c, &format!("{n}_1002"), "/", &ours_tags, &role).await;
    let elsewhere = [
        (owned.as_str(), "owned"),
        class,
        ("topology.kubernetes.io/region", "eu-west-1"),
    ];
    instance_profile(
        &c,
        &format!("{n}_2001"),
        &format!("/karpenter/eu-west-1/{n}/uid-2/"),
        &elsewhere,
        &role,
    )
    .await;
    instance_profile(
        &c,
        &format!("{n}_2002"),
        "/",
        &[(owned.as_str(), "owned"), class],
        &role,
    )
    .await;
    let other_owned = format!("kubernetes.io/cluster/{n}-b");
    instance_profile(
        &c,
        &format!("{n}-b_2003"),
        "/",
        &[(other_owned.as_str(), "owned"), class, here],
        &role,
    )
    .await;
    let busy_arn = instance_profile(&c, &format!("{n}_1003"), "/", &ours_tags, &role).await;
    let (_v, subnets) = byo_network(&c).await;
    let node = c
        .ec2
        .run_instances()
        .image_id("ami-12345678")
        .min_count(1)
        .max_count(1)
        .subnet_id(&subnets[0])
        .iam_instance_profile(
            sweeper_aws::sdk::ec2::types::IamInstanceProfileSpecification::builder()
                .arn(&busy_arn)
                .build(),
        )
        .send()
        .await
        .unwrap()
        .instances()[0]
        .instance_id()
        .unwrap()
        .to_string();

    let req = PassRequest {
        tasks: Some(vec!["instance-profile".parse::<GcTask>().unwrap()]),
        ..PassRequest::new(&n)
    };
    let mut last = None;
    for _ in 0..3 {
        last = Some(teardown_pass(&c, &req).await);
    }
    let report = last.unwrap();
    assert!(
        !report.done,
        "the busy profile holds the teardown: {report:#?}"
    );
    assert!(
        !profile_exists(&c, &format!("{n}_1001")).await,
        "the cluster's path"
    );
    assert!(
        !profile_exists(&c, &format!("{n}_1002")).await,
        "Karpenter's older path /"
    );
    assert!(
        profile_exists(&c, &format!("{n}_1003")).await,
        "a live instance still runs with it"
    );
    for kept in [
        format!("{n}_2001"),
        format!("{n}_2002"),
        format!("{n}-b_2003"),
    ] {
        assert!(profile_exists(&c, &kept).await, "{kept} is a look-alike");
    }
    let calls = rec.calls();
    assert!(
        first(&calls, "IAM.RemoveRoleFromInstanceProfile")
            < first(&calls, "IAM.DeleteInstanceProfile"),
        "the role leaves the profile first: {calls:?}"
    );

    c.ec2
        .terminate_instances()
        .instance_ids(&node)
        .send()
        .await
        .unwrap();
    until_done(&c, &req, 10).await;
    assert!(
        !profile_exists(&c, &format!("{n}_1003")).await,
        "free once its node is gone"
    );
    // Read on other clients: the recorded ones are checked against sweeper's policy.
    let reader = retrying_clients().await;
    assert!(
        reader.iam.get_role().role_name(&role).send().await.is_ok(),
        "the role is the user's: never deleted"
    );
}
