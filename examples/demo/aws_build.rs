//! Creating AWS resources in LocalStack, tagged, each recorded as it is made. The SDK calls are
//! sweeper-aws's `testing::build::fallible` (shared with the tests and the benchmark); this
//! only records what they made, in creation order, for the demo's report and clean-up.

use crate::aws_world::{AwsRes, Kind};
use crate::kube_util::Res;
use sweeper_aws::phases::AwsClients;
use sweeper_aws::sdk::ec2;
use sweeper_aws::sdk::elbv2::types::{LoadBalancerTypeEnum, ProtocolEnum};
use sweeper_aws::testing::build::fallible as build;

/// Tag key/value pairs.
pub type Tags = Vec<(String, String)>;

/// Records what it creates, in creation order.
pub struct Builder<'a> {
    c: &'a AwsClients,
    pub made: Vec<AwsRes>,
}

impl<'a> Builder<'a> {
    pub fn new(c: &'a AwsClients) -> Self {
        Builder { c, made: vec![] }
    }

    fn keep(&mut self, kind: Kind, id: String) -> String {
        self.made.push(AwsRes::new(kind, &id));
        id
    }

    pub async fn vpc(&mut self, cidr: &str, tags: &Tags) -> Res<String> {
        let id = build::vpc(self.c, cidr, tags).await?;
        Ok(self.keep(Kind::Vpc, id))
    }

    pub async fn subnet(&mut self, vpc: &str, cidr: &str, az: &str, tags: &Tags) -> Res<String> {
        let id = build::subnet(self.c, vpc, cidr, az, tags).await?;
        Ok(self.keep(Kind::Subnet, id))
    }

    pub async fn internet_gateway(&mut self, vpc: &str, tags: &Tags) -> Res<String> {
        let id = build::internet_gateway(self.c, vpc, tags).await?;
        Ok(self.keep(Kind::InternetGateway, id))
    }

    pub async fn route_table(&mut self, vpc: &str, subnets: &[&str], tags: &Tags) -> Res<String> {
        let id = build::route_table(self.c, vpc, subnets, tags).await?;
        Ok(self.keep(Kind::RouteTable, id))
    }

    pub async fn nat_gateway(&mut self, subnet: &str, tags: &Tags) -> Res<String> {
        let alloc = build::elastic_ip(self.c, tags).await?;
        let alloc = self.keep(Kind::ElasticIp, alloc);
        let id = build::nat_gateway(self.c, subnet, &alloc, tags).await?;
        Ok(self.keep(Kind::NatGateway, id))
    }

    pub async fn security_group(&mut self, vpc: &str, name: &str, tags: &Tags) -> Res<String> {
        let description = format!("sweeper demo: {name}");
        let id = build::security_group(self.c, vpc, name, &description, tags).await?;
        Ok(self.keep(Kind::SecurityGroup, id))
    }

    pub async fn instance(&mut self, subnet: &str, sg: &str, tags: &Tags) -> Res<String> {
        let ty = Some(ec2::types::InstanceType::T3Medium);
        let id = build::instance(self.c, subnet, &[sg], ty, tags).await?;
        Ok(self.keep(Kind::Instance, id))
    }

    pub async fn classic_elb(
        &mut self,
        name: &str,
        subnets: &[&str],
        sg: &str,
        port: i32,
        tags: &Tags,
    ) -> Res<String> {
        let id = build::classic_lb(self.c, name, subnets, &[sg], port, tags).await?;
        Ok(self.keep(Kind::ClassicElb, id))
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
        let id = build::v2_lb(self.c, name, ty, subnets, tags).await?;
        Ok(self.keep(kind, id))
    }

    pub async fn target_group(&mut self, name: &str, vpc: &str, tags: &Tags) -> Res<String> {
        let id = build::target_group(self.c, name, vpc, ProtocolEnum::Http, tags).await?;
        Ok(self.keep(Kind::TargetGroup, id))
    }

    pub async fn listener(&self, lb: &str, tg: &str, protocol: ProtocolEnum) -> Res<()> {
        Ok(build::listener(self.c, lb, tg, protocol).await?)
    }

    pub async fn eni(&mut self, subnet: &str, sg: &str) -> Res<String> {
        let description = "detached: node drained and deleted";
        let id = build::eni(self.c, subnet, sg, Some(description)).await?;
        Ok(self.keep(Kind::NetworkInterface, id))
    }
}
