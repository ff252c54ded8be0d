//! LocalStack fixtures: the shared connection, builders and unique names from
//! `sweeper_services::aws::testing`, plus what only these tests need: recorded clients, passes
//! until done and existence checks.

use std::time::Duration;
use sweeper_services::aws::sdk::ec2;
use sweeper_services::aws::sdk::ec2::error::ProvideErrorMetadata;
use sweeper_services::aws::teardown::{AwsClients, TeardownReport, TeardownRequest, teardown_pass};
use sweeper_services::aws::testing::{Recorder, localstack};

pub use sweeper_services::aws::testing::build::*;
pub use sweeper_services::aws::testing::localstack::{sdk, unique_cluster as cluster};

/// Clients that record every call (see `Recorder`), for LocalStack.
pub async fn env() -> (AwsClients, Recorder) {
    let sdk = sdk().await;
    let rec = Recorder::new();
    (rec.clients(&sdk), rec)
}

/// Plain SDK clients with the SDK's standard retries, for creating fixtures concurrently.
pub async fn retrying_clients() -> AwsClients {
    localstack::retrying_clients(&sdk().await)
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
