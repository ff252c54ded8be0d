//! The external collector: when an `AWSCluster` or `AWSManagedControlPlane` is deleted, tear down
//! its AWS resources in three phases (see services/src), holding the
//! `sweeper.dev/external-resource-gc` finalizer until the whole teardown succeeded.

pub mod annotations;
pub mod audit;
pub mod capi;
pub mod claims;
pub mod cluster;
pub mod cluster_watch;
pub mod collector;
pub mod conditions;
pub mod configure;
pub mod contract;
pub mod held;
pub mod identity;
pub mod metrics;
pub mod outcome;
pub mod plan;
pub mod request;
pub mod scan;
pub mod spec;
pub mod teardown;
