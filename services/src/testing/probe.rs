//! Does it still exist? Checks by id, name or ARN (never by listing: listings are paginated and
//! LocalStack keeps what earlier runs left), shared by every LocalStack test. A call that fails
//! for any reason but "not found" panics: a broken probe must not read as "deleted".

use crate::model::AwsClients;
use aws_sdk_ec2 as ec2;
use aws_sdk_ec2::error::ProvideErrorMetadata;

pub async fn eni_exists(c: &AwsClients, id: &str) -> bool {
    let f = ec2::types::Filter::builder()
        .name("network-interface-id")
        .values(id)
        .build();
    !c.ec2
        .describe_network_interfaces()
        .filters(f)
        .send()
        .await
        .unwrap()
        .network_interfaces()
        .is_empty()
}

/// A VPC endpoint that still exists and is not on its way out (`deleted` and the like are gone).
pub async fn vpc_endpoint_exists(c: &AwsClients, id: &str) -> bool {
    match c
        .ec2
        .describe_vpc_endpoints()
        .vpc_endpoint_ids(id)
        .send()
        .await
    {
        Ok(out) => out
            .vpc_endpoints()
            .iter()
            .any(|e| !crate::policy::network::endpoint_gone(e.state().map(|s| s.as_str()))),
        Err(e) if e.code().is_some_and(|c| c.contains("NotFound")) => false,
        Err(e) => panic!("describe VPC endpoint {id}: {e:?}"),
    }
}

pub async fn sg_exists(c: &AwsClients, id: &str) -> bool {
    let f = ec2::types::Filter::builder()
        .name("group-id")
        .values(id)
        .build();
    !c.ec2
        .describe_security_groups()
        .filters(f)
        .send()
        .await
        .unwrap()
        .security_groups()
        .is_empty()
}

pub async fn classic_exists(c: &AwsClients, name: &str) -> bool {
    match c
        .elb
        .describe_load_balancers()
        .load_balancer_names(name)
        .send()
        .await
    {
        Ok(out) => !out.load_balancer_descriptions().is_empty(),
        Err(e) if is_not_found(&e) => false,
        Err(e) => panic!("DescribeLoadBalancers {name}: {e:?}"),
    }
}

pub async fn v2_exists(c: &AwsClients, arn: &str) -> bool {
    match c
        .elbv2
        .describe_load_balancers()
        .load_balancer_arns(arn)
        .send()
        .await
    {
        Ok(out) => !out.load_balancers().is_empty(),
        Err(e) if is_not_found(&e) => false,
        Err(e) => panic!("DescribeLoadBalancers {arn}: {e:?}"),
    }
}

pub async fn tg_exists(c: &AwsClients, arn: &str) -> bool {
    match c
        .elbv2
        .describe_target_groups()
        .target_group_arns(arn)
        .send()
        .await
    {
        Ok(out) => !out.target_groups().is_empty(),
        Err(e) if is_not_found(&e) => false,
        Err(e) => panic!("DescribeTargetGroups {arn}: {e:?}"),
    }
}

fn is_not_found<E: ProvideErrorMetadata>(e: &E) -> bool {
    e.code().is_some_and(|c| c.contains("NotFound"))
}

pub async fn vpc_exists(c: &AwsClients, id: &str) -> bool {
    let f = ec2::types::Filter::builder()
        .name("vpc-id")
        .values(id)
        .build();
    !c.ec2
        .describe_vpcs()
        .filters(f)
        .send()
        .await
        .unwrap()
        .vpcs()
        .is_empty()
}

pub async fn subnet_exists(c: &AwsClients, id: &str) -> bool {
    let f = ec2::types::Filter::builder()
        .name("subnet-id")
        .values(id)
        .build();
    !c.ec2
        .describe_subnets()
        .filters(f)
        .send()
        .await
        .unwrap()
        .subnets()
        .is_empty()
}

pub async fn volume_exists(c: &AwsClients, id: &str) -> bool {
    let f = ec2::types::Filter::builder()
        .name("volume-id")
        .values(id)
        .build();
    !c.ec2
        .describe_volumes()
        .filters(f)
        .send()
        .await
        .unwrap()
        .volumes()
        .is_empty()
}

pub async fn instance_state(c: &AwsClients, id: &str) -> String {
    let out = c
        .ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .unwrap();
    let i = &out.reservations()[0].instances()[0];
    i.state().unwrap().name().unwrap().as_str().to_string()
}

/// The tags of one EC2 resource, as `DescribeTags` reports them (sweeper itself never calls
/// `DescribeTags`, so a recorder of the teardown's calls does not see this check).
pub async fn tags_of(c: &AwsClients, id: &str) -> std::collections::BTreeMap<String, String> {
    let out = c
        .ec2
        .describe_tags()
        .filters(
            ec2::types::Filter::builder()
                .name("resource-id")
                .values(id)
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("DescribeTags {id}: {e}"));
    out.tags()
        .iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
        .collect()
}
