//! The external collector: when an `AWSCluster` or `AWSManagedControlPlane` is deleted, tear down
//! its AWS resources in three phases (see services/src), holding the
//! `sweeper.dev/external-resource-gc` finalizer until the whole teardown succeeded.
//!
//! Four parts, each importing only those listed after it:
//! - [`commands`]: the one-shot commands, `gc configure`, `gc plan`, `scan` (also scheduled by
//!   `sweeper run`) and `teardown`.
//! - [`controller`]: what `sweeper run` runs, one finalizer controller per kind.
//! - [`report`]: a teardown pass's report in words (condition, Events, plan and pass lines), the
//!   one place the controller, `gc plan` and `teardown` get them from. Pure.
//! - [`core`]: the facts every part shares: the two kinds ([`core::kind::GcKind`]), the cluster's
//!   proven name ([`core::cluster`]), where it lives and as whom ([`core::identity`]), the
//!   annotations, the request builder, Cluster API's contract, name claims and the audit trail.
//!
//! No file of `core` or `report` imports `controller` or `commands`, and the controller imports
//! no command: tests/layout.rs checks it.

pub mod commands;
pub mod controller;
pub mod core;
pub mod report;
