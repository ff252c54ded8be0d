//! The scan's exact AWS calls, on mocked clients: pages per (account, region), never a call per
//! cluster, and no describe of a live cluster's resources.

use super::*;
use crate::mocked::{self, assert_calls, code, filter_is, mock};
use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
use aws_sdk_ec2::operation::describe_nat_gateways::DescribeNatGatewaysOutput;
use aws_sdk_ec2::operation::describe_volumes::DescribeVolumesOutput;
use aws_sdk_ec2::types::{
    Instance, InstanceState, InstanceStateName, NatGateway, NatGatewayState, Reservation, Volume,
    VolumeType,
};
use aws_sdk_eks::operation::list_clusters::{ListClustersError, ListClustersOutput};
use aws_sdk_resourcegroupstagging::Client as Tagging;
use aws_sdk_resourcegroupstagging::operation::get_resources::GetResourcesOutput;
use aws_sdk_resourcegroupstagging::types::{ResourceTagMapping, Tag};

const ACCOUNT: &str = "111111111111";

fn mapping(resource: &str, tags: &[(&str, &str)]) -> ResourceTagMapping {
    let mut m = ResourceTagMapping::builder()
        .resource_arn(format!("arn:aws:ec2:us-east-1:{ACCOUNT}:{resource}"));
    for (k, v) in tags {
        m = m.tags(Tag::builder().key(*k).value(*v).build().unwrap());
    }
    m.build()
}

