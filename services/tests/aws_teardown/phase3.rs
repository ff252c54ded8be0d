use crate::fixtures::*;
use sweeper_aws::phases::{AwsClients, PassRequest, teardown_pass};

/// A CAPA-managed network for `n`, every part carrying CAPA's ownership tag as CAPA tags it:
/// VPC, two subnets, IGW, route table, NAT gateway + EIP, and CAPA's node security group.
async fn capa_network(c: &AwsClients, n: &str) -> (String, Vec<String>, String) {
    let tags = [capa(n)];
    let v = vpc(c, &tags).await;
    let public = fallible::subnet(c, &v, "10.0.1.0/24", AZ, &tags)
        .await
        .unwrap();
    let private = fallible::subnet(c, &v, "10.0.2.0/24", "us-east-1b", &tags)
        .await
        .unwrap();
    fallible::internet_gateway(c, &v, &tags).await.unwrap();
    fallible::route_table(c, &v, &[&public], &tags)
        .await
        .unwrap();
    let alloc = fallible::elastic_ip(c, &tags).await.unwrap();
    fallible::nat_gateway(c, &public, &alloc, &tags)
        .await
        .unwrap();
    let g = sg(c, &v, &format!("{n}-node"), &tags).await;
    (v, vec![public, private], g)
}

#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn phase3_deletes_a_capa_managed_network_only() {
    let (c, rec) = env().await;
    let n = cluster("p3");
    let (v, subnets, g) = capa_network(&c, &n).await;
    // Survivors: a bring-your-own VPC and a CAPA VPC of a cluster whose name extends ours.
    let (byo, byo_subnets) = byo_network(&c).await;
    let byo_sg = sg(&c, &byo, &format!("{n}-byo"), &[capa(&n)]).await;
    let other_vpc = vpc(&c, &[capa(&format!("{n}-b"))]).await;
    let other_subnet = subnet(&c, &other_vpc, "10.0.3.0/24", AZ).await;

    until_done(&c, &PassRequest::new(&n), 20).await;
    assert!(!vpc_exists(&c, &v).await);
    for s in &subnets {
        assert!(!subnet_exists(&c, s).await);
    }
    assert!(!sg_exists(&c, &g).await);
    assert!(vpc_exists(&c, &byo).await);
    for s in &byo_subnets {
        assert!(subnet_exists(&c, s).await);
    }
    assert!(
        !sg_exists(&c, &byo_sg).await,
        "CAPA's group in a bring-your-own VPC is deleted (phase 1), the VPC and subnets kept"
    );
    assert!(vpc_exists(&c, &other_vpc).await);
    assert!(subnet_exists(&c, &other_subnet).await);
    let calls = rec.calls();
    // CAPA's groups go in phase 1, before the network.
    let order = [
        "EC2.DeleteSecurityGroup",
        "EC2.DeleteNatGateway",
        "EC2.ReleaseAddress",
        "EC2.DetachInternetGateway",
        "EC2.DeleteInternetGateway",
        "EC2.DisassociateRouteTable",
        "EC2.DeleteRouteTable",
        "EC2.DeleteSubnet",
        "EC2.DeleteVpc",
    ];
    let idx: Vec<usize> = order.iter().map(|op| first(&calls, op)).collect();
    assert!(
        idx.windows(2).all(|w| w[0] < w[1]),
        "{order:?} at {idx:?}: {calls:?}"
    );
}

