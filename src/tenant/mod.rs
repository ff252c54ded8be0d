//! The tenant collector: when a KubeZoo `Tenant` is deleted, remove every CRD, cluster-scoped
//! object and namespace of that tenant, then release the `kubezoo.io/tenant` finalizer.

pub mod descriptor;
pub mod id;
pub mod inventory;
pub mod metrics;
pub mod pass;
pub mod progress;
pub mod reconciler;
pub mod status;
