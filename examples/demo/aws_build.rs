//! Creating AWS resources in LocalStack, tagged, each recorded as it is made.

use crate::aws_world::{AwsRes, Kind};
use crate::kube_util::Res;
use sweeper_services::aws::sdk::ec2::types::{DomainType, ResourceType, Tag, TagSpecification};
use sweeper_services::aws::sdk::elbv2::types::{
    Action, ActionTypeEnum, LoadBalancerTypeEnum, ProtocolEnum,
};
use sweeper_services::aws::sdk::{ec2, elb, elbv2};
use sweeper_services::aws::teardown::AwsClients;

/// Tag key/value pairs.
pub type Tags = Vec<(String, String)>;

fn spec(rt: ResourceType, tags: &Tags) -> TagSpecification {
    let mut b = TagSpecification::builder().resource_type(rt);
    for (k, v) in tags {
        b = b.tags(Tag::builder().key(k).value(v).build());
    }
    b.build()
}

fn v2_tags(tags: &Tags) -> Vec<elbv2::types::Tag> {
    tags.iter()
        .map(|(k, v)| elbv2::types::Tag::builder().key(k).value(v).build())
        .collect()
}

/// Records what it creates, in creation order.
pub struct Builder<'a> {
    c: &'a AwsClients,
    pub made: Vec<AwsRes>,
}

impl<'a> Builder<'a> {
    pub fn new(c: &'a AwsClients) -> Self {
        Builder { c, made: vec![] }
    }

    fn keep(&mut self, kind: Kind, id: Option<&str>) -> Res<String> {
        let id = id.ok_or_else(|| format!("LocalStack returned no id for a {}", kind.name()))?;
        self.made.push(AwsRes::new(kind, id));
        Ok(id.to_string())
    }

    pub async fn vpc(&mut self, cidr: &str, tags: &Tags) -> Res<String> {
        let out = self
            .c
            .ec2
            .create_vpc()
            .cidr_block(cidr)
            .tag_specifications(spec(ResourceType::Vpc, tags))
            .send()
            .await?;
        self.keep(Kind::Vpc, out.vpc().and_then(|v| v.vpc_id()))
    }

    pub async fn subnet(&mut self, vpc: &str, cidr: &str, az: &str, tags: &Tags) -> Res<String> {
        let out = self
            .c
            .ec2
            .create_subnet()
            .vpc_id(vpc)
            .cidr_block(cidr)
            .availability_zone(az)
            .tag_specifications(spec(ResourceType::Subnet, tags))
            .send()
            .await?;
        self.keep(Kind::Subnet, out.subnet().and_then(|s| s.subnet_id()))
    }

    pub async fn internet_gateway(&mut self, vpc: &str, tags: &Tags) -> Res<String> {
        let out = self
            .c
            .ec2
            .create_internet_gateway()
            .tag_specifications(spec(ResourceType::InternetGateway, tags))
            .send()
            .await?;
        let id = self.keep(
            Kind::InternetGateway,
            out.internet_gateway().and_then(|g| g.internet_gateway_id()),
        )?;
        self.c
            .ec2
            .attach_internet_gateway()
            .internet_gateway_id(&id)
            .vpc_id(vpc)
            .send()
            .await?;
        Ok(id)
    }

    pub async fn route_table(&mut self, vpc: &str, subnets: &[&str], tags: &Tags) -> Res<String> {
        let out = self
            .c
            .ec2
            .create_route_table()
            .vpc_id(vpc)
            .tag_specifications(spec(ResourceType::RouteTable, tags))
            .send()
            .await?;
        let id = self.keep(
            Kind::RouteTable,
            out.route_table().and_then(|r| r.route_table_id()),
        )?;
        for s in subnets {
            self.c
                .ec2
                .associate_route_table()
                .route_table_id(&id)
                .subnet_id(*s)
                .send()
                .await?;
        }
        Ok(id)
    }

    pub async fn nat_gateway(&mut self, subnet: &str, tags: &Tags) -> Res<String> {
        let eip = self
            .c
            .ec2
            .allocate_address()
            .domain(DomainType::Vpc)
            .tag_specifications(spec(ResourceType::ElasticIp, tags))
            .send()
            .await?;
        let alloc = self.keep(Kind::ElasticIp, eip.allocation_id())?;
        let out = self
            .c
            .ec2
            .create_nat_gateway()
            .subnet_id(subnet)
            .allocation_id(&alloc)
            .tag_specifications(spec(ResourceType::Natgateway, tags))
            .send()
            .await?;
        self.keep(
            Kind::NatGateway,
            out.nat_gateway().and_then(|n| n.nat_gateway_id()),
        )
    }

