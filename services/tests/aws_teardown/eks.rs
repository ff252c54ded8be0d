//! What an EKS cluster leaves behind (issue #34): the IRSA OIDC provider, each beside the
//! look-alikes it must not touch. LocalStack serves IAM; it does not serve EKS, so EKS's answers
//! come from an aws-smithy-mocks client put in place of the recorded one.

use crate::fixtures::*;
use aws_smithy_mocks::{MockResponse, RuleMode, mock, mock_client};
use aws_smithy_types::error::ErrorMetadata;
use sweeper_aws::phases::{AwsClients, EksFacts, GcTask, PassRequest};
use sweeper_aws::sdk::eks::operation::describe_cluster::{
    DescribeClusterError, DescribeClusterOutput,
};
use sweeper_aws::sdk::eks::operation::list_clusters::ListClustersOutput;
use sweeper_aws::sdk::eks::types::{Cluster, ClusterStatus, Identity, Oidc};

/// An EKS where exactly `live` (name, issuer URL) exist.
pub fn eks(live: Vec<(String, String)>) -> sweeper_aws::sdk::eks::Client {
    let names: Vec<String> = live.iter().map(|(n, _)| n.clone()).collect();
    let list = mock!(aws_sdk_eks::Client::list_clusters).then_output(move || {
        ListClustersOutput::builder()
            .set_clusters(Some(names.clone()))
            .build()
    });
    let describe = mock!(aws_sdk_eks::Client::describe_cluster).then_compute_response(move |req| {
        match live.iter().find(|(n, _)| Some(n.as_str()) == req.name()) {
            Some((n, issuer)) => MockResponse::Output(
                DescribeClusterOutput::builder()
                    .cluster(
                        Cluster::builder()
                            .name(n)
                            .status(ClusterStatus::Active)
                            .identity(
                                Identity::builder()
                                    .oidc(Oidc::builder().issuer(issuer).build())
                                    .build(),
                            )
                            .build(),
                    )
                    .build(),
            ),
            None => MockResponse::Error(DescribeClusterError::ResourceNotFoundException(
                aws_sdk_eks::types::error::ResourceNotFoundException::builder()
                    .message("No cluster found")
                    .meta(
                        ErrorMetadata::builder()
                            .code("ResourceNotFoundException")
                            .build(),
                    )
                    .build(),
            )),
        }
    });
    mock_client!(aws_sdk_eks, RuleMode::MatchAny, [&list, &describe])
}

/// An OIDC provider for `url` tagged `tags`; its ARN.
async fn oidc_provider(c: &AwsClients, url: &str, tags: &[(&str, &str)]) -> String {
    let mut req = c
        .iam
        .create_open_id_connect_provider()
        .url(url)
        .client_id_list("sts.amazonaws.com")
        .thumbprint_list("9e99a48a9960b14926bb7f3b02e22da2b0ab7280");
    for (k, v) in tags {
        req = req.tags(
            sweeper_aws::sdk::iam::types::Tag::builder()
                .key(*k)
                .value(*v)
                .build()
                .unwrap(),
        );
    }
    req.send()
        .await
        .unwrap()
        .open_id_connect_provider_arn()
        .unwrap()
        .to_string()
}

async fn provider_exists(c: &AwsClients, arn: &str) -> bool {
    match c
        .iam
        .get_open_id_connect_provider()
        .open_id_connect_provider_arn(arn)
        .send()
        .await
    {
        Ok(_) => true,
        Err(e) => {
            let text = format!("{e:?}");
            assert!(text.contains("NoSuchEntity"), "{text}");
            false
        }
    }
}

