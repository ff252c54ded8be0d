//! The AWS half of the test environment works: LocalStack serves ec2, elb/elbv2 (through
//! localstack/'s extension) and the tagging API, and discovery reads every page.

mod support;

use support::{aws_config, unique_name};
use sweeper_aws::locate::tagging::resources_with_tag;
use sweeper_aws::sdk::{ec2, elbv2, tagging};

fn tag_ec2(key: &str, value: &str, kind: ec2::types::ResourceType) -> ec2::types::TagSpecification {
    ec2::types::TagSpecification::builder()
        .resource_type(kind)
        .tags(ec2::types::Tag::builder().key(key).value(value).build())
        .build()
}

fn tag_elbv2(key: &str, value: &str) -> elbv2::types::Tag {
    elbv2::types::Tag::builder().key(key).value(value).build()
}

#[tokio::test]
#[ignore = "needs the test environment: make env-up"]
async fn tagging_api_finds_nlb_target_group_and_security_group_across_pages() {
    let config = aws_config().await;
    let ec2c = ec2::Client::new(&config);
    let lbc = elbv2::Client::new(&config);
    let tagc = tagging::Client::new(&config);
    let cluster = unique_name("c");
    let key = format!("kubernetes.io/cluster/{cluster}");

    let vpc = ec2c
        .create_vpc()
        .cidr_block("10.20.0.0/16")
        .send()
        .await
        .expect("create vpc")
        .vpc
        .unwrap()
        .vpc_id
        .unwrap();
    let subnet = ec2c
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.20.1.0/24")
        .availability_zone("us-east-1a")
        .send()
        .await
        .expect("create subnet")
        .subnet
        .unwrap()
        .subnet_id
        .unwrap();

    let nlb = lbc
        .create_load_balancer()
        .name(format!("nlb-{}", &cluster[cluster.len() - 4..]))
        .r#type(elbv2::types::LoadBalancerTypeEnum::Network)
        .subnets(&subnet)
        .tags(tag_elbv2(&key, "owned"))
        .send()
        .await
        .expect("create NLB")
        .load_balancers
        .unwrap()[0]
        .load_balancer_arn
        .clone()
        .unwrap();
    let tg = lbc
        .create_target_group()
        .name(format!("tg-{}", &cluster[cluster.len() - 4..]))
        .protocol(elbv2::types::ProtocolEnum::Tcp)
        .port(80)
        .vpc_id(&vpc)
        .tags(tag_elbv2(&key, "owned"))
        .send()
        .await
        .expect("create target group")
        .target_groups
        .unwrap()[0]
        .target_group_arn
        .clone()
        .unwrap();

    // 1 + 22 security groups tagged `owned`: with 5 per page that is 5 pages of tagged resources.
    let mut sgs = Vec::new();
    for i in 0..23 {
        let id = ec2c
            .create_security_group()
            .group_name(format!("{cluster}-sg{i}"))
            .description("sweeper test")
            .vpc_id(&vpc)
            .tag_specifications(tag_ec2(
                &key,
                "owned",
                ec2::types::ResourceType::SecurityGroup,
            ))
            .send()
            .await
            .expect("create security group")
            .group_id
            .unwrap();
        sgs.push(id);
    }
    // Must NOT be found: the same key with `shared`, and an untagged group.
    let shared = ec2c
        .create_security_group()
        .group_name(format!("{cluster}-shared"))
        .description("sweeper test")
        .vpc_id(&vpc)
        .tag_specifications(tag_ec2(
            &key,
            "shared",
            ec2::types::ResourceType::SecurityGroup,
        ))
        .send()
        .await
        .expect("create shared sg")
        .group_id
        .unwrap();

    let found = resources_with_tag(&tagc, &key, &["owned"], Some(5))
        .await
        .expect("tagging discovery");
    let arns: Vec<String> = found.resources.iter().map(|r| r.arn.to_string()).collect();

    assert!(
        found.pages >= 5,
        "expected at least 5 pages, read {}",
        found.pages
    );
    assert_eq!(found.resources.len(), 25, "NLB + TG + 23 SGs: {arns:#?}");
    assert!(found.malformed.is_empty());
    assert!(arns.contains(&nlb), "NLB {nlb} missing");
    assert!(arns.contains(&tg), "target group {tg} missing");
    for sg in &sgs {
        assert!(
            arns.iter()
                .any(|a| a.ends_with(&format!("security-group/{sg}"))),
            "{sg} missing"
        );
    }
    assert!(
        !arns.iter().any(|a| a.ends_with(&shared)),
        "a `shared` resource must not match"
    );
    assert!(
        found
            .resources
            .iter()
            .all(|r| r.tags.get(&key).map(String::as_str) == Some("owned"))
    );

    // Leave LocalStack as we found it.
    lbc.delete_load_balancer()
        .load_balancer_arn(&nlb)
        .send()
        .await
        .expect("delete NLB");
    lbc.delete_target_group()
        .target_group_arn(&tg)
        .send()
        .await
        .expect("delete TG");
    for sg in sgs.iter().chain([&shared]) {
        ec2c.delete_security_group()
            .group_id(sg)
            .send()
            .await
            .expect("delete sg");
    }
    ec2c.delete_subnet()
        .subnet_id(&subnet)
        .send()
        .await
        .expect("delete subnet");
    ec2c.delete_vpc()
        .vpc_id(&vpc)
        .send()
        .await
        .expect("delete vpc");
}
