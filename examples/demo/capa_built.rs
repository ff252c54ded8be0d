//! What CAPA's own AWSCluster controller (scripts/go/capa-manager) built for the demo's cluster,
//! found in LocalStack by CAPA's tag (`sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned`):
//! the demo shows sweeper tearing down CAPA's real infrastructure, so it lists what is there rather
//! than what it expects. Only kinds of the demo's [`Kind`] are listed: the VPC's own main route
//! table, default security group and network ACL carry no tag and go with the VPC.

use crate::aws_world::{AwsRes, Kind, Network, capa_key};
use crate::kube_util::Res;
use sweeper_aws::phases::AwsClients;
use sweeper_aws::sdk::ec2::types::{Filter, Tag};

const ROLE: &str = "sigs.k8s.io/cluster-api-provider-aws/role";

fn role(tags: &[Tag]) -> Option<&str> {
    tags.iter()
        .find(|t| t.key() == Some(ROLE))
        .and_then(|t| t.value())
}

/// Everything carrying CAPA's owned tag for `cluster` in the region, and the network it forms.
pub async fn find(c: &AwsClients, cluster: &str) -> Res<(Vec<AwsRes>, Network)> {
    let owned = || {
        Filter::builder()
            .name(format!("tag:{}", capa_key(cluster)))
            .values("owned")
            .build()
    };
    let e = &c.ec2;
    let mut made = Vec::new();
    let vpcs = e.describe_vpcs().filters(owned()).send().await?;
    let vpc = match vpcs.vpcs() {
        [v] => v.vpc_id().unwrap_or_default().to_string(),
        other => {
            return Err(format!("CAPA built {} VPCs for {cluster}, not one", other.len()).into());
        }
    };
    made.push(AwsRes::new(Kind::Vpc, &vpc));
    let (mut public, mut private) = (Vec::new(), Vec::new());
    for s in e
        .describe_subnets()
        .filters(owned())
        .send()
        .await?
        .subnets()
    {
        let id = s.subnet_id().unwrap_or_default().to_string();
        match role(s.tags()) {
            Some("public") => public.push(id.clone()),
            _ => private.push(id.clone()),
        }
        made.push(AwsRes::new(Kind::Subnet, id));
    }
    let igws = e
        .describe_internet_gateways()
        .filters(owned())
        .send()
        .await?;
    for g in igws.internet_gateways() {
        made.extend(
            g.internet_gateway_id()
                .map(|i| AwsRes::new(Kind::InternetGateway, i)),
        );
    }
    let rts = e.describe_route_tables().filters(owned()).send().await?;
    for r in rts.route_tables() {
        made.extend(r.route_table_id().map(|i| AwsRes::new(Kind::RouteTable, i)));
    }
    let nats = e.describe_nat_gateways().filter(owned()).send().await?;
    for g in nats.nat_gateways() {
        if g.state().is_none_or(|s| s.as_str() != "deleted") {
            made.extend(g.nat_gateway_id().map(|i| AwsRes::new(Kind::NatGateway, i)));
        }
    }
    let eips = e.describe_addresses().filters(owned()).send().await?;
    for a in eips.addresses() {
        made.extend(a.allocation_id().map(|i| AwsRes::new(Kind::ElasticIp, i)));
    }
    let mut controlplane_sg = None;
    let sgs = e.describe_security_groups().filters(owned()).send().await?;
    for g in sgs.security_groups() {
        let id = g.group_id().unwrap_or_default().to_string();
        if role(g.tags()) == Some("controlplane") {
            controlplane_sg = Some(id.clone());
        }
        made.push(AwsRes::new(Kind::SecurityGroup, id));
    }
    made.extend(load_balancers(c, cluster).await?);
    let controlplane_sg =
        controlplane_sg.ok_or(format!("CAPA built no control-plane group for {cluster}"))?;
    let net = Network {
        vpc,
        public,
        private,
        controlplane_sg,
    };
    Ok((made, net))
}

/// CAPA's API-server load balancer and its target group (ELBv2: the demo's AWSCluster asks for
/// an NLB), told from the workload's and other clusters' by their tags.
async fn load_balancers(c: &AwsClients, cluster: &str) -> Res<Vec<AwsRes>> {
    let mut candidates = Vec::new();
    for lb in c
        .elbv2
        .describe_load_balancers()
        .send()
        .await?
        .load_balancers()
    {
        let kind = match lb.r#type().map(|t| t.as_str()) {
            Some("application") => Kind::Alb,
            _ => Kind::Nlb,
        };
        candidates.extend(lb.load_balancer_arn().map(|a| (kind, a.to_string())));
    }
    for tg in c
        .elbv2
        .describe_target_groups()
        .send()
        .await?
        .target_groups()
    {
        candidates.extend(
            tg.target_group_arn()
                .map(|a| (Kind::TargetGroup, a.to_string())),
        );
    }
    let key = capa_key(cluster);
    let mut out = Vec::new();
    // DescribeTags takes at most 20 ARNs.
    for chunk in candidates.chunks(20) {
        let arns: Vec<String> = chunk.iter().map(|(_, a)| a.clone()).collect();
        let tagged = c
            .elbv2
            .describe_tags()
            .set_resource_arns(Some(arns))
            .send()
            .await?;
        for d in tagged.tag_descriptions() {
            let owned = d
                .tags()
                .iter()
                .any(|t| t.key() == Some(key.as_str()) && t.value() == Some("owned"));
            let arn = d.resource_arn().unwrap_or_default();
            if let Some((kind, _)) = chunk.iter().find(|(_, a)| a == arn).filter(|_| owned) {
                out.push(AwsRes::new(*kind, arn));
            }
        }
    }
    Ok(out)
}
