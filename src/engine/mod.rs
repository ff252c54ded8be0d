//! The shared engine every collector stands on: discovery of deletable resources, the shared
//! rate-limited client, the dependency graph, work queues, the finalizer framework and leader election.

pub mod client;
pub mod discovery;
pub mod duration;
pub mod events;
pub mod failpoint;
pub mod finalizer;
pub mod finalizer_controller;
pub mod graph;
pub mod guard;
pub mod health;
pub mod leader;
pub mod meta;
pub mod name_index;
pub mod pause;
pub mod queue;
pub mod selector;
pub mod served;
pub mod teardown_registry;
pub mod transport;
pub mod watch;