/// CAPA's VPC endpoint goes before the route tables, subnets and VPC it holds (CAPA#4426);
/// another's endpoint in a CAPA-managed VPC is named as the VPC's blocker and kept, with the VPC,
/// until it is gone.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn phase3_deletes_capas_vpc_endpoints_first_and_names_anothers_as_a_blocker() {
    let (c, rec) = env().await;
    let n = cluster("p3vpce");
    let (v, _, _) = capa_network(&c, &n).await;
    let ours = vpc_endpoint(&c, &v, &[capa(&n)]).await;
    let m = cluster("p3vpcf");
    let (w, _, _) = capa_network(&c, &m).await;
    let foreign = vpc_endpoint(&c, &w, &[]).await;

    until_done(&c, &PassRequest::new(&n), 20).await;
    assert!(!vpc_endpoint_exists(&c, &ours).await);
    assert!(!vpc_exists(&c, &v).await);
    let calls = rec.calls();
    let endpoints = first(&calls, "EC2.DeleteVpcEndpoints");
    for later in ["EC2.DeleteRouteTable", "EC2.DeleteSubnet", "EC2.DeleteVpc"] {
        assert!(
            endpoints < first(&calls, later),
            "before {later}: {calls:?}"
        );
    }
    assert!(
        vpc_endpoint_exists(&c, &foreign).await,
        "another cluster's endpoint is untouched"
    );

    let req = PassRequest::new(&m);
    let mut last = None;
    for _ in 0..4 {
        last = Some(teardown_pass(&c, &req).await);
    }
    let report = last.unwrap();
    assert!(!report.done, "{report:#?}");
    let p3 = &report.phases[2];
    assert!(
        p3.blockers
            .iter()
            .any(|(r, vpc)| r.id == foreign && r.kind == "vpc-endpoint" && vpc == &w),
        "{p3:#?}"
    );
    assert!(
        vpc_endpoint_exists(&c, &foreign).await,
        "a blocker is never deleted"
    );
    assert!(vpc_exists(&c, &w).await);
    c.ec2
        .delete_vpc_endpoints()
        .vpc_endpoint_ids(&foreign)
        .send()
        .await
        .unwrap();
    until_done(&c, &req, 20).await;
    assert!(
        !vpc_exists(&c, &w).await,
        "once the blocker is gone, the VPC goes"
    );
}

/// Opted out, with a CAPA-managed VPC: phase 1 still deletes CAPA's group, but the cloud
/// provider's group and load balancer (`kubernetes.io/cluster/<n>=owned` only) and a subnet CAPA
/// did not tag are not the teardown's. Phase 3 names them as what blocks the VPC, touches nothing
/// of the network and is not done; once they are gone, it finishes.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn phase3_waits_for_what_the_cluster_does_not_own_and_deletes_none_of_it() {
    let (c, rec) = env().await;
    let n = cluster("p3blk");
    let (v, subnets, node_sg) = capa_network(&c, &n).await;
    let elb_sg = sg(&c, &v, &format!("k8s-elb-{n}"), &[cloud(&n, "owned")]).await;
    let lb = nlb(
        &c,
        &Net {
            vpc: v.clone(),
            subnet: subnets[0].clone(),
        },
        &format!("{}-svc", &n[n.len() - 8..]),
        &[cloud(&n, "owned")],
    )
    .await;
    let foreign_subnet = subnet(&c, &v, "10.0.9.0/24", AZ).await;
    let req = PassRequest {
        external_gc: false,
        ..PassRequest::new(&n)
    };
    let mut last = None;
    for _ in 0..4 {
        last = Some(teardown_pass(&c, &req).await);
    }
    let report = last.unwrap();
    assert!(!report.done);
    let p3 = &report.phases[2];
    assert!(p3.started, "{report:#?}");
    let mut blockers: Vec<&str> = p3.blockers.iter().map(|(r, _)| r.id.as_str()).collect();
    blockers.sort();
    let mut expected = vec![elb_sg.as_str(), lb.as_str(), foreign_subnet.as_str()];
    expected.sort();
    assert_eq!(blockers, expected, "{p3:#?}");
    assert!(p3.blockers.iter().all(|(_, vpc)| vpc == &v), "{p3:#?}");
    assert!(
        !sg_exists(&c, &node_sg).await,
        "phase 1 ran: CAPA's group is gone"
    );
    assert!(sg_exists(&c, &elb_sg).await);
    assert!(v2_exists(&c, &lb).await);
    assert!(vpc_exists(&c, &v).await);
    for s in subnets.iter().chain([&foreign_subnet]) {
        assert!(subnet_exists(&c, s).await, "the network is not touched");
    }
    let calls = rec.calls();
    for op in [
        "EC2.DeleteNatGateway",
        "EC2.DeleteSubnet",
        "EC2.DeleteVpc",
        "ElasticLoadBalancingv2.DeleteLoadBalancer",
    ] {
        assert!(!calls.iter().any(|c| c == op), "{op} called: {calls:?}");
    }

    // The owner removes them: the teardown finishes.
    c.elbv2
        .delete_load_balancer()
        .load_balancer_arn(&lb)
        .send()
        .await
        .unwrap();
    c.ec2
        .delete_security_group()
        .group_id(&elb_sg)
        .send()
        .await
        .unwrap();
    c.ec2
        .delete_subnet()
        .subnet_id(&foreign_subnet)
        .send()
        .await
        .unwrap();
    until_done(&c, &req, 20).await;
    assert!(!vpc_exists(&c, &v).await);
}

