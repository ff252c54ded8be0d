//! Builders for the AWS resources the LocalStack tests and the benchmark create. They panic on
//! failure: a fixture that cannot be built is a broken test setup, and the panic names the call.

use crate::aws::model::AwsClients;
use aws_sdk_ec2 as ec2;
use aws_sdk_elasticloadbalancing as elb;
use aws_sdk_elasticloadbalancingv2 as elbv2;

pub const AZ: &str = "us-east-1a";

/// CAPA's ownership tag for cluster `c`.
pub fn capa(c: &str) -> (String, String) {
    (
        format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{c}"),
        "owned".into(),
    )
}

/// The cloud provider's ownership tag for cluster `c` with value `v` (`owned` or `shared`).
pub fn cloud(c: &str, v: &str) -> (String, String) {
    (format!("kubernetes.io/cluster/{c}"), v.into())
}

fn ec2_tags(
    rt: ec2::types::ResourceType,
    tags: &[(String, String)],
) -> ec2::types::TagSpecification {
    let mut b = ec2::types::TagSpecification::builder().resource_type(rt);
    for (k, v) in tags {
        b = b.tags(ec2::types::Tag::builder().key(k).value(v).build());
    }
    b.build()
}

pub async fn vpc(c: &AwsClients, tags: &[(String, String)]) -> String {
    let out = c
        .ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .tag_specifications(ec2_tags(ec2::types::ResourceType::Vpc, tags))
        .send()
        .await
        .unwrap();
    out.vpc().unwrap().vpc_id().unwrap().to_string()
}

pub async fn subnet(c: &AwsClients, vpc: &str, cidr: &str, az: &str) -> String {
    let out = c
        .ec2
        .create_subnet()
        .vpc_id(vpc)
        .cidr_block(cidr)
        .availability_zone(az)
        .send()
        .await
        .unwrap();
    out.subnet().unwrap().subnet_id().unwrap().to_string()
}

/// A VPC with one subnet in [`AZ`]: the network most tests put their resources in.
pub struct Net {
    pub vpc: String,
    pub subnet: String,
}

/// An untagged VPC with one subnet (tag it with [`tag`] to make it a cluster's, as CAPA does).
pub async fn network(c: &AwsClients) -> Net {
    let vpc = vpc(c, &[]).await;
    let subnet = subnet(c, &vpc, "10.0.1.0/24", AZ).await;
    Net { vpc, subnet }
}

/// Tags an EC2 resource after the fact (e.g. a VPC, as CAPA tags the network it manages).
pub async fn tag(c: &AwsClients, id: &str, key: &str, value: &str) {
    c.ec2
        .create_tags()
        .resources(id)
        .tags(ec2::types::Tag::builder().key(key).value(value).build())
        .send()
        .await
        .unwrap_or_else(|err| panic!("tag {id} with {key}={value}: {err}"));
}

/// An untagged (bring-your-own) VPC with two subnets in two zones.
pub async fn byo_network(c: &AwsClients) -> (String, Vec<String>) {
    let v = vpc(c, &[]).await;
    let a = subnet(c, &v, "10.0.1.0/24", AZ).await;
    let b = subnet(c, &v, "10.0.2.0/24", "us-east-1b").await;
    (v, vec![a, b])
}

pub async fn sg(c: &AwsClients, vpc: &str, name: &str, tags: &[(String, String)]) -> String {
    let mut req = c
        .ec2
        .create_security_group()
        .vpc_id(vpc)
        .group_name(name)
        .description("test");
    if !tags.is_empty() {
        req = req.tag_specifications(ec2_tags(ec2::types::ResourceType::SecurityGroup, tags));
    }
    req.send().await.unwrap().group_id().unwrap().to_string()
}

pub async fn classic_lb(c: &AwsClients, name: &str, subnet: &str, tags: &[(String, String)]) {
    let mut req = c
        .elb
        .create_load_balancer()
        .load_balancer_name(name)
        .subnets(subnet)
        .listeners(
            elb::types::Listener::builder()
                .protocol("TCP")
                .load_balancer_port(80)
                .instance_port(80)
                .build()
                .unwrap(),
        );
    for (k, v) in tags {
        req = req.tags(elb::types::Tag::builder().key(k).value(v).build().unwrap());
    }
    req.send().await.unwrap();
}