    pub async fn security_group(&mut self, vpc: &str, name: &str, tags: &Tags) -> Res<String> {
        let out = self
            .c
            .ec2
            .create_security_group()
            .vpc_id(vpc)
            .group_name(name)
            .description(format!("sweeper demo: {name}"))
            .tag_specifications(spec(ResourceType::SecurityGroup, tags))
            .send()
            .await?;
        self.keep(Kind::SecurityGroup, out.group_id())
    }

    pub async fn instance(&mut self, subnet: &str, sg: &str, tags: &Tags) -> Res<String> {
        let out = self
            .c
            .ec2
            .run_instances()
            .image_id("ami-12345678")
            .instance_type(ec2::types::InstanceType::T3Medium)
            .min_count(1)
            .max_count(1)
            .subnet_id(subnet)
            .security_group_ids(sg)
            .tag_specifications(spec(ResourceType::Instance, tags))
            .send()
            .await?;
        self.keep(
            Kind::Instance,
            out.instances().first().and_then(|i| i.instance_id()),
        )
    }

    pub async fn classic_elb(
        &mut self,
        name: &str,
        subnets: &[&str],
        sg: &str,
        port: i32,
        tags: &Tags,
    ) -> Res<String> {
        let mut req = self
            .c
            .elb
            .create_load_balancer()
            .load_balancer_name(name)
            .security_groups(sg)
            .listeners(
                elb::types::Listener::builder()
                    .protocol("TCP")
                    .load_balancer_port(port)
                    .instance_port(port)
                    .build()?,
            );
        for s in subnets {
            req = req.subnets(*s);
        }
        for (k, v) in tags {
            req = req.tags(elb::types::Tag::builder().key(k).value(v).build()?);
        }
        req.send().await?;
        self.keep(Kind::ClassicElb, Some(name))
    }

    pub async fn v2_lb(
        &mut self,
        name: &str,
        ty: LoadBalancerTypeEnum,
        subnets: &[&str],
        tags: &Tags,
    ) -> Res<String> {
        let kind = match ty {
            LoadBalancerTypeEnum::Application => Kind::Alb,
            _ => Kind::Nlb,
        };
        let out = self
            .c
            .elbv2
            .create_load_balancer()
            .name(name)
            .r#type(ty)
            .set_subnets(Some(subnets.iter().map(|s| s.to_string()).collect()))
            .set_tags(Some(v2_tags(tags)))
            .send()
            .await?;
        self.keep(
            kind,
            out.load_balancers()
                .first()
                .and_then(|l| l.load_balancer_arn()),
        )
    }

    pub async fn target_group(&mut self, name: &str, vpc: &str, tags: &Tags) -> Res<String> {
        let out = self
            .c
            .elbv2
            .create_target_group()
            .name(name)
            .protocol(ProtocolEnum::Http)
            .port(80)
            .vpc_id(vpc)
            .set_tags(Some(v2_tags(tags)))
            .send()
            .await?;
        self.keep(
            Kind::TargetGroup,
            out.target_groups()
                .first()
                .and_then(|t| t.target_group_arn()),
        )
    }

    pub async fn listener(&self, lb: &str, tg: &str, protocol: ProtocolEnum) -> Res<()> {
        self.c
            .elbv2
            .create_listener()
            .load_balancer_arn(lb)
            .protocol(protocol)
            .port(80)
            .default_actions(
                Action::builder()
                    .r#type(ActionTypeEnum::Forward)
                    .target_group_arn(tg)
                    .build(),
            )
            .send()
            .await?;
        Ok(())
    }

    pub async fn eni(&mut self, subnet: &str, sg: &str) -> Res<String> {
        let out = self
            .c
            .ec2
            .create_network_interface()
            .subnet_id(subnet)
            .groups(sg)
            .description("detached: node drained and deleted")
            .send()
            .await?;
        self.keep(
            Kind::NetworkInterface,
            out.network_interface()
                .and_then(|n| n.network_interface_id()),
        )
    }
}