/// GuardDuty Runtime Monitoring's endpoint (`com.amazonaws.<region>.guardduty-data`, tagged
/// `GuardDutyManaged=true`, LocalStack accepts the service name) and its group
/// (`GuardDutyManagedSecurityGroup-<vpc-id>`).
async fn guardduty(c: &AwsClients, vpc: &str, subnet: &str) -> (String, String) {
    let group = sg(c, vpc, &format!("GuardDutyManagedSecurityGroup-{vpc}"), &[]).await;
    let out = c
        .ec2
        .create_vpc_endpoint()
        .vpc_id(vpc)
        .service_name("com.amazonaws.us-east-1.guardduty-data")
        .vpc_endpoint_type(sweeper_aws::sdk::ec2::types::VpcEndpointType::Interface)
        .subnet_ids(subnet)
        .security_group_ids(&group)
        .tag_specifications(
            sweeper_aws::sdk::ec2::types::TagSpecification::builder()
                .resource_type(sweeper_aws::sdk::ec2::types::ResourceType::VpcEndpoint)
                .tags(
                    sweeper_aws::sdk::ec2::types::Tag::builder()
                        .key("GuardDutyManaged")
                        .value("true")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateVpcEndpoint guardduty-data: {e:?}"));
    let endpoint = out
        .vpc_endpoint()
        .and_then(|e| e.vpc_endpoint_id())
        .unwrap()
        .to_string();
    (endpoint, group)
}

/// Kind 2 of issue #44: GuardDuty's managed endpoint and group no longer hold a CAPA-managed VPC:
/// phase 3 deletes exactly those two (the endpoint before the subnets) and the VPC goes. The same
/// pair in a bring-your-own VPC is never touched.
#[tokio::test]
#[ignore = "needs LocalStack: make env-up"]
async fn phase3_deletes_guarddutys_endpoint_and_group_in_a_capa_vpc_only() {
    let (c, rec) = env().await;
    let n = cluster("p3gd");
    let (v, subnets, _) = capa_network(&c, &n).await;
    let (gd_endpoint, gd_group) = guardduty(&c, &v, &subnets[0]).await;
    let (byo, byo_subnets) = byo_network(&c).await;
    let (byo_endpoint, byo_group) = guardduty(&c, &byo, &byo_subnets[0]).await;

    let req = PassRequest {
        vpc_ids: vec![v.clone(), byo.clone()],
        ..PassRequest::new(&n)
    };
    until_done(&c, &req, 20).await;
    assert!(!vpc_endpoint_exists(&c, &gd_endpoint).await);
    assert!(!sg_exists(&c, &gd_group).await);
    assert!(!vpc_exists(&c, &v).await, "the VPC is no longer held");
    let calls = rec.calls();
    assert!(
        first(&calls, "EC2.DeleteVpcEndpoints") < first(&calls, "EC2.DeleteSubnet"),
        "{calls:?}"
    );
    assert!(
        vpc_endpoint_exists(&c, &byo_endpoint).await,
        "a bring-your-own VPC's: kept"
    );
    assert!(sg_exists(&c, &byo_group).await);
    assert!(vpc_exists(&c, &byo).await);
}
