//! What the external collector's controller and commands share: the facts about one cluster and
//! the rules that decide whose it is. Imports neither the controller nor a command.

pub mod annotations;
pub mod audit;
pub mod capi;
pub mod claims;
pub mod cluster;
pub mod conditions;
pub mod contract;
pub mod identity;
pub mod kind;
pub mod request;
