//! The external collector's one-shot commands: `sweeper gc configure` ([`configure`]), `sweeper gc
//! plan` ([`plan`]), `sweeper scan` ([`scan`], which `sweeper run --scan-interval` also schedules)
//! and `sweeper teardown` ([`teardown`]). Each takes its arguments as its own struct, so none
//! imports the CLI.

pub mod configure;
pub mod gc;
pub mod plan;
pub mod scan;
pub mod teardown;
