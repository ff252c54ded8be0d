//! LocalStack fixtures for external-collector tests: a VPC with a subnet, security groups and
//! load balancers tagged as a cluster's, and `sweeper gc plan` against the test environment.

use sweeper_services::aws::sdk::{ec2, elbv2};

/// Runs `sweeper gc <args>` against the test environment (LocalStack's coordinates included, for
/// `plan`); whether it succeeded, and its stdout and stderr.
pub fn sweeper_gc(args: &[&str]) -> (bool, String) {
    let facts = super::EnvFacts::load();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sweeper"));
    cmd.arg("gc")
        .args(args)
        .env("KUBECONFIG", facts.get("KUBECONFIG"));
    for k in [
        "AWS_ENDPOINT_URL",
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    ] {
        cmd.env(k, facts.get(k));
    }
    let out = cmd.output().expect("run sweeper gc");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Runs `sweeper gc plan` for the cluster; returns its output, failing the test if it fails.
pub fn gc_plan(cluster: &str, ns: &str) -> String {
    let (ok, text) = sweeper_gc(&["plan", "--cluster-name", cluster, "-n", ns]);
    assert!(ok, "{text}");
    text
}

pub struct Net {
    pub vpc: String,
    pub subnet: String,
}

pub async fn network(e: &ec2::Client) -> Net {
    let vpc = e
        .create_vpc()
        .cidr_block("10.30.0.0/16")
        .send()
        .await
        .unwrap()
        .vpc
        .unwrap()
        .vpc_id
        .unwrap();
    let subnet = e
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.30.1.0/24")
        .availability_zone("us-east-1a")
        .send()
        .await
        .unwrap()
        .subnet
        .unwrap()
        .subnet_id
        .unwrap();
    Net { vpc, subnet }
}

pub async fn sg(e: &ec2::Client, net: &Net, name: &str, tag: Option<(&str, &str)>) -> String {
    let mut req = e
        .create_security_group()
        .group_name(name)
        .description("sweeper test")
        .vpc_id(&net.vpc);
    if let Some((k, v)) = tag {
        req = req.tag_specifications(
            ec2::types::TagSpecification::builder()
                .resource_type(ec2::types::ResourceType::SecurityGroup)
                .tags(ec2::types::Tag::builder().key(k).value(v).build())
                .build(),
        );
    }
    req.send().await.expect("create sg").group_id.unwrap()
}

pub async fn sg_exists(e: &ec2::Client, id: &str) -> bool {
    e.describe_security_groups()
        .group_ids(id)
        .send()
        .await
        .is_ok_and(|o| !o.security_groups().is_empty())
}

pub async fn lb(l: &elbv2::Client, net: &Net, name: &str, key: &str) -> String {
    l.create_load_balancer()
        .name(name)
        .subnets(&net.subnet)
        .r#type(elbv2::types::LoadBalancerTypeEnum::Network)
        .tags(elbv2::types::Tag::builder().key(key).value("owned").build())
        .send()
        .await
        .expect("create lb")
        .load_balancers()[0]
        .load_balancer_arn()
        .unwrap()
        .to_string()
}

pub async fn lb_exists(l: &elbv2::Client, arn: &str) -> bool {
    l.describe_load_balancers()
        .load_balancer_arns(arn)
        .send()
        .await
        .is_ok_and(|o| !o.load_balancers().is_empty())
}

/// Tags an EC2 resource (e.g. a VPC, as CAPA tags the network it manages).
pub async fn tag_ec2(e: &ec2::Client, id: &str, key: &str, value: &str) {
    e.create_tags()
        .resources(id)
        .tags(ec2::types::Tag::builder().key(key).value(value).build())
        .send()
        .await
        .unwrap_or_else(|err| panic!("tag {id} with {key}={value}: {err}"));
}

pub async fn vpc_exists(e: &ec2::Client, id: &str) -> bool {
    e.describe_vpcs()
        .vpc_ids(id)
        .send()
        .await
        .is_ok_and(|o| !o.vpcs().is_empty())
}