pub async fn v2_lb(
    c: &AwsClients,
    name: &str,
    ty: elbv2::types::LoadBalancerTypeEnum,
    subnets: &[String],
    tags: &[(String, String)],
) -> String {
    let mut req = c
        .elbv2
        .create_load_balancer()
        .name(name)
        .r#type(ty)
        .set_subnets(Some(subnets.to_vec()));
    for (k, v) in tags {
        req = req.tags(elbv2::types::Tag::builder().key(k).value(v).build());
    }
    let out = req.send().await.unwrap();
    out.load_balancers()[0]
        .load_balancer_arn()
        .unwrap()
        .to_string()
}

pub async fn tg(c: &AwsClients, name: &str, vpc: &str, tags: &[(String, String)]) -> String {
    tg_for(c, name, vpc, elbv2::types::ProtocolEnum::Http, tags).await
}

async fn tg_for(
    c: &AwsClients,
    name: &str,
    vpc: &str,
    protocol: elbv2::types::ProtocolEnum,
    tags: &[(String, String)],
) -> String {
    let mut req = c
        .elbv2
        .create_target_group()
        .name(name)
        .protocol(protocol)
        .port(80)
        .vpc_id(vpc);
    for (k, v) in tags {
        req = req.tags(elbv2::types::Tag::builder().key(k).value(v).build());
    }
    req.send().await.unwrap().target_groups()[0]
        .target_group_arn()
        .unwrap()
        .to_string()
}

pub async fn listener(c: &AwsClients, lb: &str, tg: &str) {
    listener_for(c, lb, tg, elbv2::types::ProtocolEnum::Http).await
}

async fn listener_for(c: &AwsClients, lb: &str, tg: &str, protocol: elbv2::types::ProtocolEnum) {
    c.elbv2
        .create_listener()
        .load_balancer_arn(lb)
        .protocol(protocol)
        .port(80)
        .default_actions(
            elbv2::types::Action::builder()
                .r#type(elbv2::types::ActionTypeEnum::Forward)
                .target_group_arn(tg)
                .build(),
        )
        .send()
        .await
        .unwrap();
}

pub async fn instance(c: &AwsClients, subnet: &str, tags: &[(String, String)]) -> String {
    let mut req = c
        .ec2
        .run_instances()
        .image_id("ami-12345678")
        .min_count(1)
        .max_count(1)
        .subnet_id(subnet);
    if !tags.is_empty() {
        req = req.tag_specifications(ec2_tags(ec2::types::ResourceType::Instance, tags));
    }
    req.send().await.unwrap().instances()[0]
        .instance_id()
        .unwrap()
        .to_string()
}

pub async fn volume(c: &AwsClients, tags: &[(String, String)]) -> String {
    c.ec2
        .create_volume()
        .availability_zone(AZ)
        .size(1)
        .tag_specifications(ec2_tags(ec2::types::ResourceType::Volume, tags))
        .send()
        .await
        .unwrap()
        .volume_id()
        .unwrap()
        .to_string()
}

pub async fn eni(c: &AwsClients, subnet: &str, group: &str) -> String {
    let out = c
        .ec2
        .create_network_interface()
        .subnet_id(subnet)
        .groups(group)
        .send()
        .await
        .unwrap();
    out.network_interface()
        .unwrap()
        .network_interface_id()
        .unwrap()
        .to_string()
}

/// A network load balancer in `net`'s subnet.
pub async fn nlb(c: &AwsClients, net: &Net, name: &str, tags: &[(String, String)]) -> String {
    let ty = elbv2::types::LoadBalancerTypeEnum::Network;
    v2_lb(c, name, ty, std::slice::from_ref(&net.subnet), tags).await
}

/// A TCP target group in `vpc` with `tags`, held by the listener of an untagged network load
/// balancer in `foreign` (a network of no cluster). A teardown cannot delete the target group
/// while the listener holds it, so a test can stop a teardown midway and let go by deleting the
/// returned blocker. Returns (target group ARN, blocker ARN).
pub async fn held_target_group(
    c: &AwsClients,
    name: &str,
    vpc: &str,
    foreign: &Net,
    tags: &[(String, String)],
) -> (String, String) {
    let tg = tg_for(c, name, vpc, elbv2::types::ProtocolEnum::Tcp, tags).await;
    let blocker = nlb(c, foreign, &format!("{name}-fx"), &[]).await;
    listener_for(c, &blocker, &tg, elbv2::types::ProtocolEnum::Tcp).await;
    (tg, blocker)
}
