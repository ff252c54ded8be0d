//! Test seams shared by the unit tests: a mocked API server behind `kube::Client`.

pub mod mock_api;

pub use mock_api::MockApi;
