//! Integration tests of the AWS teardown against LocalStack. Each test uses its own cluster name
//! and its own VPC, and asserts what is deleted and what must survive in the same run.

mod behaviour;
mod by_id;
mod controllers;
mod dns;
mod eks;
mod fixtures;
mod leaks;
mod leaks_s3;
mod phase1;
mod phase2;
mod phase3;
mod revokes;
mod scan;
mod scan_iam;
mod security_groups;
mod sessions;
