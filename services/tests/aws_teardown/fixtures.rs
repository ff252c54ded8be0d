//! LocalStack fixtures: connection (failing loudly when LocalStack is down), unique cluster names,
//! resource builders and existence checks.

use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use sweeper_services::aws::interceptor::Recorder;
use sweeper_services::aws::sdk::aws_config::{self, BehaviorVersion, Region, SdkConfig};
use sweeper_services::aws::sdk::ec2::error::ProvideErrorMetadata;
use sweeper_services::aws::sdk::{ec2, elb, elbv2};
use sweeper_services::aws::teardown::{AwsClients, TeardownReport, TeardownRequest, teardown_pass};

pub const AZ: &str = "us-east-1a";

fn endpoint() -> String {
    std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| "http://127.0.0.1:4566".into())
}

/// Connects to LocalStack or panics with how to start it: a missing server must fail the test.
pub async fn sdk() -> SdkConfig {
    let url = endpoint();
    let hostport = url
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/');
    let reachable = hostport
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok())
        .unwrap_or(false);
    assert!(
        reachable,
        "LocalStack is not reachable at {url}: start it with `make env-up` (then `source .state/env`) and rerun"
    );
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(url)
        .region(Region::new(
            std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
        ))
        .credentials_provider(ec2::config::Credentials::new(
            "test", "test", None, None, "tests",
        ))
        .load()
        .await
}

/// Clients that record every call (see `Recorder`), for LocalStack.
pub async fn env() -> (AwsClients, Recorder) {
    let sdk = sdk().await;
    let rec = Recorder::new();
    (rec.clients(&sdk), rec)
}

/// Plain SDK clients with the SDK's standard retries, for creating fixtures concurrently.
pub async fn retrying_clients() -> AwsClients {
    let sdk = sdk().await;
    AwsClients {
        ec2: ec2::Client::new(&sdk),
        elb: elb::Client::new(&sdk),
        elbv2: elbv2::Client::new(&sdk),
        tagging: sweeper_services::aws::sdk::tagging::Client::new(&sdk),
    }
}

/// A cluster name no other test (or earlier run) uses.
pub fn cluster(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{:x}{}",
        nanos % 0xffff_ffff,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn capa(c: &str) -> (String, String) {
    (
        format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{c}"),
        "owned".into(),
    )
}
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

/// Passes until done (at most `max`), returning the reports.
pub async fn until_done(c: &AwsClients, req: &TeardownRequest, max: usize) -> Vec<TeardownReport> {
    let mut out = Vec::new();
    for _ in 0..max {
        let r = teardown_pass(c, req).await;
        let done = r.done;
        out.push(r);
        if done {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!(
        "not done after {max} passes; last report: {:#?}",
        out.last()
    );
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
    let mut req = c
        .elbv2
        .create_target_group()
        .name(name)
        .protocol(elbv2::types::ProtocolEnum::Http)
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
    c.elbv2
        .create_listener()
        .load_balancer_arn(lb)
        .protocol(elbv2::types::ProtocolEnum::Http)
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

// By name/ARN, not by listing: listings are paginated and LocalStack accumulates resources.
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

/// Index of the first recorded call equal to `op`, or panics listing the calls.
pub fn first(calls: &[String], op: &str) -> usize {
    calls
        .iter()
        .position(|c| c == op)
        .unwrap_or_else(|| panic!("{op} not called; calls: {calls:?}"))
}