fn input(live: &[&str]) -> ScanInput {
    ScanInput {
        live: live.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn one_listing_per_region_one_eks_listing_and_describes_for_candidates_only() {
    // No tag filter: the ownership keys carry the cluster name, which the API cannot match.
    let first = mock!(Tagging::get_resources)
        .match_requests(|r| {
            r.tag_filters().is_empty()
                && r.resource_type_filters().is_empty()
                && r.resources_per_page() == Some(100)
                && r.pagination_token().is_none()
        })
        .then_output(|| {
            GetResourcesOutput::builder()
                .resource_tag_mapping_list(mapping(
                    "natgateway/nat-1",
                    &[("sigs.k8s.io/cluster-api-provider-aws/cluster/dead", "owned")],
                ))
                .resource_tag_mapping_list(mapping(
                    "volume/vol-dead",
                    &[("kubernetes.io/cluster/dead", "owned")],
                ))
                .resource_tag_mapping_list(mapping(
                    "volume/vol-live",
                    &[("kubernetes.io/cluster/live", "owned")],
                ))
                .pagination_token("p2")
                .build()
        });
    let second = mock!(Tagging::get_resources)
        .match_requests(|r| r.pagination_token() == Some("p2"))
        .then_output(|| {
            GetResourcesOutput::builder()
                .resource_tag_mapping_list(mapping(
                    "security-group/sg-eks",
                    &[("kubernetes.io/cluster/eks-live", "owned")],
                ))
                .resource_tag_mapping_list(mapping(
                    "security-group/sg-shared",
                    &[("kubernetes.io/cluster/dead-too", "shared")],
                ))
                .resource_tag_mapping_list(mapping("elastic-ip/eipalloc-1", &[("Name", "x")]))
                .pagination_token("")
                .build()
        });
    let eks = mock!(aws_sdk_eks::Client::list_clusters)
        .then_output(|| ListClustersOutput::builder().clusters("eks-live").build());
    // Only the candidate's volume is described; the live cluster's never is.
    let volumes = mock!(aws_sdk_ec2::Client::describe_volumes)
        .match_requests(|r| filter_is(r.filters(), "volume-id", &["vol-dead"]))
        .then_output(|| {
            DescribeVolumesOutput::builder()
                .volumes(
                    Volume::builder()
                        .volume_id("vol-dead")
                        .size(100)
                        .volume_type(VolumeType::Gp3)
                        .create_time(aws_smithy_types::DateTime::from_secs(1_600_000_000))
                        .build(),
                )
                .build()
        });
    let nats = mock!(aws_sdk_ec2::Client::describe_nat_gateways)
        .match_requests(|r| filter_is(r.filter(), "nat-gateway-id", &["nat-1"]))
        .then_output(|| {
            DescribeNatGatewaysOutput::builder()
                .nat_gateways(
                    NatGateway::builder()
                        .nat_gateway_id("nat-1")
                        .state(NatGatewayState::Available)
                        .build(),
                )
                .build()
        });
    let c = mocked::in_order(&[&first, &second, &eks, &volumes, &nats]);
    let scan = scan_region(&c, ACCOUNT, "us-east-1", &input(&["live"]))
        .await
        .unwrap();
    assert_calls(&volumes, 1, "DescribeVolumes");
    assert_eq!(
        scan.calls,
        BTreeMap::from([
            ("ec2.DescribeNatGateways", 1),
            ("ec2.DescribeVolumes", 1),
            ("eks.ListClusters", 1),
            ("tagging.GetResources", 2)
        ])
    );
    assert_eq!(scan.candidates.len(), 1, "{:?}", scan.candidates);
    let dead = &scan.candidates[0];
    assert_eq!(dead.cluster, "dead");
    assert_eq!(
        dead.resources_by_kind,
        BTreeMap::from([
            ("ec2:natgateway".to_string(), 1),
            ("ec2:volume".to_string(), 1)
        ])
    );
    // 0.045 × 730 + 100 GiB × 0.08
    assert!(
        (dead.cost.dollars_per_month - 40.85).abs() < 1e-9,
        "{:?}",
        dead.cost
    );
    assert_eq!(dead.cost.unknown, 0);
    assert_eq!(dead.oldest.as_deref(), Some("2020-09-13T12:26:40Z"));
    assert_eq!(
        dead.resources[0].proofs[0].tag,
        "sigs.k8s.io/cluster-api-provider-aws/cluster/dead=owned"
    );
    let held: Vec<(&str, &HeldBack)> = scan
        .held
        .iter()
        .map(|h| (h.cluster.as_str(), &h.why))
        .collect();
    assert_eq!(
        held,
        [
            ("eks-live", &HeldBack::LiveEks),
            ("live", &HeldBack::LiveObject)
        ]
    );
}

#[tokio::test]
async fn calls_do_not_grow_with_the_clusters() {
    // 300 names, live and dead, on one page: one listing, one EKS listing, nothing per name.
    let page = mock!(Tagging::get_resources).then_output(|| {
        let mut out = GetResourcesOutput::builder();
        for i in 0..300 {
            out = out.resource_tag_mapping_list(mapping(
                &format!("security-group/sg-{i}"),
                &[(&format!("kubernetes.io/cluster/c{i}"), "owned")],
            ));
        }
        out.build()
    });
    let eks = mock!(aws_sdk_eks::Client::list_clusters)
        .then_output(|| ListClustersOutput::builder().build());
    let c = mocked::in_order(&[&page, &eks]);
    let live: Vec<String> = (0..150).map(|i| format!("c{i}")).collect();
    let live: Vec<&str> = live.iter().map(String::as_str).collect();
    let scan = scan_region(&c, ACCOUNT, "us-east-1", &input(&live))
        .await
        .unwrap();
    assert_eq!(scan.candidates.len(), 150);
    assert_eq!(scan.held.len(), 150);
    assert_eq!(
        scan.calls.values().sum::<usize>(),
        2,
        "no call per cluster: {:?}",
        scan.calls
    );
    assert_eq!(scan.candidates[0].cost.describe(), "$0.00/month");
}

#[tokio::test]
async fn without_eks_listing_no_name_is_a_candidate() {
    let page = mock!(Tagging::get_resources).then_output(|| {
        GetResourcesOutput::builder()
            .resource_tag_mapping_list(mapping(
                "security-group/sg-1",
                &[("kubernetes.io/cluster/maybe-eks", "owned")],
            ))
            .build()
    });
    let denied = mock!(aws_sdk_eks::Client::list_clusters)
        .then_error(|| ListClustersError::generic(code("AccessDeniedException")));
    let c = mocked::in_order(&[&page, &denied]);
    let err = scan_region(&c, ACCOUNT, "us-east-1", &input(&[]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("eks:ListClusters"), "{err}");
}

#[tokio::test]
async fn nothing_claimed_asks_nothing_more() {
    let page = mock!(Tagging::get_resources).then_output(|| {
        GetResourcesOutput::builder()
            .resource_tag_mapping_list(mapping("security-group/sg-1", &[("team", "a")]))
            .resource_tag_mapping_list(
                ResourceTagMapping::builder()
                    .resource_arn("not-an-arn")
                    .tags(
                        Tag::builder()
                            .key("kubernetes.io/cluster/x")
                            .value("owned")
                            .build()
                            .unwrap(),
                    )
                    .build(),
            )
            .build()
    });
    let c = mocked::in_order(&[&page]);
    let scan = scan_region(&c, ACCOUNT, "us-east-1", &input(&[]))
        .await
        .unwrap();
    assert!(scan.candidates.is_empty());
    assert_eq!(
        scan.malformed.len(),
        1,
        "a bad ARN is reported, never a candidate"
    );
}

#[tokio::test]
async fn what_ec2_still_lists_after_a_teardown_is_no_orphan() {
    // A cluster just torn down: its terminated instance and deleted NAT gateway are listed,
    // tags and all, for about an hour. Beside it, a dead cluster whose instance still runs.
    let page = mock!(Tagging::get_resources).then_output(|| {
        GetResourcesOutput::builder()
            .resource_tag_mapping_list(mapping(
                "instance/i-gone",
                &[("sigs.k8s.io/cluster-api-provider-aws/cluster/torn", "owned")],
            ))
            .resource_tag_mapping_list(mapping(
                "natgateway/nat-gone",
                &[("sigs.k8s.io/cluster-api-provider-aws/cluster/torn", "owned")],
            ))
            .resource_tag_mapping_list(mapping(
                "instance/i-up",
                &[("sigs.k8s.io/cluster-api-provider-aws/cluster/dead", "owned")],
            ))
            .build()
    });
    let eks = mock!(aws_sdk_eks::Client::list_clusters)
        .then_output(|| ListClustersOutput::builder().build());
    let instances = mock!(aws_sdk_ec2::Client::describe_instances)
        .match_requests(|r| filter_is(r.filters(), "instance-id", &["i-gone", "i-up"]))
        .then_output(|| {
            let i = |id: &str, state: InstanceStateName| {
                Instance::builder()
                    .instance_id(id)
                    .state(InstanceState::builder().name(state).build())
                    .build()
            };
            DescribeInstancesOutput::builder()
                .reservations(
                    Reservation::builder()
                        .instances(i("i-gone", InstanceStateName::Terminated))
                        .instances(i("i-up", InstanceStateName::Running))
                        .build(),
                )
                .build()
        });
    let nats = mock!(aws_sdk_ec2::Client::describe_nat_gateways)
        .match_requests(|r| filter_is(r.filter(), "nat-gateway-id", &["nat-gone"]))
        .then_output(|| {
            DescribeNatGatewaysOutput::builder()
                .nat_gateways(
                    NatGateway::builder()
                        .nat_gateway_id("nat-gone")
                        .state(NatGatewayState::Deleted)
                        .build(),
                )
                .build()
        });
    let c = mocked::in_order(&[&page, &eks, &instances, &nats]);
    let scan = scan_region(&c, ACCOUNT, "us-east-1", &input(&[]))
        .await
        .unwrap();
    let names: Vec<&str> = scan.candidates.iter().map(|c| c.cluster.as_str()).collect();
    assert_eq!(names, ["dead"], "{:?}", scan.candidates);
    assert_eq!(scan.candidates[0].resources.len(), 1);
    assert_eq!(scan.calls.get("ec2.DescribeInstances"), Some(&1));
    assert_eq!(scan.calls.get("ec2.DescribeNatGateways"), Some(&1));
}
