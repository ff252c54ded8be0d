//! Builders for the AWS resources the LocalStack tests, the benchmark and the demo create.
//!
//! [`fallible`] holds every SDK call once, returning errors that name the call: the demo records
//! what it made and reports a failure. The functions at this module's top level wrap them for
//! tests and the benchmark and panic on failure: a fixture that cannot be built is a broken test
//! setup, and the panic names the call.

use crate::model::AwsClients;
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

/// Panics with the call's error: for fixtures.
fn ok<T>(r: fallible::Built<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

pub mod fallible {
    //! Each builder once, fallible. An id the API does not return is an error too.

    use super::{ec2, elb, elbv2};
    use crate::model::AwsClients;
    use ec2::types::ResourceType;

    /// A builder call that failed, naming it.
    #[derive(Debug, thiserror::Error)]
    #[error("{call}: {message}")]
    pub struct BuildError {
        pub call: String,
        pub message: String,
    }

    pub type Built<T = String> = Result<T, BuildError>;

    fn err(call: &str) -> impl FnOnce(String) -> BuildError + '_ {
        move |message| BuildError {
            call: call.into(),
            message,
        }
    }

    /// The SDK error rendered with its cause chain (its Display alone says only "service error"),
    /// as `errors::failure_of` renders it.
    fn sdk<E: std::error::Error>(call: &str) -> impl FnOnce(E) -> BuildError + '_ {
        move |e| err(call)(aws_smithy_types::error::display::DisplayErrorContext(e).to_string())
    }

    fn id(call: &str, id: Option<&str>) -> Built {
        id.map(str::to_string)
            .ok_or_else(|| err(call)("the response carries no id".into()))
    }

    pub(crate) fn ec2_tags(
        rt: ResourceType,
        tags: &[(String, String)],
    ) -> ec2::types::TagSpecification {
        let mut b = ec2::types::TagSpecification::builder().resource_type(rt);
        for (k, v) in tags {
            b = b.tags(ec2::types::Tag::builder().key(k).value(v).build());
        }
        b.build()
    }

    pub async fn vpc(c: &AwsClients, cidr: &str, tags: &[(String, String)]) -> Built {
        let call = "CreateVpc";
        let out = c
            .ec2
            .create_vpc()
            .cidr_block(cidr)
            .tag_specifications(ec2_tags(ResourceType::Vpc, tags))
            .send()
            .await
            .map_err(sdk(call))?;
        id(call, out.vpc().and_then(|v| v.vpc_id()))
    }

    pub async fn subnet(
        c: &AwsClients,
        vpc: &str,
        cidr: &str,
        az: &str,
        tags: &[(String, String)],
    ) -> Built {
        let call = "CreateSubnet";
        let mut req = c
            .ec2
            .create_subnet()
            .vpc_id(vpc)
            .cidr_block(cidr)
            .availability_zone(az);
        if !tags.is_empty() {
            req = req.tag_specifications(ec2_tags(ResourceType::Subnet, tags));
        }
        let out = req.send().await.map_err(sdk(call))?;
        id(call, out.subnet().and_then(|s| s.subnet_id()))
    }

    /// A gateway VPC endpoint for S3 in `vpc` (the simplest kind to emulate; CAPA's interface
    /// endpoints delete the same way).
    pub async fn vpc_endpoint(c: &AwsClients, vpc: &str, tags: &[(String, String)]) -> Built {
        let call = "CreateVpcEndpoint";
        let mut req = c
            .ec2
            .create_vpc_endpoint()
            .vpc_id(vpc)
            .service_name("com.amazonaws.us-east-1.s3")
            .vpc_endpoint_type(ec2::types::VpcEndpointType::Gateway);
        if !tags.is_empty() {
            req = req.tag_specifications(ec2_tags(ResourceType::VpcEndpoint, tags));
        }
        let out = req.send().await.map_err(sdk(call))?;
        id(call, out.vpc_endpoint().and_then(|e| e.vpc_endpoint_id()))
    }

    /// Creates an internet gateway and attaches it to `vpc`.
    pub async fn internet_gateway(c: &AwsClients, vpc: &str, tags: &[(String, String)]) -> Built {
        let call = "CreateInternetGateway";
        let out = c
            .ec2
            .create_internet_gateway()
            .tag_specifications(ec2_tags(ResourceType::InternetGateway, tags))
            .send()
            .await
            .map_err(sdk(call))?;
        let igw = id(
            call,
            out.internet_gateway().and_then(|g| g.internet_gateway_id()),
        )?;
        c.ec2
            .attach_internet_gateway()
            .internet_gateway_id(&igw)
            .vpc_id(vpc)
            .send()
            .await
            .map_err(sdk("AttachInternetGateway"))?;
        Ok(igw)
    }

    /// Creates a route table in `vpc` associated with `subnets`.
    pub async fn route_table(
        c: &AwsClients,
        vpc: &str,
        subnets: &[&str],
        tags: &[(String, String)],
    ) -> Built {
        let call = "CreateRouteTable";
        let out = c
            .ec2
            .create_route_table()
            .vpc_id(vpc)
            .tag_specifications(ec2_tags(ResourceType::RouteTable, tags))
            .send()
            .await
            .map_err(sdk(call))?;
        let rt = id(call, out.route_table().and_then(|r| r.route_table_id()))?;
        for s in subnets {
            c.ec2
                .associate_route_table()
                .route_table_id(&rt)
                .subnet_id(*s)
                .send()
                .await
                .map_err(sdk("AssociateRouteTable"))?;
        }
        Ok(rt)
    }

    /// A VPC elastic IP: its allocation id.
    pub async fn elastic_ip(c: &AwsClients, tags: &[(String, String)]) -> Built {
        let call = "AllocateAddress";
        let out = c
            .ec2
            .allocate_address()
            .domain(ec2::types::DomainType::Vpc)
            .tag_specifications(ec2_tags(ResourceType::ElasticIp, tags))
            .send()
            .await
            .map_err(sdk(call))?;
        id(call, out.allocation_id())
    }

    pub async fn nat_gateway(
        c: &AwsClients,
        subnet: &str,
        allocation: &str,
        tags: &[(String, String)],
    ) -> Built {
        let call = "CreateNatGateway";
        let out = c
            .ec2
            .create_nat_gateway()
            .subnet_id(subnet)
            .allocation_id(allocation)
            .tag_specifications(ec2_tags(ResourceType::Natgateway, tags))
            .send()
            .await
            .map_err(sdk(call))?;
        id(call, out.nat_gateway().and_then(|n| n.nat_gateway_id()))
    }

    pub async fn security_group(
        c: &AwsClients,
        vpc: &str,
        name: &str,
        description: &str,
        tags: &[(String, String)],
    ) -> Built {
        let call = "CreateSecurityGroup";
        let mut req = c
            .ec2
            .create_security_group()
            .vpc_id(vpc)
            .group_name(name)
            .description(description);
        if !tags.is_empty() {
            req = req.tag_specifications(ec2_tags(ResourceType::SecurityGroup, tags));
        }
        let out = req.send().await.map_err(sdk(call))?;
        id(call, out.group_id())
    }

    /// One instance in `subnet`, in `groups` (none: the VPC's default group).
    pub async fn instance(
        c: &AwsClients,
        subnet: &str,
        groups: &[&str],
        ty: Option<ec2::types::InstanceType>,
        tags: &[(String, String)],
    ) -> Built {
        let call = "RunInstances";
        let mut req = c
            .ec2
            .run_instances()
            .image_id("ami-12345678")
            .set_instance_type(ty)
            .min_count(1)
            .max_count(1)
            .subnet_id(subnet);
        for g in groups {
            req = req.security_group_ids(*g);
        }
        if !tags.is_empty() {
            req = req.tag_specifications(ec2_tags(ResourceType::Instance, tags));
        }
        let out = req.send().await.map_err(sdk(call))?;
        id(call, out.instances().first().and_then(|i| i.instance_id()))
    }

    pub async fn volume(c: &AwsClients, az: &str, tags: &[(String, String)]) -> Built {
        let call = "CreateVolume";
        let out = c
            .ec2
            .create_volume()
            .availability_zone(az)
            .size(1)
            .tag_specifications(ec2_tags(ResourceType::Volume, tags))
            .send()
            .await
            .map_err(sdk(call))?;
        id(call, out.volume_id())
    }

    /// A detached network interface in `subnet` and `group`.
    pub async fn eni(
        c: &AwsClients,
        subnet: &str,
        group: &str,
        description: Option<&str>,
    ) -> Built {
        let call = "CreateNetworkInterface";
        let out = c
            .ec2
            .create_network_interface()
            .subnet_id(subnet)
            .groups(group)
            .set_description(description.map(str::to_string))
            .send()
            .await
            .map_err(sdk(call))?;
        id(
            call,
            out.network_interface()
                .and_then(|n| n.network_interface_id()),
        )
    }

    /// A classic load balancer with one TCP listener on `port`; returns its name.
    pub async fn classic_lb(
        c: &AwsClients,
        name: &str,
        subnets: &[&str],
        groups: &[&str],
        port: i32,
        tags: &[(String, String)],
    ) -> Built {
        let call = "CreateLoadBalancer (classic)";
        let listener = elb::types::Listener::builder()
            .protocol("TCP")
            .load_balancer_port(port)
            .instance_port(port)
            .build()
            .map_err(sdk(call))?;
        let mut req = c
            .elb
            .create_load_balancer()
            .load_balancer_name(name)
            .listeners(listener);
        for s in subnets {
            req = req.subnets(*s);
        }
        for g in groups {
            req = req.security_groups(*g);
        }
        for (k, v) in tags {
            req = req.tags(
                elb::types::Tag::builder()
                    .key(k)
                    .value(v)
                    .build()
                    .map_err(sdk(call))?,
            );
        }
        req.send().await.map_err(sdk(call))?;
        Ok(name.to_string())
    }

    fn v2_tags(tags: &[(String, String)]) -> Option<Vec<elbv2::types::Tag>> {
        let tags: Vec<_> = tags
            .iter()
            .map(|(k, v)| elbv2::types::Tag::builder().key(k).value(v).build())
            .collect();
        (!tags.is_empty()).then_some(tags)
    }

    /// An application or network load balancer; returns its ARN.
    pub async fn v2_lb(
        c: &AwsClients,
        name: &str,
        ty: elbv2::types::LoadBalancerTypeEnum,
        subnets: &[&str],
        tags: &[(String, String)],
    ) -> Built {
        let call = "CreateLoadBalancer (v2)";
        let out = c
            .elbv2
            .create_load_balancer()
            .name(name)
            .r#type(ty)
            .set_subnets(Some(subnets.iter().map(|s| s.to_string()).collect()))
            .set_tags(v2_tags(tags))
            .send()
            .await
            .map_err(sdk(call))?;
        id(
            call,
            out.load_balancers()
                .first()
                .and_then(|l| l.load_balancer_arn()),
        )
    }

    /// A target group on port 80; returns its ARN.
    pub async fn target_group(
        c: &AwsClients,
        name: &str,
        vpc: &str,
        protocol: elbv2::types::ProtocolEnum,
        tags: &[(String, String)],
    ) -> Built {
        let call = "CreateTargetGroup";
        let out = c
            .elbv2
            .create_target_group()
            .name(name)
            .protocol(protocol)
            .port(80)
            .vpc_id(vpc)
            .set_tags(v2_tags(tags))
            .send()
            .await
            .map_err(sdk(call))?;
        id(
            call,
            out.target_groups()
                .first()
                .and_then(|t| t.target_group_arn()),
        )
    }

    /// A listener on port 80 of `lb` forwarding to `tg`.
    pub async fn listener(
        c: &AwsClients,
        lb: &str,
        tg: &str,
        protocol: elbv2::types::ProtocolEnum,
    ) -> Built<()> {
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
            .map_err(sdk("CreateListener"))?;
        Ok(())
    }
}

