//! Locating a cluster's AWS resources: what a cluster owns, found without knowing any cleaner:
//! the ownership tags, the tagging-API scan, the Describe-based scans, and the inventory phase 2's
//! cleaners fill and read. Kind knowledge (which ARN is whose, what a delete needs) stays in each
//! cleaner. "Locate" is the AWS side's word; "discovery" is the Kubernetes API's
//! (`sweeper::engine::discovery`), except in the flag name `--alternative-discovery`.

pub mod by_id;
pub mod capa_tagged;
pub mod describe;
pub mod eks;
pub mod inventory;
pub mod placement;
pub mod tagging;
pub mod tags;
pub mod view;
