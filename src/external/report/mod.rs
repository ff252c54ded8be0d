//! A teardown pass's report (sweeper_aws::phases::PassReport) in words: the condition, Events and
//! summary the controller publishes ([`outcome`]) and the plan and pass lines `gc plan` and
//! `sweeper teardown` print ([`text`]). Pure: no I/O, so each rendering is a table test.

pub mod outcome;
pub mod text;