/// The provider whose URL is the issuer CAPA recorded and that carries the EKS cluster's owned
/// tag goes once EKS reports no live cluster with that issuer. Its look-alikes stay: a provider
/// of another issuer with the same tag, the recorded issuer's provider without the tag (someone
/// else's), and the provider of an issuer a live cluster still reports.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn the_irsa_provider_goes_and_its_look_alikes_stay() {
    let (mut c, _rec) = env().await;
    let n = cluster("oidc");
    let region = c.ec2.config().region().unwrap().to_string();
    let issuer = |id: &str| format!("https://oidc.eks.{region}.amazonaws.com/id/{n}{id}");
    let owned = format!("kubernetes.io/cluster/{n}");
    let ours = oidc_provider(&c, &issuer("A"), &[(owned.as_str(), "owned")]).await;
    let other_issuer = oidc_provider(&c, &issuer("B"), &[(owned.as_str(), "owned")]).await;
    let untagged = oidc_provider(&c, &issuer("C"), &[("team", "x")]).await;
    let in_use = oidc_provider(&c, &issuer("D"), &[(owned.as_str(), "owned")]).await;
    c.eks = eks(vec![(format!("{n}-live"), issuer("D"))]);
    let only = |recorded: &str| PassRequest {
        tasks: Some(vec!["oidc-provider".parse::<GcTask>().unwrap()]),
        ..PassRequest::new(&n).with_eks(EksFacts {
            oidc_issuer: Some(recorded.trim_start_matches("https://").to_string()),
        })
    };

    let reports = until_done(&c, &only(&issuer("A")), 5).await;
    assert!(
        reports.iter().flat_map(|r| &r.phases).any(|p| p
            .deleted
            .iter()
            .any(|d| d.id == ours && d.kind == "oidc-provider")),
        "{reports:#?}"
    );
    assert!(!provider_exists(&c, &ours).await, "the cluster's provider");
    assert!(provider_exists(&c, &other_issuer).await, "another issuer's");

    let r = until_done(&c, &only(&issuer("C")), 3).await;
    assert!(
        r.iter()
            .all(|r| r.phases.iter().all(|p| p.deleted.is_empty())),
        "{r:#?}"
    );
    assert!(
        provider_exists(&c, &untagged).await,
        "the recorded issuer's, without the cluster's tag: someone else's"
    );

    let r = sweeper_aws::phases::teardown_pass(&c, &only(&issuer("D"))).await;
    assert!(!r.done);
    assert!(
        r.phases[1]
            .remaining
            .iter()
            .any(|(x, why)| x.id == in_use && why.message.contains("still reports")),
        "{r:#?}"
    );
    assert!(provider_exists(&c, &in_use).await, "a live cluster uses it");

    // Without a recorded issuer (an AWSCluster, or CAPA recorded none) nothing is looked at.
    let none = PassRequest {
        tasks: Some(vec!["oidc-provider".parse::<GcTask>().unwrap()]),
        ..PassRequest::new(&n)
    };
    until_done(&c, &none, 2).await;
    for kept in [&other_issuer, &untagged, &in_use] {
        assert!(provider_exists(&c, kept).await, "{kept}");
    }
}

/// A log group `name`, with `retention` days when given.
async fn log_group(c: &AwsClients, name: &str, retention: Option<i32>) {
    c.logs
        .create_log_group()
        .log_group_name(name)
        .send()
        .await
        .unwrap();
    if let Some(days) = retention {
        c.logs
            .put_retention_policy()
            .log_group_name(name)
            .retention_in_days(days)
            .send()
            .await
            .unwrap();
    }
}

async fn log_group_exists(c: &AwsClients, name: &str) -> bool {
    c.logs
        .describe_log_groups()
        .log_group_name_prefix(name)
        .send()
        .await
        .unwrap()
        .log_groups()
        .iter()
        .any(|g| g.log_group_name() == Some(name))
}

/// With the opt-in task, the EKS control-plane log group `/aws/eks/<eksName>/cluster` goes once
/// EKS reports the cluster gone. It stays: without the task, while EKS still reports the cluster,
/// with a retention policy (someone keeps it), and for an AWSCluster; a prefix look-alike and
/// another cluster's group always stay.
#[tokio::test]
#[ignore = "needs LocalStack with logs: make env-up"]
async fn the_control_plane_log_group_goes_only_when_asked_and_its_look_alikes_stay() {
    let (mut c, _rec) = env().await;
    let n = cluster("logs");
    let kept_n = cluster("logsk");
    let ours = format!("/aws/eks/{n}/cluster");
    let prefix_twin = format!("/aws/eks/{n}/cluster-audit");
    let other = format!("/aws/eks/{n}-b/cluster");
    let retained = format!("/aws/eks/{kept_n}/cluster");
    // Built on unrecorded clients: PutRetentionPolicy is the fixture's, never sweeper's.
    let plain = retrying_clients().await;
    log_group(&plain, &ours, None).await;
    log_group(&plain, &prefix_twin, None).await;
    log_group(&plain, &other, None).await;
    log_group(&plain, &retained, Some(30)).await;
    let task = || Some(vec!["eks-log-group".parse::<GcTask>().unwrap()]);
    let eks_req = |name: &str| PassRequest {
        tasks: task(),
        ..PassRequest::new(name).with_eks(EksFacts::default())
    };

    // The default tasks leave it (opt-in), an AWSCluster of the same name too.
    c.eks = eks(Vec::new());
    until_done(&c, &PassRequest::new(&n).with_eks(EksFacts::default()), 3).await;
    until_done(
        &c,
        &PassRequest {
            tasks: task(),
            ..PassRequest::new(&n)
        },
        3,
    )
    .await;
    assert!(log_group_exists(&c, &ours).await, "opt-in, and EKS only");

    // EKS still reports the cluster: it waits.
    c.eks = eks(vec![(n.clone(), "https://oidc.example/id/1".into())]);
    let r = sweeper_aws::phases::teardown_pass(&c, &eks_req(&n)).await;
    assert!(
        r.phases[1]
            .remaining
            .iter()
            .any(|(x, why)| x.kind == "log-group" && why.message.contains("EKS still reports")),
        "{r:#?}"
    );
    assert!(log_group_exists(&c, &ours).await);

    // Gone: it goes; the look-alikes stay.
    c.eks = eks(Vec::new());
    until_done(&c, &eks_req(&n), 3).await;
    until_done(&c, &eks_req(&kept_n), 3).await;
    assert!(!log_group_exists(&c, &ours).await, "the cluster's");
    assert!(
        log_group_exists(&c, &prefix_twin).await,
        "a prefix look-alike"
    );
    assert!(log_group_exists(&c, &other).await, "another cluster's");
    assert!(
        log_group_exists(&c, &retained).await,
        "a retention policy: someone keeps it"
    );
}

