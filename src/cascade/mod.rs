//! The cascade collector: the ownerReference garbage collector on the shared engine.
//!
//! Data flow: discovery -> one metadata watch per resource -> ONE graph writer -> two work queues
//! (attempt-to-delete, attempt-to-orphan) -> N workers making optimistic API calls.

pub mod absent_owners;
pub mod actions;
pub mod classify;
pub mod context;
pub mod descriptor;
pub mod driver;
pub mod failure;
pub mod gone_kinds;
pub mod metrics;
pub mod orphan;
pub mod query;
pub mod snapshot;
pub mod start;
pub mod worker;
pub mod writer;
