//! Per-cloud-service discovery and cleaners for sweeper. All AWS SDK dependencies compile here
//! only, so the rest of the workspace rebuilds fast.

pub mod aws;