pub async fn vpc(c: &AwsClients, tags: &[(String, String)]) -> String {
    ok(fallible::vpc(c, "10.0.0.0/16", tags).await)
}

pub async fn subnet(c: &AwsClients, vpc: &str, cidr: &str, az: &str) -> String {
    ok(fallible::subnet(c, vpc, cidr, az, &[]).await)
}

/// A VPC with one subnet in [`AZ`]: the network most tests put their resources in.
pub struct Net {
    pub vpc: String,
    pub subnet: String,
}

/// An untagged VPC with one subnet (tag it with [`tag`] to make it a cluster's, as CAPA does).
pub async fn network(c: &AwsClients) -> Net {
    network_in(c, AZ).await
}

/// [`network`] with its subnet in zone `az` (a client of another region needs one of its own).
pub async fn network_in(c: &AwsClients, az: &str) -> Net {
    let vpc = vpc(c, &[]).await;
    let subnet = subnet(c, &vpc, "10.0.1.0/24", az).await;
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

pub async fn vpc_endpoint(c: &AwsClients, vpc: &str, tags: &[(String, String)]) -> String {
    ok(fallible::vpc_endpoint(c, vpc, tags).await)
}

pub async fn sg(c: &AwsClients, vpc: &str, name: &str, tags: &[(String, String)]) -> String {
    ok(fallible::security_group(c, vpc, name, "test", tags).await)
}

pub async fn classic_lb(c: &AwsClients, name: &str, subnet: &str, tags: &[(String, String)]) {
    ok(fallible::classic_lb(c, name, &[subnet], &[], 80, tags).await);
}

pub async fn v2_lb(
    c: &AwsClients,
    name: &str,
    ty: elbv2::types::LoadBalancerTypeEnum,
    subnets: &[String],
    tags: &[(String, String)],
) -> String {
    let subnets: Vec<&str> = subnets.iter().map(String::as_str).collect();
    ok(fallible::v2_lb(c, name, ty, &subnets, tags).await)
}

pub async fn tg(c: &AwsClients, name: &str, vpc: &str, tags: &[(String, String)]) -> String {
    let http = elbv2::types::ProtocolEnum::Http;
    ok(fallible::target_group(c, name, vpc, http, tags).await)
}

pub async fn listener(c: &AwsClients, lb: &str, tg: &str) {
    let http = elbv2::types::ProtocolEnum::Http;
    ok(fallible::listener(c, lb, tg, http).await)
}

pub async fn instance(c: &AwsClients, subnet: &str, tags: &[(String, String)]) -> String {
    ok(fallible::instance(c, subnet, &[], None, tags).await)
}

pub async fn volume(c: &AwsClients, tags: &[(String, String)]) -> String {
    ok(fallible::volume(c, AZ, tags).await)
}

pub async fn eni(c: &AwsClients, subnet: &str, group: &str) -> String {
    ok(fallible::eni(c, subnet, group, None).await)
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
    let tcp = elbv2::types::ProtocolEnum::Tcp;
    let tg = ok(fallible::target_group(c, name, vpc, tcp.clone(), tags).await);
    let blocker = nlb(c, foreign, &format!("{name}-fx"), &[]).await;
    ok(fallible::listener(c, &blocker, &tg, tcp).await);
    (tg, blocker)
}
