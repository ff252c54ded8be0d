//! sweeper: one service, three collectors (cascade, tenant, external) on one shared engine.

pub mod api;
pub mod archive;
pub mod cascade;
pub mod catalog;
pub mod check;
pub mod cli;
pub mod collector;
pub mod commands;
pub mod config;
pub mod engine;
pub mod exit;
pub mod metrics;
pub mod run;
pub mod server;
pub mod telemetry;

/// Picks rustls' crypto provider once per process. kube and the AWS SDK both link rustls; with
/// more than one provider compiled in, rustls refuses to guess, so we choose aws-lc-rs (the SDK's).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}
pub mod external;
pub mod http_get;
pub mod status;
pub mod tenant;
#[cfg(test)]
mod testing;
pub mod uninstall;

/// docs/CONTRIBUTING.md's examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/CONTRIBUTING.md")]
pub struct Contributing;
