//! The workload cluster's AWS resources in LocalStack:
//! - CAPA-owned (`sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned`): what CAPA's own
//!   AWSCluster controller builds (the network, its security groups, the API server's load
//!   balancer: `capa_built.rs` finds them), or on the 1.20 fallback the demo's stand-in for it,
//!   plus a control-plane machine's instance;
//! - created by the workload (`kubernetes.io/cluster/<name>=owned`): a classic ELB for a Service
//!   of type LoadBalancer with its security group, an NLB and an ALB with target groups and
//!   security groups from the load balancer controller, and a detached ENI.
//!
//! Cluster `demo-wl-b` (a name sharing the prefix) gets a smaller world of its own, plus resources
//! it owns and shares with `demo-wl` (`kubernetes.io/cluster/demo-wl=shared`): all must survive.
//! It has no object here: it stands for another management cluster's cluster in the same account
//! (the demo marks it not ours for `sweeper scan`).
//!
//! Cluster `demo-old` is a leak from before: a cluster deleted before sweeper was installed, whose
//! network, NAT gateway, Service load balancer and group are still there. Nothing deletes it in
//! the demo; `sweeper scan` finds and prices it, `sweeper teardown` shows its plan.

use crate::aws_build::{Builder, Tags};
use crate::kube_util::Res;
use crate::step::{Item, count_by_kind, format_counts};
use sweeper_aws::phases::AwsClients;
use sweeper_aws::sdk::elbv2::types::{LoadBalancerTypeEnum, ProtocolEnum};

pub const CLUSTER: &str = "demo-wl";
pub const OTHER: &str = "demo-wl-b";
pub const LEAK: &str = "demo-old";

/// One AWS resource: its kind as the report prints it, and what identifies it.
#[derive(Clone, Debug)]
pub struct AwsRes {
    pub kind: Kind,
    pub id: String,
}

/// In the order the teardown deletes them (the report lists kinds in this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Instance,
    ClassicElb,
    Nlb,
    Alb,
    TargetGroup,
    NetworkInterface,
    SecurityGroup,
    NatGateway,
    ElasticIp,
    InternetGateway,
    RouteTable,
    Subnet,
    Vpc,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Instance => "ec2 instance",
            Kind::ClassicElb => "classic ELB",
            Kind::Nlb => "NLB",
            Kind::Alb => "ALB",
            Kind::TargetGroup => "target group",
            Kind::NetworkInterface => "ENI",
            Kind::SecurityGroup => "security group",
            Kind::NatGateway => "NAT gateway",
            Kind::ElasticIp => "Elastic IP",
            Kind::InternetGateway => "internet gateway",
            Kind::RouteTable => "route table",
            Kind::Subnet => "subnet",
            Kind::Vpc => "VPC",
        }
    }
}

impl AwsRes {
    pub fn new(kind: Kind, id: impl Into<String>) -> Self {
        AwsRes {
            kind,
            id: id.into(),
        }
    }

    pub fn item(&self) -> Item {
        Item::new(self.kind.name(), &self.id)
    }
}

/// `VPC 1, subnet 6, ...`, kinds in teardown order.
pub fn counts(rs: &[AwsRes]) -> String {
    let mut items: Vec<(Kind, Item)> = rs.iter().map(|r| (r.kind, r.item())).collect();
    items.sort_by_key(|(k, _)| *k);
    format_counts(&count_by_kind(items.iter().map(|(_, i)| i)))
}

pub fn capa_key(cluster: &str) -> String {
    format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{cluster}")
}

pub fn cloud_key(cluster: &str) -> String {
    format!("kubernetes.io/cluster/{cluster}")
}

fn capa(cluster: &str, role: &str, name: &str) -> Tags {
    vec![
        (capa_key(cluster), "owned".into()),
        (
            "sigs.k8s.io/cluster-api-provider-aws/role".into(),
            role.into(),
        ),
        ("Name".into(), name.into()),
    ]
}

fn cloud(cluster: &str, name: &str) -> Tags {
    vec![
        (cloud_key(cluster), "owned".into()),
        ("elbv2.k8s.aws/cluster".into(), cluster.into()),
        ("Name".into(), name.into()),
    ]
}