/// EKS's cluster security group of a deleted cluster (`aws:eks:cluster-name`, in the cluster's
/// VPC, no interface using it, EKS says ResourceNotFound) goes, a rule in another group that
/// references it revoked first. It stays while EKS reports the cluster, while an interface uses
/// it, and when it is in another VPC or another cluster's; it stays for an AWSCluster too.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn the_eks_cluster_security_group_goes_once_eks_says_the_cluster_is_gone() {
    let (mut c, rec) = env().await;
    let n = cluster("eksg");
    let (vpc, subnets) = byo_network(&c).await;
    let (other_vpc, _) = byo_network(&c).await;
    let eks_tag = |name: &str| vec![("aws:eks:cluster-name".to_string(), name.to_string())];
    let ours = sg(&c, &vpc, &format!("eks-cluster-sg-{n}"), &eks_tag(&n)).await;
    let elsewhere = sg(
        &c,
        &other_vpc,
        &format!("eks-cluster-sg-{n}-2"),
        &eks_tag(&n),
    )
    .await;
    let anothers = sg(
        &c,
        &vpc,
        &format!("eks-cluster-sg-{n}-b"),
        &eks_tag(&format!("{n}-b")),
    )
    .await;
    // A user's group whose rule names ours: kept, the rule revoked.
    let users = sg(&c, &vpc, &format!("users-{n}"), &[]).await;
    c.ec2
        .authorize_security_group_ingress()
        .group_id(&users)
        .ip_permissions(
            sweeper_aws::sdk::ec2::types::IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(443)
                .to_port(443)
                .user_id_group_pairs(
                    sweeper_aws::sdk::ec2::types::UserIdGroupPair::builder()
                        .group_id(&ours)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    let eni = eni(&c, &subnets[0], &ours).await;
    let req = |eks_facts: bool| {
        let r = PassRequest {
            tasks: Some(vec!["eks-security-group".parse::<GcTask>().unwrap()]),
            vpc_ids: vec![vpc.clone()],
            ..PassRequest::new(&n)
        };
        if eks_facts {
            r.with_eks(EksFacts::default())
        } else {
            r
        }
    };

    // EKS still reports the cluster: EKS's to delete.
    c.eks = eks(vec![(n.clone(), "https://oidc.example/id/1".into())]);
    let p = sweeper_aws::phases::phase2_pass(&c, &req(true)).await;
    assert!(p.deleted.is_empty() && p.planned.is_empty(), "{p:#?}");
    // Gone, but an interface still uses it.
    c.eks = eks(Vec::new());
    let p = sweeper_aws::phases::phase2_pass(&c, &req(true)).await;
    assert!(p.deleted.is_empty(), "{p:#?}");
    assert!(sg_exists(&c, &ours).await);
    // An AWSCluster of the same name: never.
    c.ec2
        .delete_network_interface()
        .network_interface_id(&eni)
        .send()
        .await
        .unwrap();
    let p = sweeper_aws::phases::phase2_pass(&c, &req(false)).await;
    assert!(p.deleted.is_empty(), "{p:#?}");

    let p = sweeper_aws::phases::phase2_pass(&c, &req(true)).await;
    assert_eq!(
        p.deleted.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        [ours.as_str()],
        "{p:#?}"
    );
    assert!(!sg_exists(&c, &ours).await, "the deleted cluster's");
    for kept in [&elsewhere, &anothers, &users] {
        assert!(sg_exists(&c, kept).await, "{kept}");
    }
    let calls = rec.calls();
    assert!(
        first(&calls, "EC2.RevokeSecurityGroupIngress") < first(&calls, "EC2.DeleteSecurityGroup"),
        "the user's rule naming it is revoked first: {calls:?}"
    );
}
