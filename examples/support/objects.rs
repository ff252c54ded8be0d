//! Bulk deletes shared by the benchmark drivers (`#[path = "support/objects.rs"] mod objects;`:
//! an example is one crate, so a shared file is included rather than imported).

use futures::StreamExt;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// Creates each `(api, object)` with `in_flight` creations at once; one that exists already is
/// fine, any other failure stops the benchmark.
pub async fn create_each<K>(objects: Vec<(Api<K>, K)>, in_flight: usize)
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    futures::stream::iter(objects)
        .map(|(api, o)| async move {
            match api.create(&PostParams::default(), &o).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => panic!("create {}: {e}", o.name_any()),
            }
        })
        .buffer_unordered(in_flight)
        .collect::<Vec<()>>()
        .await;
}

/// Deletes each `(api, name)` with `in_flight` deletions at once; one already gone is fine, any
/// other failure stops the benchmark (its figures would be wrong).
pub async fn delete_each<K>(objects: Vec<(Api<K>, String)>, in_flight: usize)
where
    K: Clone + DeserializeOwned + Debug,
{
    futures::stream::iter(objects)
        .map(|(api, name)| async move {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => panic!("delete {name}: {e}"),
            }
        })
        .buffer_unordered(in_flight)
        .collect::<Vec<()>>()
        .await;
}