/// The workload cluster's network, as CAPA's controller built it or the demo's stand-in for it.
pub struct Network {
    pub vpc: String,
    pub public: Vec<String>,
    pub private: Vec<String>,
    /// CAPA's control-plane security group (a machine's instance sits in it).
    pub controlplane_sg: String,
}

/// The demo's own stand-in for what CAPA's AWSCluster controller builds, for the environment
/// that cannot run CAPA's controller (`SWEEPER_KUBE=1.20`: no CAPA CRDs): the network, CAPA's
/// security groups and an API-server ELB, with CAPA's tags.
pub async fn create_capa_like_network(c: &AwsClients) -> Res<(Vec<AwsRes>, Network)> {
    let n = CLUSTER;
    let mut b = Builder::new(c);
    let vpc = b
        .vpc("10.0.0.0/16", &capa(n, "common", &format!("{n}-vpc")))
        .await?;
    let mut public = Vec::new();
    let mut private = Vec::new();
    for (i, az) in ["us-east-1a", "us-east-1b"].iter().enumerate() {
        let tags = capa(n, "public", &format!("{n}-subnet-public-{az}"));
        public.push(
            b.subnet(&vpc, &format!("10.0.{}.0/24", 2 * i), az, &tags)
                .await?,
        );
        let tags = capa(n, "private", &format!("{n}-subnet-private-{az}"));
        private.push(
            b.subnet(&vpc, &format!("10.0.{}.0/24", 2 * i + 1), az, &tags)
                .await?,
        );
    }
    let public_refs: Vec<&str> = public.iter().map(String::as_str).collect();
    b.internet_gateway(&vpc, &capa(n, "common", &format!("{n}-igw")))
        .await?;
    b.route_table(
        &vpc,
        &public_refs,
        &capa(n, "common", &format!("{n}-rt-public")),
    )
    .await?;
    for (i, s) in private.iter().enumerate() {
        b.route_table(
            &vpc,
            &[s],
            &capa(n, "common", &format!("{n}-rt-private-{i}")),
        )
        .await?;
    }
    b.nat_gateway(&public[0], &capa(n, "common", &format!("{n}-nat")))
        .await?;
    let mut capa_sgs = Vec::new();
    for role in ["bastion", "node", "controlplane", "apiserver-lb"] {
        let name = format!("{n}-{role}");
        capa_sgs.push(b.security_group(&vpc, &name, &capa(n, role, &name)).await?);
    }
    let api_lb = format!("{n}-apiserver");
    b.classic_elb(
        &api_lb,
        &public_refs,
        &capa_sgs[3],
        6443,
        &capa(n, "apiserver", &api_lb),
    )
    .await?;
    let net = Network {
        vpc,
        public,
        private,
        controlplane_sg: capa_sgs.swap_remove(2),
    };
    Ok((b.made, net))
}

