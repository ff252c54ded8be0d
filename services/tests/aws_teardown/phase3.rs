use crate::fixtures::*;
use sweeper_services::aws::sdk::ec2::types::{DomainType, ResourceType, Tag, TagSpecification};
use sweeper_services::aws::teardown::{AwsClients, TeardownRequest};

/// A CAPA-managed network for `n`: VPC, subnets, IGW, route table, NAT gateway + EIP, an SG.
async fn capa_network(c: &AwsClients, n: &str) -> (String, Vec<String>, String) {
    let v = vpc(c, &[capa(n)]).await;
    let public = subnet(c, &v, "10.0.1.0/24", AZ).await;
    let private = subnet(c, &v, "10.0.2.0/24", "us-east-1b").await;
    let igw = c.ec2.create_internet_gateway().send().await.unwrap();
    let igw = igw
        .internet_gateway()
        .unwrap()
        .internet_gateway_id()
        .unwrap()
        .to_string();
    c.ec2
        .attach_internet_gateway()
        .internet_gateway_id(&igw)
        .vpc_id(&v)
        .send()
        .await
        .unwrap();
    let rt = c.ec2.create_route_table().vpc_id(&v).send().await.unwrap();
    let rt = rt
        .route_table()
        .unwrap()
        .route_table_id()
        .unwrap()
        .to_string();
    c.ec2
        .associate_route_table()
        .route_table_id(&rt)
        .subnet_id(&public)
        .send()
        .await
        .unwrap();
    let (k, val) = capa(n);
    let eip = c
        .ec2
        .allocate_address()
        .domain(DomainType::Vpc)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::ElasticIp)
                .tags(Tag::builder().key(k).value(val).build())
                .build(),
        )
        .send()
        .await
        .unwrap();
    let alloc = eip.allocation_id().unwrap().to_string();
    c.ec2
        .create_nat_gateway()
        .subnet_id(&public)
        .allocation_id(&alloc)
        .send()
        .await
        .unwrap();
    let g = sg(c, &v, &format!("{n}-node"), &[capa(n)]).await;
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

    until_done(&c, &TeardownRequest::new(&n), 20).await;
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
        sg_exists(&c, &byo_sg).await,
        "a CAPA group in a bring-your-own VPC is not phase 3's"
    );
    assert!(vpc_exists(&c, &other_vpc).await);
    assert!(subnet_exists(&c, &other_subnet).await);
    let calls = rec.calls();
    let order = [
        "EC2.DeleteNatGateway",
        "EC2.ReleaseAddress",
        "EC2.DetachInternetGateway",
        "EC2.DeleteInternetGateway",
        "EC2.DisassociateRouteTable",
        "EC2.DeleteRouteTable",
        "EC2.DeleteSubnet",
        "EC2.DeleteSecurityGroup",
        "EC2.DeleteVpc",
    ];
    let idx: Vec<usize> = order.iter().map(|op| first(&calls, op)).collect();
    assert!(
        idx.windows(2).all(|w| w[0] < w[1]),
        "{order:?} at {idx:?}: {calls:?}"
    );
}
