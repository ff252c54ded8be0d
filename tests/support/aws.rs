//! LocalStack for the external-collector tests: the builders and existence probes every
//! LocalStack test shares (from `sweeper_aws::testing`, the crate's `testing` feature,
//! on for tests only), clients for the test environment, and `sweeper gc` against it.

#![allow(unused_imports)] // each test binary uses a different part of the re-exports

use sweeper_aws::phases::AwsClients;
pub use sweeper_aws::testing::build::{
    Net, held_target_group, instance, network, network_in, nlb, sg, tag,
};
pub use sweeper_aws::testing::probe::{
    instance_state, sg_exists, tg_exists, v2_exists as lb_exists, vpc_exists,
};

/// Clients for the test environment's LocalStack (its coordinates from the environment facts),
/// with the SDK's standard retries for building fixtures.
pub async fn clients() -> AwsClients {
    sweeper_aws::testing::localstack::retrying_clients(&super::aws_config().await)
}

/// Clients acting as LocalStack account `account` (a 12-digit access key id is the account
/// there) in `region`: where a cluster's own session finds its resources.
pub async fn clients_as(region: &str, account: &str) -> AwsClients {
    let sdk = super::aws_config_as(region, account, "test").await;
    sweeper_aws::testing::localstack::retrying_clients(&sdk)
}

/// A tag list of one `key=value`.
pub fn tagged(key: &str, value: &str) -> Vec<(String, String)> {
    vec![(key.to_string(), value.to_string())]
}

/// Runs `sweeper gc <args>` against the test environment (LocalStack's coordinates included, for
/// `plan`); whether it succeeded, and its stdout and stderr.
pub fn sweeper_gc(args: &[&str]) -> (bool, String) {
    let mut all = vec!["gc"];
    all.extend_from_slice(args);
    sweeper_cli(&all)
}

/// Runs `sweeper <args>` as the test environment's admin, with LocalStack's coordinates and
/// sweeper's own credentials there; whether it succeeded, and its stdout and stderr.
pub fn sweeper_cli(args: &[&str]) -> (bool, String) {
    let out = sweeper_output(args);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// [`sweeper_cli`]'s run, with stdout and stderr apart (a JSON report on stdout).
pub fn sweeper_output(args: &[&str]) -> std::process::Output {
    let facts = super::EnvFacts::load();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sweeper"));
    cmd.args(args)
        .env("KUBECONFIG", facts.get("KUBECONFIG"))
        .envs(facts.aws_env());
    cmd.output().expect("run sweeper")
}

/// Runs `sweeper gc plan` for the cluster; returns its output, failing the test if it fails.
pub fn gc_plan(cluster: &str, ns: &str) -> String {
    let (ok, text) = sweeper_gc(&["plan", "--cluster-name", cluster, "-n", ns]);
    assert!(ok, "{text}");
    text
}