/// What lives in the cluster's network besides CAPA's AWSCluster controller's own work: a
/// control-plane machine's instance (CAPA's machine controller does not run here: the demo makes
/// it with the tags that controller gives it), and what the workload created through the cloud
/// provider and the load balancer controller (`kubernetes.io/cluster/<name>=owned`).
pub async fn create_workload(c: &AwsClients, net: &Network) -> Res<Vec<AwsRes>> {
    let n = CLUSTER;
    let mut b = Builder::new(c);
    let vpc = net.vpc.as_str();
    let public: Vec<&str> = net.public.iter().map(String::as_str).collect();
    let private: Vec<&str> = net.private.iter().map(String::as_str).collect();
    let (Some(first_private), Some(last_private)) = (private.first(), private.last()) else {
        return Err(format!("the network of {n} has no private subnet").into());
    };
    let cp = format!("{n}-control-plane-x7k2p");
    b.instance(
        first_private,
        &net.controlplane_sg,
        &capa(n, "control-plane", &cp),
    )
    .await?;
    let svc = "a5f0c9e21b7d44e8a3c6d1f2e9b8c7d6";
    let svc_sg = b
        .security_group(vpc, &format!("k8s-elb-{svc}"), &cloud(n, "k8s-elb"))
        .await?;
    b.classic_elb(svc, &public, &svc_sg, 80, &cloud(n, svc))
        .await?;
    let nlb = b
        .v2_lb(
            "k8s-ingress-nginx-5d1e8a0c3b",
            LoadBalancerTypeEnum::Network,
            &public,
            &cloud(n, "ingress"),
        )
        .await?;
    let nlb_tg = b
        .target_group("k8s-ingress-nginx-80-2c4f9a", vpc, &cloud(n, "ingress-80"))
        .await?;
    b.listener(&nlb, &nlb_tg, ProtocolEnum::Tcp).await?;
    b.security_group(vpc, "k8s-traffic-demo-wl-3e1f0b", &cloud(n, "lb-backend"))
        .await?;
    b.security_group(vpc, "k8s-shop-web-9c2d7e", &cloud(n, "shop-web"))
        .await?;
    let alb = b
        .v2_lb(
            "k8s-shop-web-7a9b4c1d2e",
            LoadBalancerTypeEnum::Application,
            &public,
            &cloud(n, "shop-web"),
        )
        .await?;
    let web_tg = b
        .target_group("k8s-shop-web-80-b41e6d", vpc, &cloud(n, "shop-web-80"))
        .await?;
    b.listener(&alb, &web_tg, ProtocolEnum::Http).await?;
    b.target_group("k8s-shop-api-8080-c3d5f7", vpc, &cloud(n, "shop-api"))
        .await?;
    b.eni(last_private, &svc_sg).await?;
    Ok(b.made)
}

/// Cluster `demo-wl-b`'s world, and (second) what it owns and shares with `demo-wl`.
pub async fn create_survivors(c: &AwsClients) -> Res<(Vec<AwsRes>, Vec<AwsRes>)> {
    let n = OTHER;
    let mut b = Builder::new(c);
    let vpc = b
        .vpc("10.1.0.0/16", &capa(n, "common", &format!("{n}-vpc")))
        .await?;
    let subnet = b
        .subnet(
            &vpc,
            "10.1.0.0/24",
            "us-east-1a",
            &capa(n, "public", &format!("{n}-subnet")),
        )
        .await?;
    let node = b
        .security_group(
            &vpc,
            &format!("{n}-node"),
            &capa(n, "node", &format!("{n}-node")),
        )
        .await?;
    b.classic_elb(
        &format!("{n}-apiserver"),
        &[&subnet],
        &node,
        6443,
        &capa(n, "apiserver", "api"),
    )
    .await?;
    b.v2_lb(
        "demo-wl-b-ingress",
        LoadBalancerTypeEnum::Network,
        &[&subnet],
        &cloud(n, "ingress"),
    )
    .await?;
    b.target_group("demo-wl-b-web", &vpc, &cloud(n, "web"))
        .await?;
    // Owned by demo-wl-b and shared with demo-wl: `shared` never means "delete".
    let own = b.made.len();
    let mut shared = cloud(n, "shared-ingress");
    shared.push((cloud_key(CLUSTER), "shared".into()));
    b.security_group(&vpc, "demo-shared-ingress", &shared)
        .await?;
    b.target_group("demo-shared-metrics", &vpc, &shared).await?;
    let shared = b.made.split_off(own);
    Ok((b.made, shared))
}

/// Cluster `demo-old`'s leftovers (see the module doc).
pub async fn create_leak(c: &AwsClients) -> Res<Vec<AwsRes>> {
    let n = LEAK;
    let mut b = Builder::new(c);
    let vpc = b
        .vpc("10.2.0.0/16", &capa(n, "common", &format!("{n}-vpc")))
        .await?;
    let subnet = b
        .subnet(
            &vpc,
            "10.2.0.0/24",
            "us-east-1a",
            &capa(n, "public", &format!("{n}-subnet")),
        )
        .await?;
    b.nat_gateway(&subnet, &capa(n, "common", &format!("{n}-nat")))
        .await?;
    let sg = b
        .security_group(&vpc, &format!("{n}-svc"), &cloud(n, "svc"))
        .await?;
    b.classic_elb(&format!("{n}-svc"), &[&subnet], &sg, 80, &cloud(n, "svc"))
        .await?;
    Ok(b.made)
}
